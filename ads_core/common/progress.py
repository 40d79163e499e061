"""Progress as plain lines, for output that goes to a file (nohup, a batch scheduler, a CI log): one line per
training step, a line per chunk of rows or problems at most every few seconds, a line when a long phase starts,
and a heartbeat so that nothing is silent for more than 30 s.

A command turns the lines on when its stdout is not a terminal (`enable_when_logged`; a terminal gets rich's bars
instead); the switch is an environment variable so that worker processes the command starts (the demo's
training runs) print theirs too. Lines go to stdout, flushed one by one: ``ads train ... > log.txt`` fills the
file as the run goes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol

ENV = "ADS_PROGRESS_LINES"
CHUNK_SECONDS = 5.0  # a chunk line at most this often (and the last one always)
HEARTBEAT_SECONDS = 25.0  # a quiet phase says it is still going after this long
_last_line = time.monotonic()
_phase = ""
_detail = ""  # where the phase stands (a generation's tokens so far), said with it by the heartbeat


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def enable_when_logged() -> bool:
    """Turn the lines on for this process and its children when stdout is not a terminal; returns whether on."""
    if not sys.stdout.isatty():
        os.environ[ENV] = "1"
    return enabled()


def say(line: str) -> None:
    """One progress line on stdout, flushed (only when the lines are on)."""
    global _last_line
    if not enabled():
        return
    sys.stdout.write(line.rstrip("\n") + "\n")
    sys.stdout.flush()
    _last_line = time.monotonic()


def phase(what: str, announce: bool = True) -> None:
    """A long phase begins (loading the policy, warming it up): said now (ANNOUNCE), and named by the heartbeat."""
    global _phase, _detail
    _phase, _detail = what, ""
    if announce:
        say(f"{what} ...")


def detail(text: str) -> None:
    """Where the current phase stands (``312 of at most 512 tokens``): cheap enough to call every decoding step;
    the heartbeat says it after the phase."""
    global _detail
    _detail = text


def current() -> str:
    """The work in progress as the heartbeat names it: the phase, and where it stands."""
    return f"{_phase} ({_detail})" if _phase and _detail else _phase


@contextmanager
def working_on(what: str, announce: bool = False) -> Iterator[None]:
    """WHAT is the work in progress for the block (a stage, a bar's job); the phase before it is named again after,
    so a heartbeat never names work that has finished."""
    before = _phase
    phase(what, announce)
    try:
        yield
    finally:
        phase(before, announce=False)


def clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class StepLines:
    """A line per training step: step/total, reward, learning rate, seconds per step and the ETA (from the steps
    this process trained, so a resume's ETA is not skewed by the steps it skipped)."""

    def __init__(self, total: int, label: str = "") -> None:
        self.total, self.label = int(total), f"{label}: " if label else ""
        self.started: float | None = None
        self.first_step: int | None = None

    def line(self, record: dict[str, Any], now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        step = int(record["step"])
        if self.started is None or self.first_step is None:  # the first step's time is in its own "seconds"
            took = float(record.get("seconds") or 0.0)
            self.started, self.first_step = now - took, step - 1
        done = step - self.first_step
        per_step = (now - self.started) / done if done > 0 else float(record.get("seconds") or 0.0)
        parts = [f"{self.label}step {step}/{self.total}"]
        for key, label, fmt in (("reward_mean", "reward", ".3f"), ("learning_rate", "lr", ".2e")):
            value = record.get(key)
            if isinstance(value, int | float):
                parts.append(f"{label} {value:{fmt}}")
        parts.append(f"{per_step:.1f} s/step")
        parts.append(f"eta {clock(per_step * max(0, self.total - step))}")
        return "  ".join(parts)

    def __call__(self, record: dict[str, Any], *_: Any) -> None:
        say(self.line(record))


class ChunkLines:
    """Lines for work done in chunks (rows formatted, problems evaluated): done/total and the ETA, at most every
    CHUNK_SECONDS, and always when the total is reached.

    The ETA is the work left at the throughput measured since the first chunk (what came before it, loading a
    model, is not work the rest repeats). It converges when the chunks come in an order that does not run from
    cheap to dear: the scorer runs its length-sorted batches in a seeded shuffle for this (`stages.score.scorer.
    run_order`); in length order the first rows were the shortest, and the ETA ran 3-4x short."""

    def __init__(
        self, what: str, total: int | None = None, unit: str = "rows", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what, self.total, self.unit, self.clock = what, total, unit, clock
        self.done, self.started, self.shown = 0, clock(), -CHUNK_SECONDS
        self.first: tuple[float, int] | None = None  # (time, count) at the first chunk: the rate is from there on

    def set_total(self, total: int | None) -> None:
        self.total = total

    def advance(self, n: int) -> None:
        self.done += int(n)
        now = self.clock()
        if self.first is None:  # what came before it (loading a model) is not in the rate
            self.first = (now, self.done)
        finished = self.total is not None and self.done >= self.total
        if not finished and now - self.shown < CHUNK_SECONDS:
            return
        self.shown = now
        say(self.text(now))

    def eta_seconds(self, now: float) -> float | None:
        """Seconds left at the measured throughput; None before two chunks give one (or without a total)."""
        if not self.total:
            return None
        if self.done >= self.total:
            return 0.0
        since, before = self.first or (self.started, 0)
        rate = (self.done - before) / (now - since) if now > since and self.done > before else 0.0
        return (self.total - self.done) / rate if rate > 0 else None

    def text(self, now: float) -> str:
        elapsed = now - self.started
        if not self.total:
            return f"{self.what}: {self.done} {self.unit} ({clock(elapsed)})"
        eta = self.eta_seconds(now)
        return f"{self.what}: {self.done}/{self.total} {self.unit}, eta {'?' if eta is None else clock(eta)}"


def _quiet_for() -> float:
    """Seconds since anything was written to stdout: its size when it is a file (worker processes share it),
    else since this process's last line."""
    try:
        stat = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return time.monotonic() - _last_line
    import stat as st

    if st.S_ISREG(stat.st_mode):
        return min(time.time() - stat.st_mtime, time.monotonic() - _last_line)
    return time.monotonic() - _last_line


@contextmanager
def heartbeat(what: str, every: float = HEARTBEAT_SECONDS) -> Iterator[Callable[[str], None]]:
    """While the block runs (lines on): a line naming the current phase whenever nothing was written for EVERY
    seconds. Yields `phase` to name what is going on."""
    if not enabled():
        yield phase
        return
    stop, started = threading.Event(), time.monotonic()
    phase(what)

    def beat() -> None:
        while not stop.wait(min(every, 5.0)):
            if _quiet_for() >= every:
                say(f"{current() or what}: still working ({clock(time.monotonic() - started)} elapsed)")

    thread = threading.Thread(target=beat, name="ads-heartbeat", daemon=True)
    thread.start()
    try:
        yield phase
    finally:
        stop.set()
        thread.join(timeout=1.0)


# The progress hook every long job takes (a stage's shards, a fence's heartbeat, a model's warm-up): a bar,
# a UI artifact, these lines, or nothing.
class ProgressFactory(Protocol):
    """`with progress("score shard 1/2", 500) as advance: advance(8)`: a bar, a UI artifact, or nothing.

    `total` None is a count without an end; `unit` is what is counted (rows, steps)."""

    def __call__(
        self, description: str, total: int | None, unit: str = "rows"
    ) -> AbstractContextManager[Callable[[int], None] | None]: ...


def no_progress(_: str, __: int | None, unit: str = "rows") -> AbstractContextManager[None]:
    return nullcontext()


def after_each_tick(factory: ProgressFactory, make_hook: Callable[[], Callable[[], None]]) -> ProgressFactory:
    """FACTORY's progress, with a hook called after every advance: a fresh `make_hook()` for each progress
    context (a hook may keep state per bar). The one place that passes description, total and unit on."""

    @contextmanager
    def hooked(description: str, total: int | None, unit: str = "rows") -> Iterator[Callable[[int], None]]:
        hook = make_hook()
        with factory(description, total, unit) as advance:

            def tick(n: int) -> None:
                if advance:
                    advance(n)
                hook()

            yield tick

    return hooked
