"""`ads format`, `ads build` and `ads make-tiny-model`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ads_cli.common import console, fail, progress_bar
from ads_cli.options import common_parameters, config_parameters, resolve_config, spell_field, with_signature
from ads_core.common.errors import InputError, OptionError
from ads_core.config.build import BuildConfig


def register(app: typer.Typer) -> None:
    app.command("format")(format_cmd)
    app.command("make-tiny-model")(make_tiny_model_cmd)
    app.command("build")(build_cmd)


def format_cmd(
    source: Annotated[
        str,
        typer.Argument(
            help="A .parquet/.json/.jsonl/.csv file, a directory of those, or a Hugging Face dataset id "
            "(local cache only). Default: the bundled GSM8K sample."
        ),
    ] = "",
    out: Annotated[
        str | None,
        typer.Option(
            "--out", "-o", help="Output root (local path or s3://); writes OUT/formatted/. Default: ads-out/<dataset>."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Dataset name, used as data_source when rows have none (default: from SOURCE).")
    ] = None,
    **options: Any,
) -> None:
    """Turn a math dataset into verl's GRPO schema (OUT/formatted/train.parquet + rejects + manifest)."""
    from ads_core.ingest.convert import format_dataset
    from ads_core.locks.manager import LockLost, LockWaitTimeout, owning
    from ads_core.pipeline.resolve import resolve

    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    cfg = resolve_config(BuildConfig, options, config_file, assignments).format
    try:
        target = resolve(source or None, out, name, cfg.name)
    except ValueError as exc:
        raise fail(str(exc)) from None
    source, out, cfg = target.source, target.out, cfg.replaced(name=target.dataset)
    from ads_core import storage

    storage.check_writable(out)  # a missing bucket, a dead endpoint or a full disk: one line, before any reading
    try:  # OUT's build lock, as a build takes it: never two writers of OUT/formatted, every publish fenced
        with owning(out, f"format:{os.getpid()}"), progress_bar("format rows") as advance:
            manifest = format_dataset(source, out, cfg, progress=advance)
    except InputError as exc:
        raise fail(for_cli(exc)) from None
    except (LockWaitTimeout, LockLost) as exc:  # a build holds OUT past ADS_LOCK_WAIT_S, or took it over
        raise fail(str(exc)) from None
    print_format_summary(manifest)


SET_EXAMPLE = "--set cluster.n_init=4"
with_signature(format_cmd, config_parameters(BuildConfig, ("format",)) + common_parameters(BuildConfig, SET_EXAMPLE))


def print_format_summary(manifest: Any) -> None:
    """Rows read, kept and rejected (one example per reason), the layout detected per file, where it went."""
    counts, detected = manifest.counts, manifest.extra.get("detected", {})
    train_uri, rejects_uri = manifest.output_uri("train"), manifest.output_uri("rejects")
    table = Table(title="format", show_header=True)
    table.add_column("what")
    table.add_column("rows", justify="right")
    table.add_column("example")
    files = [str(f).rsplit("/", 1)[-1] for f in detected]
    read = f"from {', '.join(files[:3])}" + (f" and {len(files) - 3} more files" if len(files) > 3 else "")
    table.add_row("read", str(counts["rows_in"]), escape(read if files else "no file had rows"))
    table.add_row("kept", str(counts["rows_out"]), escape(_first_question(train_uri) if counts["rows_out"] else "-"))
    examples = _reject_examples(rejects_uri) if counts.get("rows_rejected") else {}
    for reason, n in counts["rejects_by_reason"].items():
        table.add_row(f"rejected: {escape(reason)}", str(n), escape(examples.get(reason, "-")))
    console.print(table)
    from ads_core.ingest.detect import describe_in_words

    for file, layout in detected.items():
        console.print(f"[dim]{escape(file)}[/]: {escape(describe_in_words(layout))}", highlight=False)
    skipped = manifest.extra.get("files_skipped")
    if skipped:
        names = ", ".join(skipped["names"][:10]) + (" ..." if skipped["count"] > 10 else "")
        console.print(
            escape(f"warning: {skipped['count']} file(s) not read (format not supported): {names}"), highlight=False
        )
    console.print(escape(f"output: {train_uri} (rejects: {rejects_uri})"), highlight=False)


def _first_question(train_uri: str, limit: int = 80) -> str:
    """The first kept row's question, cut to LIMIT characters: what a kept row looks like."""
    from ads_core import storage

    try:
        rows = storage.read_parquet(train_uri, columns=["extra_info"]).slice(0, 1).to_pylist()
    except (OSError, ValueError):
        return "-"
    question = " ".join(str((rows[0]["extra_info"] or {}).get("question") or "").split()) if rows else ""
    return "-" if not question else question if len(question) <= limit else question[: limit - 1] + "…"


def _reject_examples(rejects_uri: str) -> dict[str, str]:
    """One example per reject reason: where it is (file:row) and why."""
    import polars as pl

    from ads_core import storage

    try:
        rejects = pl.from_arrow(
            storage.read_parquet(
                rejects_uri,
                columns=["source_file", "source_row", "reason", "message"],
            )
        )
    except (OSError, ValueError):
        return {}
    first = rejects.group_by("reason", maintain_order=True).first()
    import re

    def example(r: dict) -> str:
        why = re.sub(r"^row \d+:\s*", "", str(r["message"] or ""))[:80]
        return f"{str(r['source_file']).rsplit('/', 1)[-1]} row {r['source_row']}: {why}"

    return {r["reason"]: example(r) for r in first.iter_rows(named=True)}


