"""The progress bars of this process: `ads build` shows rich bars in the terminal; a deployment run has none.

A process-wide hook: the build runner sets it for the duration of a build, and every stage run in this process
(the stage task) draws through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from ads_core.common.progress import ProgressFactory

_progress_factory: ProgressFactory | None = None


def set_progress_factory(factory: ProgressFactory | None) -> None:
    global _progress_factory
    _progress_factory = factory


@contextmanager
def progress(description: str, total: int | None, unit: str = "rows") -> Iterator[Callable[[int], None] | None]:
    with _progress_factory(description, total, unit) if _progress_factory else nullcontext() as advance:
        yield advance
