"""`ads compare RUN...`: training runs side by side (final accuracy, steps and rollouts to the first run's final
accuracy, the curves), from their `steps.jsonl` and `eval.jsonl`. Registered by ``ads_cli.main``."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any

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
        typer.Argument(
            help="Runs: a name under ./ads-runs or a run folder, or a group NAME=RUN,RUN,... of one run per seed "
            "(paired with the other groups' by seed). The first is the baseline.",
            metavar="RUN|NAME=RUN,RUN...",
        ),
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

    The verdict on the final accuracy names a winner only with at least 5 paired seeds (groups NAME=RUN,RUN,...)
    and a 95% t-interval of the paired difference that excludes 0; otherwise it gives the estimate and says so.
    Runs record their validation in RUN_DIR/eval.jsonl (train with --eval-set and --eval-steps).
    """
    from ads_core.evaluation.compare import load_groups
    from ads_core.evaluation.compare_report import write_comparison

    try:
        groups = load_groups(runs)
        folder = out or default_out(list(groups))
        result = write_comparison(groups, folder)
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
            url = publish_comparison(published_refs(runs, groups), str(Path(folder).resolve()))
        except InputError as exc:
            raise fail(str(exc)) from None
        console.print(f"published: {escape(url)}", highlight=False)


def published_refs(refs: list[str], groups: dict[str, list[Any]]) -> list[str]:
    """REFS as the flow takes them, every run as its absolute folder (the flow may run in another directory)."""
    out = []
    for name, runs in groups.items():
        folders = [str(Path(r.folder).resolve()) for r in runs]
        grouped = any("=" in ref and ref.partition("=")[0] == name for ref in refs)
        out.append(f"{name}={','.join(folders)}" if grouped else folders[0])
    return out
