"""`ads compare RUN...`: training runs side by side (final accuracy, steps and rollouts to the first run's final
accuracy, the curves), from their `steps.jsonl` and `eval.jsonl`. Registered by ``ads_cli.main``."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ads_cli.common import console, fail
from ads_core.common.errors import InputError

DEFAULT_ROOT = "ads-compare"


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)


def default_out(names: list[str]) -> Path:
    """``ads-compare/<name>-vs-<name>...`` (a name's odd characters become dashes)."""
    joined = "-vs-".join(re.sub(r"[^A-Za-z0-9._-]+", "-", n).strip("-") or "run" for n in names)
    return Path(DEFAULT_ROOT) / joined[:200]


def compare_cmd(
    runs: Annotated[
        list[str],
        typer.Argument(help="Runs: a name under ./ads-runs or a run folder. The first is the baseline."),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Folder for compare.png, compare.json and compare.md (default ads-compare/<names>)."
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option("--publish", help="Also publish the tables and the plot as Prefect artifacts (flow ads-compare)."),
    ] = False,
) -> None:
    """Compare training runs: final accuracy per eval set with its 95% interval, and the steps and prompts rolled
    out each run needed to reach the first run's final accuracy (as a share of the first run's own), plus a plot
    of accuracy against steps and against rollouts.

    Runs record their validation in RUN_DIR/eval.jsonl (train with --eval-set and --eval-steps).
    """
    from ads_core.evaluation.compare import load_runs
    from ads_core.evaluation.compare_report import write_comparison

    try:
        loaded = load_runs(runs)
        folder = out or default_out([run.name for run in loaded])
        result = write_comparison({run.name: [run] for run in loaded}, folder)
    except InputError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(result["markdown"])
    paths = result["paths"]
    console.print(
        f"plot: {escape(paths['plot'])}\ntable: {escape(paths['markdown'])}\njson: {escape(paths['json'])}",
        highlight=False,
    )
    if publish:
        from ads_prefect.flows.ads_compare import publish_comparison

        try:
            url = publish_comparison([str(Path(r.folder).resolve()) for r in loaded], str(Path(folder).resolve()))
        except InputError as exc:
            raise fail(str(exc)) from None
        console.print(f"published: {escape(url)}", highlight=False)
