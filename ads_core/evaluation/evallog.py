"""`RUN_DIR/eval.jsonl`: the validation curve of a training run, one JSON object per (step, eval set).

Each line has ``step`` (the optimizer steps trained when the policy was evaluated; 0 = before training), ``set``,
the set's ``mean_at_k`` (the paper's number), ``pass_at_k``, ``maj_at_k``, ``k``, ``n`` (problems), the 95%
interval of mean@k (``ci_low``, ``ci_high``) and ``prompts_rolled_out`` (prompts rolled out by training up to that
step, dynamic sampling's extra batches included). TRL's validator (``ads_core.train.trl.validate``) writes it as the
run goes; verl's validation metrics are copied into it (``ads_core.train.verl.valmetrics``); ``ads compare`` reads it.

Every write rewrites the file atomically (temporary file, fsync, rename), so a killed writer leaves the old or the
new file, never half a line, and a (step, set) pair is never written twice: a newer record replaces the older one.
On resume the file is cut back to the resumed checkpoint's step, as ``steps.jsonl`` is.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ads_core.common.jsonl import read_records
from ads_core.storage import fencing

EVAL_FILE = "eval.jsonl"
METRICS = ("mean_at_k", "pass_at_k", "maj_at_k", "ci_low", "ci_high")


def read_evals(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records in file order; a line that is not a record (torn, hand-edited) is skipped."""
    return read_records(path, lambda r: isinstance(r.get("step"), int) and isinstance(r.get("set"), str))


def check_evals(path: str | os.PathLike[str]) -> list[str]:
    """Refuse (InputError, one line naming the file and line) a record whose metric is not a number; returns a
    note per record whose mean@k is NaN (it is left out of the curves)."""
    from ads_core.common.errors import InputError

    p = Path(path)
    if not p.is_file():
        return []
    notes = []
    for number, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line: read_evals skips it too
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("step"), int)
            or not isinstance(record.get("set"), str)
        ):
            continue
        for key in (*METRICS, "k", "n"):
            value = record.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise InputError(
                    f"{p}:{number}: {key} is {json.dumps(value)[:40]}, not a number; fix or delete the line"
                )
        value = record.get("mean_at_k")
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            shown = "missing" if value is None else str(value)
            notes.append(f"{p}:{number}: mean_at_k of {record['set']} at step {record['step']} is {shown}: left out")
    return notes


def _write(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fencing.check_publish(str(path))  # a training run that lost its lock on the run folder writes nothing more
    os.replace(tmp, path)


def append_evals(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
    """Add RECORDS; one already there with the same (step, set) is replaced. Ordered by step, then arrival."""
    new = list(records)
    if not new:
        return
    fresh = {(r["step"], r["set"]) for r in new}
    kept = [r for r in read_evals(path) if (r["step"], r["set"]) not in fresh]
    merged = sorted([*kept, *new], key=lambda r: r["step"])  # stable: sets keep their order within a step
    _write(Path(path), merged)


def keep_evals_up_to(path: str | os.PathLike[str], last_step: int) -> int:
    """Drop the records after LAST_STEP (a resumed run evaluates those steps again); returns records kept."""
    p = Path(path)
    if not p.is_file():
        return 0
    records = read_evals(p)
    kept = [r for r in records if r["step"] <= last_step]
    if len(kept) != len(records):
        _write(p, kept)
    return len(kept)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def eval_records(step: int, per_set: Mapping[str, Mapping[str, Any]], prompts_rolled_out: int) -> list[dict[str, Any]]:
    """The eval.jsonl lines of one evaluation: ``per_set`` is ``evaluate_policy``'s result (set -> metrics)."""
    out = []
    for name, metrics in per_set.items():
        record: dict[str, Any] = {"step": int(step), "set": str(name)}
        for key in METRICS:
            record[key] = _number(metrics.get(key))
        record["k"] = int(metrics.get("k") or 0)
        record["n"] = int(metrics.get("n") or 0)
        record["prompts_rolled_out"] = int(prompts_rolled_out)
        out.append(record)
    return out
