"""`ads`: the command line. Every command has --help; long work shows rich progress bars."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
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
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
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
        table.add_row(f"rejected: {reason}", str(n))
    console.print(table)
    for file, layout in detected.items():
        cols = ", ".join(f"{k}={v}" for k, v in layout.items() if v and k != "layout")
        console.print(f"[dim]{file}[/]: layout [bold]{layout['layout']}[/] ({cols})", highlight=False)
    console.print(f"output: {out.rstrip('/')}/formatted/train.parquet "
                  f"(rejects: {out.rstrip('/')}/formatted/rejects.parquet)", highlight=False)


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
