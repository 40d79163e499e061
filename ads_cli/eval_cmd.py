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
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ads_cli.common import console, fail
from ads_cli.options import common_parameters, config_parameters, resolve_config, with_signature
from ads_core.common.errors import InputError
from ads_core.config.eval import EvalConfig

SECTIONS = ("", "grader")
DEFAULT_ROOT = "ads-eval"


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)


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
            help="Eval set: a packaged name (math500, aime24, amc23) or a file (formatted .parquet or raw data), "
            "repeatable. Default: math500, aime24, amc23.",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Evaluate policies on eval sets: k samples per problem, graded; mean@k, pass@k and maj@k per set.

    Writes completions.parquet (every sample with its grade), summary.json and table.md (the paper's layout).
    The same command again resumes a killed evaluation from the completions it wrote.
    """
    from ads_core.evaluation import backends, evaluate_model
    from ads_core.evaluation import policies as pol
    from ads_core.evaluation.problems import load_problems, resolve_sets
    from ads_core.evaluation.report import markdown_table
    from ads_core.models import ModelLoadError

    config_file = options.pop("config_file", None)
    cfg = resolve_config(EvalConfig, options, config_file, None)
    try:
        if sets:
            cfg = cfg.with_overrides({"sets": list(sets)})
        resolved_sets = resolve_sets(cfg.sets)
        load_problems(resolved_sets, cfg.template, cfg.limit)  # bad rows fail here, before any model loads
        found = pol.unique_names([pol.resolve_policy(p) for p in policies])
        backend = backends.choose(cfg.backend)
        cfg = cfg.replaced(backend=backend)
    except (InputError, ValueError) as exc:
        raise fail(str(exc)) from None
    several = len(found) > 1
    root = out if (out and several) else DEFAULT_ROOT
    summaries: dict[str, Any] = {}
    for policy in found:
        folder = str(Path(root) / policy.name) if several or not out else out
        console.print(
            f"evaluating {escape(policy.name)} ({escape(policy.path)}) with {backend}: "
            f"k={cfg.k}, sets {', '.join(resolved_sets)} -> {escape(folder)}",
            highlight=False,
        )
        try:
            result = _run(evaluate_model, policy, resolved_sets, cfg, folder)
        except (InputError, ModelLoadError, ValueError) as exc:
            raise fail(str(exc)) from None
        show(policy.name, result, cfg.k)
        summaries[policy.name] = _summary(result)
    if several:
        from ads_core import storage

        table_uri = storage.join(root, "table.md")
        storage.write_bytes(table_uri, markdown_table(summaries).encode("utf-8"))
        console.print(f"table of all policies: {escape(table_uri)}", highlight=False)


def _run(evaluate_model: Any, policy: Any, sets: dict[str, str], cfg: EvalConfig, folder: str) -> Any:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(f"{policy.name} problems", total=None)
        return evaluate_model(
            policy.path,
            sets,
            cfg,
            out=folder,
            policy=policy.name,
            progress=lambda n: progress.advance(task, n),
            on_problems=lambda total: progress.update(task, total=total),
        )


def _summary(result: Any) -> dict[str, Any]:
    from ads_core import storage

    return storage.read_json(result.files["summary.json"])  # type: ignore[no-any-return]


def show(name: str, result: Any, k: int) -> None:
    """The per set table (percent) and where the files went."""
    table = Table(title=f"{name}: {result.generated} problems generated, {result.seconds:.1f} s", show_header=True)
    for col in ("set", "n", f"mean@{k}", "95% CI", f"pass@{k}", f"maj@{k}"):
        table.add_column(col, justify="left" if col == "set" else "right")
    rows = [*result.per_set.items(), ("average", result.overall)]
    for set_name, v in rows:
        ci = f"[{100 * v['ci_low']:.1f}, {100 * v['ci_high']:.1f}]" if "ci_low" in v else ""
        table.add_row(
            set_name,
            str(v["n"]),
            f"{100 * v['mean_at_k']:.2f}",
            ci,
            f"{100 * v['pass_at_k']:.2f}",
            f"{100 * v['maj_at_k']:.2f}",
        )
    console.print(table)
    for label, uri in result.files.items():
        console.print(f"{label}: {escape(uri)}", highlight=False)


with_signature(
    eval_cmd,
    config_parameters(EvalConfig, SECTIONS) + common_parameters(EvalConfig, "", "")[:1],
)
