"""What a worker process was doing when SIGINT reached it, told truthfully: a Ctrl-C reaches every process of the
terminal's group, and one may signal a worker alone. Whatever the interrupted code turns the KeyboardInterrupt into
(an import cut short raises ``ImportError: initialization failed``), the worker reports a KeyboardInterrupt, so the
process that waits on it (`ads_prefect.tasks.demo`) says which run stopped and stops, instead of failing with a
library's traceback. Imports nothing heavy: the demo's workers import it to run their jobs."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any


def run_interruptible(function: Callable[..., Any], *args: Any) -> Any:
    """FUNCTION(*ARGS) in a worker process; raises KeyboardInterrupt (from whatever it raised) once SIGINT arrived."""
    got: list[int] = []

    def note(signum: int, frame: Any) -> None:
        got.append(signum)
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt where the worker is

    previous = signal.signal(signal.SIGINT, note)
    try:
        return function(*args)
    except BaseException as exc:
        if got and not isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt(f"SIGINT, surfacing as {type(exc).__name__}: {exc}") from exc
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
