"""`ads`: the command line. Every command has --help; long work shows rich progress bars."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ads_core import defaults
from ads_core.readers import InputError

app = typer.Typer(
    help="ADS pipeline: build clustered, difficulty-sorted GRPO training sets and schedule them adaptively.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """One `error:` line on stderr and exit status 2, for input the pipeline cannot use."""
    one_line = " ".join(str(message).split())  # exception texts quoted in messages may span lines
    console.print(f"[bold red]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


@app.callback()
def main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command("format")
def format_cmd(
    source: Annotated[str, typer.Argument(
        help="A .parquet/.json/.jsonl/.csv file, a directory of those, or a Hugging Face dataset id "
             "(local cache only). Default: the bundled GSM8K sample.")] = "",
    out: Annotated[str, typer.Option("--out", "-o", help="Output root (local path or s3://); "
                                     "writes OUT/formatted/.")] = defaults.DEFAULT_OUT,
    name: Annotated[str | None, typer.Option(help="Dataset name, used as data_source when rows have none.")] = None,
    question_col: Annotated[str | None, typer.Option(help="Column holding the question.")] = None,
    solution_col: Annotated[str | None, typer.Option(help="Column holding the reference solution.")] = None,
    answer_col: Annotated[str | None, typer.Option(help="Column holding the final answer.")] = None,
    options_col: Annotated[str | None, typer.Option(help="Column holding multiple-choice options.")] = None,
    template: Annotated[str, typer.Option(help="Named prompt template: ads_think, boxed or plain.")] = "ads_think",
    template_text: Annotated[str | None, typer.Option(help="Custom prompt template containing {question}.")] = None,
    split: Annotated[str, typer.Option(help="Split to read for a Hugging Face id.")] = "train",
) -> None:
    """Turn a math dataset into verl's GRPO schema (OUT/formatted/train.parquet + rejects + manifest)."""
    from ads_core.format import FormatConfig, format_dataset

    source = source or defaults.sample_path()
    cfg = FormatConfig(name=name, question_col=question_col, solution_col=solution_col, answer_col=answer_col,
                       options_col=options_col, template=template, template_text=template_text, split=split)
    try:
        with progress_bar("format rows") as advance:
            manifest = format_dataset(source, out, cfg, progress=advance)
    except InputError as exc:
        raise fail(str(exc)) from None
    print_format_summary(manifest.counts, manifest.extra.get("detected", {}), out)


def print_format_summary(counts: dict, detected: dict, out: str) -> None:
    table = Table(title="format", show_header=True)
    table.add_column("what")
    table.add_column("rows", justify="right")
    table.add_row("read", str(counts["rows_in"]))
    table.add_row("kept", str(counts["rows_out"]))
    for reason, n in counts["rejects_by_reason"].items():
        table.add_row(f"rejected: {escape(reason)}", str(n))
    console.print(table)
    for file, layout in detected.items():
        cols = escape(", ".join(f"{k}={v}" for k, v in layout.items() if v and k != "layout"))
        console.print(f"[dim]{escape(file)}[/]: layout [bold]{layout['layout']}[/] ({cols})", highlight=False)
    console.print(escape(f"output: {out.rstrip('/')}/formatted/train.parquet "
                         f"(rejects: {out.rstrip('/')}/formatted/rejects.parquet)"), highlight=False)


@app.command("make-tiny-model")
def make_tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(help="Where to save the model (save_pretrained layout).")],
    preset: Annotated[str, typer.Option(help="tiny (~0.75M params, tests/demo) or bench (~40M params).")] = "tiny",
) -> None:
    """Build a small Qwen2-style causal LM + locally trained tokenizer, deterministically, with no download."""
    from ads_core.models import TINY_PRESETS, make_tiny_model

    if preset not in TINY_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {', '.join(TINY_PRESETS)}")
    path = make_tiny_model(directory, preset)
    console.print(f"saved {preset} model to {path} (load it with --model {path})", highlight=False)


