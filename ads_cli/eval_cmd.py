"""`ads eval`: measure policies the way the ADS paper does (mean@k, pass@k, maj@k per eval set).

Flags come from `EvalConfig` (`ads_core/config/eval.py`) and its `grader` section; `--set NAME|PATH` chooses
the eval sets (repeatable), `--out` the folder. The work is `ads_core.evaluation`; this module resolves the
arguments, shows a progress bar and prints the tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ads_cli.common import bars, console, fail, tell
from ads_cli.options import common_parameters, config_parameters, resolve_config, with_signature
from ads_core.common.errors import InputError
from ads_core.config.eval import EvalConfig

SECTIONS = ("", "grader")
DEFAULT_ROOT = "ads-eval"


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)


class NowColumn(ProgressColumn):
    """Where the batch in progress stands (its tokens so far), as the heartbeat says it in a log."""

    def render(self, task: Any) -> Text:
        from ads_core.common import progress as progress_lines

        now = progress_lines.current()
        return Text(now.split(" (", 1)[1].rstrip(")") if " (" in now else "")


class RateColumn(ProgressColumn):
    """Problems per second: rich's recent rate, else the whole run's (one chunk gives rich no rate)."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        if not speed and task.completed and task.elapsed:
            speed = task.completed / task.elapsed
        return Text(f"{speed:.2f} problems/s" if speed else "– problems/s")


def eval_cmd(
    policies: Annotated[
        list[str],
        typer.Argument(
            help="Policies: a model folder, a checkpoint folder, a run folder or name (ads-runs/NAME: its final "
            "model, else its newest checkpoint), a built-in model (default, tiny, bench, smollm2), or a hub id in the "
            "local cache.",
            metavar="MODEL_OR_RUN",
            show_default=False,
        ),
    ],
    out: Annotated[
        str | None,
        typer.Option(
            "--out", "-o", help="Output folder (default ads-eval/<name>; with several policies, OUT/<name> each)."
        ),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Eval set, repeatable: a named set (math500, aime24, aime25, amc23; minerva, gpqa_diamond, "
            "mmlu_pro from --data-dir), paper (every set of the paper's table there is; the missing ones are "
            "listed with how to add them), NAME=PATH, or a file (formatted .parquet, raw data, or a "
            "multiple-choice file in its published layout). Default: math500, aime24, amc23.",
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            help="Also publish the tables as Prefect artifacts (flow ads-eval, run eval-<policy>-<time>) on the "
            "server in PREFECT_API_URL.",
        ),
    ] = False,
    **options: Any,
) -> None:
    """Evaluate policies on eval sets: k samples per problem, graded; mean@k, pass@k and maj@k per set.

    Writes completions.parquet (every sample with its grade), summary.json and table.md (the paper's layout).
    The prompt template is a training run's own, else --template, else ads_think; the console, summary.json
    and table.md name it. The same command again resumes a killed evaluation from the completions it wrote;
    one ads eval per --out at a time.
    """
    from ads_core.common import progress as progress_lines
    from ads_core.evaluation import backends, outfolder
    from ads_core.evaluation import policies as pol
    from ads_core.evaluation.api import evaluate_model
    from ads_core.evaluation.report import markdown_table
    from ads_core.evaluation.sets.problems import expand, load_problems, resolve_sets
    from ads_core.evaluation.sets.templates import choose_template
    from ads_core.models import ModelLoadError

    progress_lines.enable_when_logged()  # stdout to a file: the start line, a line per batch and the heartbeat there
    config_file = options.pop("config_file", None)
    cfg = resolve_config(EvalConfig, options, config_file, None)
    try:  # everything that does not need a model, before any model loads
        if sets:
            cfg = cfg.with_overrides({"sets": list(sets)})
        specs, missing = expand(cfg.sets, cfg.data_dir)
        if not specs:
            raise InputError("no eval set available; " + " | ".join(missing))
        resolved_sets = resolve_sets(specs, cfg.data_dir)
        found = pol.unique_names([pol.resolve_policy(p) for p in policies])
        chosen = {policy.name: choose_template(cfg.template, policy.run_dir) for policy in found}
        for text in dict.fromkeys(t.text for t, _ in chosen.values()):
            load_problems(resolved_sets, text, cfg.limit)  # bad rows fail here
        several = len(found) > 1
        root = out if (out and several) else DEFAULT_ROOT
        folders = {p.name: str(Path(root) / p.name) if several or not out else out for p in found}
        for folder in folders.values():
            outfolder.check(folder)
        backend = backends.choose(cfg.backend)
        cfg = cfg.replaced(backend=backend)
        if publish:  # no server: refused now, not after the evaluation
            from ads_prefect.flows.ads_eval import needs_server

            needs_server()
    except (InputError, ValueError) as exc:
        raise fail(str(exc)) from None
    for line in missing:
        console.print(f"missing from the paper's table: {escape(line)}", highlight=False, soft_wrap=True)
    summaries: dict[str, Any] = {}
    published: dict[str, str] = {}
    if found:
        from ads_core.grading.api import start_verifier

        start_verifier()  # the verifier's start (seconds) is nobody's grade time, and the backend's children share it
    for policy in found:
        template, warning = chosen[policy.name]
        folder = folders[policy.name]
        if warning:
            console.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)
        tell(start_line(policy, backend, cfg, resolved_sets, template.describe(), folder))
        run_cfg = cfg.replaced(template=template.text)
        label = {"name": template.name, "source": template.source}
        try:
            result = _run(evaluate_model, policy, resolved_sets, run_cfg, folder, label)
        except (InputError, ModelLoadError, ValueError) as exc:
            raise fail(str(exc)) from None
        show(policy.name, result, cfg.k)
        summaries[policy.name] = _summary(result)
        published[policy.name] = str(Path(folder).resolve()) if storage_is_local(folder) else folder
    table = markdown_table(summaries)
    console.print(table.split("### pass@")[0].rstrip(), highlight=False, markup=False, soft_wrap=True)
    template_line = "Prompt template: " + table.rsplit("Prompt template: ", 1)[1].strip()
    console.print(template_line, highlight=False, markup=False, soft_wrap=True)
    if several:
        from ads_core import storage

        table_uri = storage.join(root, "table.md")
        storage.write_bytes(table_uri, table.encode("utf-8"))
        console.print(f"table of all policies: {escape(table_uri)}", highlight=False)
    if publish:
        from ads_prefect.flows.ads_eval import publish_evaluation

        try:
            url = publish_evaluation(published)
        except InputError as exc:
            raise fail(str(exc)) from None
        console.print(f"published: {escape(url)}", highlight=False)


