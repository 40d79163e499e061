"""`RUN_DIR/steps.jsonl`: one JSON object per optimizer step, written as the run goes (its plot:
`ads_core.train.step_plot`).

Each line has ``step`` (1-based), ``sample_ids`` (the step's prompts, each once, as the artifact's sample_id),
``rows`` (their positions in the training file), ``rewards`` and ``success`` (each prompt's mean reward and mean
correctness, in the same order; ``success`` is what the sampler's ``update`` received), ``clusters`` (each
prompt's cluster), ``lag`` and ``drawn_after_updates`` (see ``ads_core.train.trl.feed``), the step's headline
numbers (``reward_mean``, ``success_mean``, ``active_clusters``, ``window_position``, ``loss``,
``completion_length``, ``seconds``) and ``metrics``, the sampler's own ``metrics()`` after the update.

One kind of ``metrics()`` key is read here, optional: ``<prefix>/window_frac_mean`` (a window's mean position,
0 = easiest end, 1 = hardest); ADS provides it, the baselines don't. Lines are flushed and fsynced one by one,
so a killed run keeps what it logged; on resume the file is cut back (atomically) to the steps of the checkpoint
it resumes from. Only the storage layer's fencing is imported (every write checks the run's lock on its folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ads_core.common.jsonl import read_steps
from ads_core.storage import fencing

WINDOW_MEAN_SUFFIX = "/window_frac_mean"


def keep_steps_up_to(path: str | os.PathLike[str], last_step: int) -> str | None:
    """Rewrite the log with only steps <= LAST_STEP (the resumed checkpoint), each once (the last line of a step
    logged twice: the run that reached the checkpoint wrote it last), atomically. Returns what was wrong with
    the log (steps logged twice, steps missing), or None."""
    p = Path(path)
    if not p.exists():
        return f"{p} is missing: it will hold only the steps after {last_step}" if last_step > 0 else None
    records = [r for r in read_steps(p) if r["step"] <= last_step]
    by_step = {r["step"]: r for r in records}
    kept = [by_step[k] for k in sorted(by_step)]
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in kept:
            f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fencing.check_publish(str(p))
    os.replace(tmp, p)
    problems = []
    if len(records) > len(kept):
        problems.append(f"held {len(records) - len(kept)} step line(s) twice (kept each step once)")
    missing = [k for k in range(1, last_step + 1) if k not in by_step]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        problems.append(f"lacks steps {shown} (cut or deleted): its records and plot miss them")
    return f"{p} {' and '.join(problems)}" if problems else None


class StepWriter:
    """Appends one line per step and makes it durable before returning."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        fencing.check_publish(str(self.path))  # a run that lost its lock on the run folder logs nothing more
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


def window_position(metrics: dict[str, float]) -> float | None:
    """The sampler's mean window position, when its metrics report one."""
    for key, value in metrics.items():
        if key.endswith(WINDOW_MEAN_SUFFIX):
            return float(value)
    return None