@app.command("build")
def build_cmd(
    source: Annotated[str, typer.Argument(
        help="Dataset file, directory or HF id (see `ads format --help`). Default: the bundled GSM8K sample.")] = "",
    out: Annotated[str, typer.Option("--out", "-o", help="Output root (local path or s3://).")] = defaults.DEFAULT_OUT,
    model: Annotated[str, typer.Option(
        help="Policy model: a local dir or hub id (local cache only); `default` builds a tiny local model.")
    ] = "default",
    clusters: Annotated[int, typer.Option("--clusters", "-k", help="K-Means clusters (clamped for small sets).")] = 64,
    max_length: Annotated[int, typer.Option(help="Max tokens per row for scoring; longer rows are flagged.")] = 2048,
    pca_dim: Annotated[int, typer.Option(help="PCA dimensions before K-Means (0 = off).")] = 128,
    text_mode: Annotated[str, typer.Option(
        help="question_plus_solution (embed both) or question_only (embed the question).")] = "question_plus_solution",
    shards: Annotated[int, typer.Option(help="Score shards (units of resume and parallelism).")] = 1,
    token_budget: Annotated[int, typer.Option(help="Padded tokens per forward batch.")] = 16_384,
    scoring_backend: Annotated[str, typer.Option(help="auto, transformers or vllm.")] = "auto",
    kmeans_backend: Annotated[str, typer.Option(help="auto, faiss, sklearn or cuml.")] = "auto",
    seed: Annotated[int, typer.Option(help="K-Means seed.")] = 42,
    name: Annotated[str | None, typer.Option(help="Dataset name (default: from SOURCE).")] = None,
    question_col: Annotated[str | None, typer.Option(help="Override the detected question column.")] = None,
    solution_col: Annotated[str | None, typer.Option(help="Override the detected solution column.")] = None,
    answer_col: Annotated[str | None, typer.Option(help="Override the detected answer column.")] = None,
) -> None:
    """Format → embed + NLL (one fused pass) → K-Means → sort: writes OUT/final/train.parquet for training."""
    from ads_core.build import BuildConfig, build
    from ads_core.cluster import ClusterConfig
    from ads_core.format import FormatConfig
    from ads_core.models import ModelLoadError
    from ads_core.score import ScoreConfig

    try:
        cfg = BuildConfig(
            format=FormatConfig(name=name, question_col=question_col, solution_col=solution_col,
                                answer_col=answer_col),
            score=ScoreConfig(model=model, max_length=max_length, text_mode=text_mode, num_shards=shards,
                              token_budget=token_budget, backend=scoring_backend),
            cluster=ClusterConfig(num_clusters=clusters, pca_dim=pca_dim or None, backend=kmeans_backend,
                                  seed=seed),
        )
        result = build(source or None, out, cfg, progress=progress_bar)
    except (InputError, ModelLoadError, ValueError) as exc:
        raise fail(str(exc)) from None
    print_format_summary(result.formatted.counts, result.formatted.extra.get("detected", {}), out)
    print_build_summary(result.final.output_uri("train"))


def print_build_summary(final_uri: str) -> None:
    """Cluster sizes and a difficulty histogram, as text."""
    import numpy as np
    import polars as pl

    from ads_core import storage

    df = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "difficulty", "truncated"]))
    sizes = df.group_by("cluster_id").len().sort("cluster_id")["len"].to_numpy()
    console.print(f"[bold]{df.height}[/] rows in [bold]{len(sizes)}[/] clusters "
                  f"(sizes min {sizes.min()}, median {int(np.median(sizes))}, max {sizes.max()}); "
                  f"{int(df['truncated'].sum())} rows truncated at max_length")
    counts, edges = np.histogram(df["difficulty"].to_numpy(), bins=10)
    width = max(counts.max(), 1)
    console.print("difficulty (token-mean NLL of the reference solution):")
    for c, lo, hi in zip(counts, edges[:-1], edges[1:], strict=True):
        console.print(f"  {lo:7.3f} - {hi:7.3f} | {'#' * int(40 * c / width):<40} {c}", highlight=False)
    console.print(f"final artifact: {final_uri}", highlight=False)


def _register_optional_commands() -> None:
    """Commands that live in their own modules register themselves here."""
    try:
        from ads_core import simulate_cli
    except ImportError:  # pragma: no cover - module not written yet
        return
    simulate_cli.register(app)


_register_optional_commands()


if __name__ == "__main__":  # pragma: no cover
    app()