def start_line(policy: Any, backend: str, cfg: EvalConfig, sets: dict[str, str], template: str, folder: str) -> str:
    """What an evaluation will do, before the policy loads: the sets, k, the most tokens a completion may take
    (resolved for the device it will run on), the problems per set and the template."""
    from ads_core.evaluation.api import device_of

    resolved = cfg.for_device(device_of(cfg))
    limit = f", at most {cfg.limit} problems per set" if cfg.limit else ""
    return (
        f"evaluating {policy.name} ({policy.path}) with {backend}: sets {', '.join(sets)}{limit}, k={cfg.k}, "
        f"max_tokens={resolved.max_tokens}, template {template} -> {folder}"
    )


def storage_is_local(uri: str) -> bool:
    from ads_core import storage

    return storage.is_local(uri)


def _run(
    evaluate_model: Any, policy: Any, sets: dict[str, str], cfg: EvalConfig, folder: str, template: dict[str, str]
) -> Any:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        NowColumn(),
    )
    from ads_core.common import progress as progress_lines
    from ads_core.train.resume.identity import trained_facts

    lines = progress_lines.ChunkLines(f"eval {policy.name}", None, "problems")
    with (
        bars(*columns) as progress,
        progress_lines.heartbeat(f"eval {policy.name}: loading the policy and the sets"),
    ):
        task = progress.add_task(f"{policy.name} problems", total=None)

        def advance(n: int) -> None:
            lines.advance(n)
            progress.advance(task, n)

        def on_problems(total: int) -> None:
            lines.set_total(total)
            progress_lines.phase(f"eval {policy.name}: loading the policy", announce=False)
            progress.update(task, total=total)

        return evaluate_model(
            policy.path,
            sets,
            cfg,
            out=folder,
            policy=policy.name,
            progress=advance,
            on_problems=on_problems,
            template=template,
            trained=trained_facts(policy.path),  # a run's policy: what trained it, into summary.json
        )


def _summary(result: Any) -> dict[str, Any]:
    from ads_core import storage

    return storage.read_json(result.files["summary.json"])  # type: ignore[no-any-return]


def interval_text(values: dict[str, Any]) -> str:
    """A set's 95% interval in percent; "-" where its number of problems allows none (the average has none)."""
    if values.get("ci_low") is None or values.get("ci_high") is None:
        return "-"
    return f"[{100 * values['ci_low']:.1f}, {100 * values['ci_high']:.1f}]"


def show(name: str, result: Any, k: int) -> None:
    """The per set table (percent) and where the files went."""
    table = Table(title=f"{name}: {result.generated} problems generated, {result.seconds:.1f} s", show_header=True)
    for col in ("set", "n", f"mean@{k}", "95% CI", f"pass@{k}", f"maj@{k}"):
        table.add_column(col, justify="left" if col == "set" else "right")
    rows = [*result.per_set.items(), ("average", result.overall)]
    for set_name, v in rows:
        ci = interval_text(v)
        table.add_row(
            set_name,
            str(v["n"]),
            f"{100 * v['mean_at_k']:.2f}",
            ci,
            f"{100 * v['pass_at_k']:.2f}",
            f"{100 * v['maj_at_k']:.2f}",
        )
    console.print(table)
    from ads_core.evaluation.metrics import MIN_INTERVAL_PROBLEMS

    if any(v.get("ci_low") is None for _, v in result.per_set.items()):
        console.print(
            f"95% CI -: fewer than {MIN_INTERVAL_PROBLEMS} problems, too few for an interval", highlight=False
        )
    for label, uri in result.files.items():
        console.print(f"{label}: {escape(uri)}", highlight=False)


with_signature(
    eval_cmd,
    config_parameters(EvalConfig, SECTIONS) + common_parameters(EvalConfig, "", "")[:1],
)
