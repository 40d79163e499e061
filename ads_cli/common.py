"""What every `ads` command shares: the stderr console, the one-line `error:` exit and progress bars."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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



def parse_assignments(items: list[str] | None, what: str) -> dict[str, object]:
    """`KEY=VALUE` options into a dict; values are read as YAML scalars (0.5 -> float, true -> bool)."""
    import yaml

    out: dict[str, object] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"{what} {item!r} must look like KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else None
    return out

