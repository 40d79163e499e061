"""`ads train` and `ads eval-sets`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ads_cli.common import console, fail, parse_assignments
from ads_core.core import defaults
from ads_core.core.errors import InputError

# request field -> the flag that sets it, for error messages (`tl.error_text`)
FLAGS = {
    "n_gpus_per_node": "--gpus",
    "total_training_steps": "--steps",
    "experiment_name": "--name",
    "eval_sets": "--eval-set",
    "overrides": "the command line (extra key=value arguments)",
}


def spell_flag(field: str) -> str:
    """How `ads train` spells a training option: ``dry_run`` -> ``--dry-run``, ``n_gpus_per_node`` -> ``--gpus``."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def register(app: typer.Typer) -> None:
    app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(train_cmd)
    app.command("eval-sets")(eval_sets_cmd)


def train_cmd(
    ctx: typer.Context,
    artifact: Annotated[str, typer.Argument(help="The final artifact: OUT/final/train.parquet (local or s3://).")],
    model: Annotated[
        str | None,
        typer.Option(help="Policy to train. Default: the model the difficulties were scored with (manifest)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the resolved verl config and command; don't train.")
    ] = False,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs per node.")] = 1,
    nnodes: Annotated[int, typer.Option(help="Number of nodes.")] = 1,
    ray_address: Annotated[
        str | None,
        typer.Option(help="http://head:8265 submits a Ray job; auto or ray://head:10001 joins a running cluster."),
    ] = None,
    sampler: Annotated[
        list[str] | None,
        typer.Option("--sampler", "-s", help="ADS sampler setting KEY=VALUE (data.ads_sampler.*), repeatable."),
    ] = None,
    eval_set: Annotated[
        list[str] | None,
        typer.Option(
            "--eval-set",
            help="Validation set: a name under OUT/eval or a .parquet path, repeatable. "
            "Default: every set in OUT/eval.",
        ),
    ] = None,
    no_eval: Annotated[bool, typer.Option("--no-eval", help="Train without validation sets.")] = False,
    steps: Annotated[int | None, typer.Option(help="trainer.total_training_steps.")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Checkpoints and metrics (default ./ads-runs/<name>).")] = None,
    name: Annotated[
        str | None, typer.Option(help="Experiment name (default <dataset>-ads; same name = resume).")
    ] = None,
    decontaminate: Annotated[
        str, typer.Option(help="off, report or drop training rows that match eval questions.")
    ] = "report",
) -> None:
    """Train GRPO with the ADS sampler on verl. Extra arguments are verl Hydra overrides (key=value)."""
    from ads_core.train import artifact as ta
    from ads_core.train import launch as tl
    from ads_core.train import plan as tr
    from ads_core.train.verl.config import ConfigError

    overrides = [a for a in ctx.args]
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise fail(f"unexpected arguments {bad}; verl overrides look like key=value")
    req = tr.TrainRequest(
        artifact_uri=artifact,
        model=model,
        n_gpus_per_node=gpus,
        nnodes=nnodes,
        ray_address=ray_address,
        sampler=parse_assignments(sampler, "--sampler"),
        eval_sets=[] if no_eval else (eval_set or None),
        overrides=overrides,
        run_dir=run_dir,
        experiment_name=name,
        total_training_steps=steps,
        decontaminate=decontaminate,
    )
    try:
        if not dry_run:
            tl.check_launch_environment(req)
        with console.status("checking the artifact and composing the verl config"):
            plan = tr.plan_training(req, materialize=not dry_run)
    except (ta.ArtifactError, tl.LaunchError, ConfigError, ValueError, InputError) as exc:
        raise fail(tl.error_text(exc, spell_flag)) from None
    for warning in plan.warnings_for(spell_flag):
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if dry_run:
        import sys

        sys.stdout.write(plan.config_yaml)
        sys.stdout.write(f"\n# command:\n# {plan.command_line}\n")
        console.print(
            f"dry run: {plan.artifact.rows} rows, {plan.artifact.clusters} clusters, batch "
            f"{plan.sampler_config.batch_size}; nothing launched",
            highlight=False,
        )
        return
    console.print(f"launching: {escape(plan.command_line)}", highlight=False)
    code = tl.launch(plan)
    if code != 0:
        raise fail(f"verl exited with status {code}; see the log above (run dir {plan.run_dir})")
    metrics = tl.headline(tl.final_metrics(plan))
    for key, value in sorted(metrics.items()):
        console.print(f"  {escape(key)}: {value:g}", highlight=False)


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
    from ads_core.evals import decontam
    from ads_core.evals import sets as ev

    sources = {str(k): str(v) for k, v in parse_assignments(source, "--set").items()}
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    try:
        results = ev.write_eval_sets(out, sources=sources, names=wanted, data_dir=data_dir, template=template)
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