def make_tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(help="Where to save the model (save_pretrained layout).")],
    preset: Annotated[
        str,
        typer.Option(
            help="tiny (~0.75M params, warmed up on the bundled sample; tests and demo) or bench (~47M params)."
        ),
    ] = "tiny",
) -> None:
    """Build a small Qwen2-style causal LM + locally trained tokenizer, deterministically, with no download."""
    from ads_core.models import TINY_PRESETS, make_tiny_model

    if preset not in TINY_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {', '.join(TINY_PRESETS)}")
    path = make_tiny_model(directory, preset)
    console.print(f"saved {preset} model to {path} (load it with --model {path})", highlight=False)


def build_cmd(
    source: Annotated[
        str,
        typer.Argument(
            help="Dataset file, directory or HF id (see `ads format --help`). Default: the bundled GSM8K sample."
        ),
    ] = "",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="Output root (local path or s3://). Default: ads-out/<dataset> ($ADS_OUT_DIR/<dataset> when set).",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Dataset name (default: from SOURCE).")] = None,
    show_config: Annotated[
        bool,
        typer.Option(
            "--show-config", help="Print the resolved config as YAML and exit (a starting point for --config)."
        ),
    ] = False,
    **options: Any,
) -> None:
    """Format → embed + NLL (one fused pass) → K-Means → sort → report: writes OUT/final/train.parquet.

    Runs the cached Prefect flow `ads-build`: a rerun resumes from the stages whose inputs did not change.
    With PREFECT_API_URL set (e.g. `ads server`), the run shows in that server's UI; without it, Prefect's
    ephemeral mode starts a temporary local server (~10-20 s) with PREFECT_HOME under the ADS cache dir.
    Every option below is a field of the config tree (ads_core/config/build.py); --set reaches the rest.
    """
    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    cfg = resolve_config(BuildConfig, options, config_file, assignments)
    if show_config:
        import yaml

        sys.stdout.write(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        return
    from ads_core.common import progress as progress_lines
    from ads_prefect.flows.launch import run_build
    from ads_prefect.runtime.runner import BuildFailed

    progress_lines.enable_when_logged()  # stdout to a file: a line per stage chunk there, as the build goes
    try:
        with progress_lines.heartbeat("build: starting the ads-build flow"):
            run = run_build(source or None, out, name, cfg, progress=progress_bar, say=say)
    except BuildFailed as exc:
        raise fail(for_cli(exc.cause)) from None
    result = run.result
    from ads_core.storage import manifest as mf

    print_format_summary(mf.read(mf.stage_dir_of(result["outputs"]["format"])))
    print_build_summary(result["final_uri"])
    for line in result.get("summary_lines", []):
        console.print(escape(line), highlight=False, soft_wrap=True)  # one line each, also in a log
    states = result["stages"]
    console.print("stages: " + ", ".join(f"{k} [bold]{v}[/]" for k, v in states.items()), highlight=False)
    where = f": {run.run_url}" if run.run_url else " (ephemeral mode: `ads server` keeps the runs and shows them)"
    console.print(f"run {escape(result['flow_run']['name'])}{where}", highlight=False, soft_wrap=True)


def say(text: str) -> None:
    """A line of the build runner's: the interruption in red, its notes dimmed."""
    style = "bold red" if text.startswith("interrupted:") else "dim"
    console.print(f"[{style}]{escape(text)}[/]", highlight=False)


with_signature(
    build_cmd,
    config_parameters(BuildConfig, tuple(BuildConfig.model_fields))
    + common_parameters(BuildConfig, SET_EXAMPLE, "ads build --show-config"),
)


def for_cli(exc: Exception) -> str:
    """The error as this interface spells options: `set question_col` becomes `set --question-col`."""
    if isinstance(exc, OptionError):
        return exc.render(spell_field(BuildConfig))
    return str(exc)


def print_build_summary(final_uri: str) -> None:
    """Cluster sizes and a difficulty histogram, as text; the difficulty named as the final manifest records it."""
    import numpy as np
    import polars as pl

    from ads_core import storage
    from ads_core.stages.report.stage import recorded_measure
    from ads_core.stages.report.validity import describe_measure

    df = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "difficulty", "truncated"]))
    sizes = df.group_by("cluster_id").len().sort("cluster_id")["len"].to_numpy()
    console.print(
        f"[bold]{df.height}[/] rows in [bold]{len(sizes)}[/] clusters "
        f"(sizes min {sizes.min()}, median {int(np.median(sizes))}, max {sizes.max()}); "
        f"{int(df['truncated'].sum())} rows truncated at max_length"
    )
    counts, edges = np.histogram(df["difficulty"].to_numpy(), bins=10)
    width = max(counts.max(), 1)
    console.print(f"difficulty ({escape(describe_measure(recorded_measure(final_uri)))}):", highlight=False)
    digits = max(len(f"{edge:.3f}") for edge in edges)  # one column for every bin, whatever the scale
    for c, lo, hi in zip(counts, edges[:-1], edges[1:], strict=True):
        bar = "#" * int(40 * c / width)
        console.print(f"  {lo:{digits}.3f} - {hi:{digits}.3f} | {bar:<40} {c}", highlight=False)
    console.print(f"final artifact: {final_uri}", highlight=False)
