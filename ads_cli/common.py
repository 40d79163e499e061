"""What every `ads` command shares: the stderr console, the one-line `error:` exit and progress bars."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def _width() -> int | None:
    """A terminal's own width; piped output (logs, CI) is not wrapped at 80 columns."""
    if sys.stderr.isatty():
        return None
    return int(os.environ.get("COLUMNS") or 200)


# in a log (stderr not a terminal) a line of text stays one line, whatever its length: a wrapped "output: ...
# (rejects: " line read as one that ends in nothing
console = Console(stderr=True, width=_width(), soft_wrap=not sys.stderr.isatty())


def fail(message: str) -> typer.Exit:
    """One `error:` line on stderr and exit status 2, for input the pipeline cannot use."""
    one_line = " ".join(str(message).split())  # exception texts quoted in messages may span lines
    console.print(f"[bold red]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def storage_failure(exc: BaseException) -> str | None:
    """The one line for an error of the disk or store a command wrote to or read from (a full disk, no permission,
    a read-only mount, an unreachable store, bad or embedded credentials), or None when it is not one."""
    from ads_core.storage.errors import WRITE_ERRNOS, StorageError, redact
    from ads_core.storage.manifest import ManifestError

    if isinstance(exc, StorageError | ManifestError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        where = f" at {redact(str(exc.filename))}" if exc.filename else ""
        return f"storage error{where}: {exc.strerror or exc}; free space, fix the permissions, or write elsewhere"
    return None


class OneLineErrors(typer.core.TyperGroup):
    """Every command: storage errors (ENOSPC, EACCES, EROFS, S3 problems, credentials in a URL) end the command with
    one `error:` line and exit status 2, whichever stage or library raised them, never a traceback."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        """A command whose options depend on its arguments (`ads train --trainer my_pkg.mod:T` brings T's flags)
        offers ``for_arguments(args)``: the command built for them, or None for its registered form."""
        name, command, rest = super().resolve_command(ctx, args)
        build = getattr(getattr(getattr(command, "callback", None), "__wrapped__", None), "for_arguments", None)
        built = build(rest) if build is not None else None
        return name, built or command, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            line = storage_failure(exc)
            if line is None:
                raise
            raise fail(line) from None


# a line rich draws for a bar (its bar, then done/total) or a spinner (a braille frame or the finished check):
# what must never end up in a file
BAR_LINE = re.compile(r"[━╸╺]+ +\d+/\d+|^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏✓] ", re.M)


def bars(*columns: Any) -> Progress:
    """A rich Progress with COLUMNS on the console, drawn only on a terminal: in a file (a log, CI) a finished bar
    would be left as one line of bar characters, and the plain progress lines (`ads_core.common.progress`, on
    stdout) say the same in words."""
    return Progress(*columns, console=console, transient=False, disable=not console.is_terminal)


def stdout_is_stderr() -> bool:
    """Whether stdout and stderr are one file (`> log 2>&1`): a line said on both would show twice."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # captured (tests) or closed: not one file
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def tell(text: str) -> None:
    """A line that starts a long job (what it will do): on the console, and first in a log of stdout too (the
    progress lines' file), once where both are one file."""
    from ads_core.common import progress as progress_lines

    progress_lines.say(text)
    if not (progress_lines.enabled() and stdout_is_stderr()):
        console.print(escape(text), highlight=False, soft_wrap=True)


def bar_columns(*extra: TextColumn) -> tuple[Any, ...]:
    """A bar's columns: description, bar, done/total, elapsed, ETA (then EXTRA): every bar of the CLI looks alike."""
    return (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        *extra,
    )


@contextmanager
def progress_bar(description: str, total: int | None = None, unit: str = "rows") -> Iterator[Callable[[int], None]]:
    """A bar with done/total and an ETA when the total is known; otherwise a spinner with a running count.

    Rich's ETA is measured from the first update on (the time before it, loading a model, is not in the rate)
    and shows only once two updates give a rate."""
    if total is not None:
        columns = bar_columns()
    else:
        columns = (
            SpinnerColumn(finished_text="[green]✓[/]"),
            TextColumn("[bold]{task.description}"),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
        )
    from ads_core.common import progress as progress_lines

    lines = progress_lines.ChunkLines(description, total, unit)  # stdout to a file: a line per chunk there
    with progress_lines.working_on(description), bars(*columns) as progress:
        task = progress.add_task(description, total=total, count="")

        def advance(n: int) -> None:
            lines.advance(n)
            progress.advance(task, n)
            if total is None:
                progress.update(task, count=f"{int(progress.tasks[task].completed)} {unit}")

        yield advance
        if total is None:
            progress.update(
                task, total=max(progress.tasks[task].completed, 1), completed=max(progress.tasks[task].completed, 1)
            )


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
