"""`ads train` and `ads eval-sets`.

Flags are generated from `TrainConfig` (`ads_core.train.options`: neutral options, each registered trainer's and
sampler kind's own), as `ads build`'s are from `BuildConfig`. Knobs without a flag take `--set section.field=value`
or a `--config` YAML; `-s KEY=VALUE` sets an ADS knob (or a trainer's `sampler_keys`); extra `key=value`
arguments go to the trainer that takes them (verl's Hydra overrides). A trainer or sampler kind named by class
path (`--trainer my_pkg.mod:MyTrainer`) brings its flags along, in `--help` too (`command_for_args`).
"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ads_cli import train_output
from ads_cli.common import console, fail, parse_assignments
from ads_cli.options import (
    chosen_in,
    command_with,
    common_parameters,
    config_parameters,
    resolve_config,
    spell_field,
    with_signature,
)
from ads_core.common import defaults
from ads_core.common import progress as progress_lines
from ads_core.common.errors import InputError, render_options
from ads_core.train.options import TrainConfig, model_for

# fields set by this command's own options, for error messages (`error_text`)
OWN_FLAGS = {"dry_run": "--dry-run", "eval_sets": "--eval-set", "allow_change": "--allow-change"}
OWN_FLAGS["overrides"] = "the command line (extra key=value arguments)"


def _sampler_knob(path: str) -> str | None:
    """`-s KEY (or --set PATH)` for what `-s KEY=VALUE` sets: an ADS knob, or a key the trainer routes there."""
    from ads_core.train.trainers import sampler_keys

    section, _, name = path.rpartition(".")
    if section == "sampler.ads" or sampler_keys().get(name) == section:
        return f"-s {name} (or --set {path})"
    return None


def spell_flag(field: str) -> str:
    """How `ads train` spells a training option (ads_cli.options.spell_field, the one speller): ``dry_run`` ->
    ``--dry-run``, ``n_gpus_per_node`` -> ``--gpus``, an ADS knob -> ``-s boundary_eps (or --set
    sampler.ads.boundary_eps)``, another knob without a flag -> ``--set trl.gradient_accumulation_steps``."""
    return spell_field(TrainConfig, OWN_FLAGS, _sampler_knob)(field)


CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def register(app: typer.Typer) -> None:
    app.command("train", context_settings=CONTEXT)(train_cmd)
    app.command("eval-sets")(eval_sets_cmd)


def train_cmd(
    ctx: typer.Context,
    artifact: Annotated[str, typer.Argument(help="The final artifact: OUT/final/train.parquet (local or s3://).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check everything and print the resolved plan and config; don't train.")
    ] = False,
    ads_knobs: Annotated[
        list[str] | None,
        typer.Option(
            "--ads",
            "-s",
            help="An ADS sampler knob KEY=VALUE (sampler.ads.KEY; a trainer's options that sit among the ADS "
            "knobs, such as verl's cluster_metrics_interval and strict_ids: that trainer's section), repeatable.",
        ),
    ] = None,
    eval_set: Annotated[
        list[str] | None,
        typer.Option(
            "--eval-set",
            help="Validation set, repeatable, as ads eval --set takes it: a name under OUT/eval, a named set "
            "(math500, aime24, aime25, amc23; minerva from $ADS_EVAL_DATA_DIR), a .parquet, a raw file (JSONL, "
            "CSV, ...; formatted with the training set's template) or NAME=PATH; validated every --eval-steps "
            "steps. Default: every set in OUT/eval.",
        ),
    ] = None,
    no_eval: Annotated[
        bool, typer.Option("--no-eval", help="Train without validation sets (no validation, no decontamination).")
    ] = False,
    allow_change: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-change",
            help="On a resume, change this option on purpose (e.g. learning_rate), repeatable; recorded in "
            "RUN_DIR/run.json. Any other option that differs from the run's refuses the resume.",
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            help="Run as a named `ads-train` flow run on the Prefect server in PREFECT_API_URL (`ads server`): its "
            "plan, progress, plots, metrics and warnings are artifacts in the UI.",
        ),
    ] = False,
    **options: Any,
) -> None:
    """Train GRPO with the ADS sampler (or a baseline): TRL on CPU or a node's GPUs, verl on GPUs with Ray.

    --trainer auto (the default) picks verl where CUDA GPUs, verl and a rollout engine are present, TRL
    otherwise. The same --name (or --run-dir) resumes from the newest checkpoint. Extra key=value arguments are
    verl Hydra overrides. Every option is a field of ads_core/train/options.py's tree; --set reaches the rest.
    """
    from ads_core.train import run as trun
    from ads_core.train.errors import error_text
    from ads_core.train.trainers import sampler_keys

    only_rank_zero_speaks()
    progress_lines.enable_when_logged()  # stdout to a file: a line per step there, as the run goes
    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    beside_ads = sampler_keys()  # a trainer's options that sit among the ADS knobs (verl: its sampler adapter's)
    for key, value in parse_assignments(ads_knobs, "--ads").items():
        options[f"{beside_ads.get(key, 'sampler__ads')}__{key}"] = value
    cfg = resolve_config(TrainConfig, options, config_file, assignments, model_for=model_for)
    extra = list(ctx.args)
    bad = [a for a in extra if "=" not in a]
    if bad:
        raise fail(f"unexpected arguments {bad}; trainer overrides look like key=value")
    changes: dict[str, Any] = {}
    if no_eval or eval_set:
        changes["eval_sets"] = [] if no_eval else list(eval_set or [])
    if allow_change:
        changes["allow_change"] = list(allow_change)
    if extra:  # the trainer option that takes them (verl: its Hydra overrides)
        from ads_core.train.trainers import extra_arguments_field

        field = extra_arguments_field()
        if field is None:
            raise fail(f"unexpected arguments {extra}; no trainer takes extra key=value arguments")
        section, name = field.split(".")
        changes[field] = [*getattr(getattr(cfg, section), name), *extra]
    if publish:
        cfg = cfg.with_overrides(changes) if changes else cfg
        raise train_output.publish_run(artifact, cfg, dry_run)
    try:
        cfg = cfg.with_overrides(changes) if changes else cfg
        with console.status("checking the artifact and planning the run"):
            plan = trun.prepare(artifact, cfg, dry_run=dry_run)
    except (ValueError, InputError, RuntimeError) as exc:
        raise fail(error_text(exc, spell_flag)) from None
    for warning in plan.warnings_for(spell_flag):
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for note in plan.notes:
        console.print(f"note: {escape(render_options(note, ('eval_sets',), spell_flag))}", highlight=False)
    if dry_run:
        show_dry_run(plan)
        return
    command = trun.launch_command(cfg, sys.argv[1:])
    if command is not None:  # several processes: this command again under the trainer's launcher
        import subprocess

        console.print(f"starting: {escape(' '.join(command))}", highlight=False)
        raise typer.Exit(subprocess.call(command))
    hold_run_folder(ctx, plan.run_dir)
    if not trun.trainer_of(plan).streams_steps:  # a subprocess: its own output is the progress
        console.print(
            f"training with {escape(plan.trainer)} ({escape(plan.trainer_reason)}): {escape(plan.part.launch_line())}",
            highlight=False,
        )
        try:
            result = trun.execute(plan)
        except (ValueError, RuntimeError) as exc:
            raise fail(error_text(exc, spell_flag)) from None
        for key, value in sorted(result.headline.items()):
            console.print(f"  {escape(key)}: {value:g}", highlight=False)
        return
    train_output.train_with_progress(plan, trun, spell_flag)


def hold_run_folder(ctx: typer.Context, run_dir: str) -> None:
    """Hold the run folder for the rest of this command (released when it ends), before any output: a second
    `ads train` on the same folder gets one `error:` line and nothing else (training nests in this hold)."""
    from contextlib import ExitStack

    from ads_core.train.errors import error_text
    from ads_core.train.resume.lock import holding_run

    stack = ExitStack()
    try:
        stack.enter_context(holding_run(run_dir))
    except (ValueError, RuntimeError) as exc:
        raise fail(error_text(exc, spell_flag)) from None
    ctx.call_on_close(stack.close)


def show_dry_run(plan: Any) -> None:
    """The trainer's dry-run text on stdout (verl: its resolved config and command; TRL: the resolved
    TrainConfig and batch layout), then one line on what was checked."""
    sys.stdout.write(plan.part.dry_run_text())
    console.print(
        f"dry run ({plan.trainer}: {plan.trainer_reason}): {plan.artifact.rows} rows, {plan.artifact.clusters} "
        f"clusters, {plan.prompts_per_step} prompts per step; nothing launched",
        highlight=False,
    )


def only_rank_zero_speaks() -> None:
    """Under a launcher (torchrun: RANK), every process but rank 0 stays quiet: one console, one set of lines."""
    import logging
    import os

    if os.environ.get("RANK", "0") != "0":
        console.quiet = True
        logging.getLogger().setLevel(logging.ERROR)
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


OWN_OPTIONS = (
    "--dry-run",
    "--ads",
    "-s",
    "--eval-set",
    "--no-eval",
    "--allow-change",
    "--publish",
    "--config",
    "--set",
)


def config_flags(model: Any) -> list[inspect.Parameter]:
    """The flags, `--config` and `--set` of the config tree MODEL."""
    return config_parameters(model, ("", *model.sections()), taken=OWN_OPTIONS) + common_parameters(
        model, "--set trl.gradient_accumulation_steps=2", "ads train --trainer trl --dry-run"
    )


def command_for_args(args: list[str]) -> Any:
    """`ads train` with the flags of a trainer or sampler kind that ARGS name by class path (None: the registered
    ones suffice, or it can't be imported, which the command then reports in one line)."""
    try:
        chosen = chosen_in(args, {"--trainer": "trainer", "--sampler": "sampler.kind"})
        model = model_for(*chosen)
        knobs = knobs_help(str(chosen[1].get("sampler.kind") or (chosen[0].get("sampler") or {}).get("kind") or ""))
    except Exception:  # noqa: BLE001 - reported by the command itself, with the option to fix
        return None
    if model is TrainConfig:
        return None
    return command_with(train_cmd, "train", config_flags(model), CONTEXT, knobs)


def knobs_help(kind: str) -> str:
    """A class-path sampler kind's knobs for `--help` (they have no flags: the trainers' flags take the common
    names), each with its description and default, and how to set them."""
    from ads_core.sampler.kinds import kind_spec

    if ":" not in kind and "." not in kind:
        return ""
    spec = kind_spec(kind)
    if spec.options is None:
        return f"Sampler kind {kind}: no knobs."
    knobs = "; ".join(
        f"{name} (default {field.get_default(call_default_factory=True)}): {(field.description or '').rstrip('.')}"
        for name, field in spec.options.model_fields.items()
    )
    return f"Sampler kind {kind}, knobs set with --set sampler.{spec.section}.KNOB=VALUE: {knobs}."


with_signature(train_cmd, config_flags(TrainConfig))
train_cmd.for_arguments = command_for_args  # type: ignore[attr-defined] # read by ads_cli.common.OneLineErrors


def eval_sets_cmd(
    out: Annotated[
        str, typer.Option("--out", "-o", help="Output root; writes OUT/eval/<name>.parquet.")
    ] = defaults.DEFAULT_OUT,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="NAME=PATH of an eval set (any format `ads format` reads), repeatable; replaces the "
            "default set of that name.",
        ),
    ] = None,
    names: Annotated[str | None, typer.Option(help="Comma-separated default sets (math500,aime24,amc23).")] = None,
    data_dir: Annotated[
        str | None,
        typer.Option(
            help="Directory with math500/, aime24/, amc23/ "
            "(default: $ADS_EVAL_DATA_DIR, else the copies shipped in "
            "the package)."
        ),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(help="Prompt template with {question} (default: the training set's, from OUT/formatted)."),
    ] = None,
    train: Annotated[
        str | None,
        typer.Option(
            help="Training artifact to check for contamination (default: OUT/final/train.parquet if present)."
        ),
    ] = None,
    drop: Annotated[
        bool,
        typer.Option(
            "--drop",
            help="Also write OUT/eval/train_decontaminated.parquet "
            "without the matching rows, and those rows to "
            "train_decontaminated.rejects.parquet (reason contaminated).",
        ),
    ] = False,
) -> None:
    """Write validation sets (MATH-500, AIME24, AMC23) in verl's schema and check the training set against them."""
    from ads_core import storage
    from ads_core.evaluation.sets import catalog as ev
    from ads_core.evaluation.sets import decontam
    from ads_core.evaluation.sets.writer import write_eval_sets

    sources = {str(k): str(v) for k, v in parse_assignments(source, "--set").items()}
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    try:
        results = write_eval_sets(out, sources=sources, names=wanted, data_dir=data_dir, template=template)
    except InputError as exc:
        raise fail(str(exc)) from None
    table = Table(title="eval sets", show_header=True)
    for col in ("set", "rows", "rejected", "file"):
        table.add_column(col)
    for r in results.values():
        table.add_row(r.name, str(r.rows), str(r.rejected), escape(r.uri))
    console.print(table)
    train_uri = train or storage.join(out, "final", "train.parquet")
    if not storage.exists(train_uri):
        if train:
            raise fail(f"{train}: no such training artifact")
        return
    drop_to = storage.join(ev.eval_dir(out), "train_decontaminated.parquet") if drop else None
    try:
        report = decontam.decontaminate(train_uri, {r.name: r.uri for r in results.values()}, drop_to=drop_to)
    except InputError as exc:
        raise fail(f"{train_uri}: {exc}") from None
    report_uri = storage.join(ev.eval_dir(out), ev.REPORT_NAME)
    storage.write_json(report_uri, report.to_dict())
    console.print(
        f"decontamination: {report.contaminated} of {report.train_rows} training rows match an eval "
        f"question (exact or {report.ngram}-gram overlap); report: {escape(report_uri)}",
        highlight=False,
    )
    for name, hits in report.hits.items():
        m = report.methods[name]
        console.print(
            f"  {name}: {report.matches[name]} (exact {m['exact']}, {report.ngram}-gram {m['ngram']})", highlight=False
        )
        for hit in hits[:3]:
            console.print(
                f"    row {hit['row']} ~ {name} row {hit['eval_row']} ({hit['method']}, overlap "
                f"{hit['overlap']:.0%}): {escape(hit['train_text'][:80])!r} ~ "
                f"{escape(hit['eval_text'][:80])!r}",
                highlight=False,
            )
    if report.output_uri:
        console.print(
            f"without them: {escape(report.output_uri)}; dropped rows: {escape(report.rejects_uri or '')}",
            highlight=False,
        )
