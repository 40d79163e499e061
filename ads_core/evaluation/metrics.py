"""The paper's numbers from graded samples: mean@k, the unbiased pass@k, maj@k, and a 95% interval for mean@k.

Everything here is computed from a completions table (one row per (set, problem, sample) with its ``correct``
flag and ``extracted`` answer), so ``summary.json`` can always be recomputed from ``completions.parquet``:

* **mean@k**: each problem's share of correct samples, averaged over problems (the ADS paper's headline number);
* **pass@k**: the unbiased estimator 1 - C(n-c, k) / C(n, k) per problem (n samples, c correct), averaged;
* **maj@k**: the most frequent extracted answer among a problem's samples (ties: the answer seen first, by
  sample index) is graded; no extracted answer at all counts as wrong;
* **ci_low / ci_high**: a 95% percentile bootstrap over problems of mean@k, with a fixed seed, so the same
  completions always give the same interval; None below ``MIN_INTERVAL_PROBLEMS`` problems (a bootstrap over two
  problems is their range, over two equal ones a point), and the exact binomial bound when every problem scored
  0 (or every one 1), where the bootstrap would say [0, 0] whatever n.

Only numpy and pyarrow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# below this many problems no interval is given: the percentile bootstrap of a mean of n values is sqrt((n-1)/n)
# times a z-interval, about 0.8 of the t-interval's width at n = 10 and narrower below (it undercovers there)
MIN_INTERVAL_PROBLEMS = 10
METRIC_KEYS = ("mean_at_k", "pass_at_k", "maj_at_k")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # exact integers; true division of ints is exact-rounded


def majority_answer(answers: Sequence[str | None]) -> int | None:
    """Index of the sample whose extracted answer is the most frequent (first seen wins a tie); None if none."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, answer in enumerate(answers):
        key = _vote_key(answer)
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, i)
    if not counts:
        return None
    best = max(counts, key=lambda key: (counts[key], -first[key]))
    return first[best]


def _vote_key(answer: str | None) -> str | None:
    if answer is None:
        return None
    key = "".join(answer.split())
    return key or None


def mean_interval(
    scores: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """Percentile-bootstrap interval for the mean of per-problem scores (fixed seed: reproducible)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, values.size, size=(resamples, values.size))
    means = values[picks].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def problem_interval(scores: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The LEVEL interval of mean@k over problems, where their number allows one (see the module docstring)."""
    values = np.asarray(scores, dtype=np.float64)
    n = values.size
    if n < MIN_INTERVAL_PROBLEMS:
        return None
    if np.all(values == 0.0) or np.all(values == 1.0):  # Clopper-Pearson for 0 (or n) of n problems solved
        edge = 1.0 - ((1.0 - level) / 2.0) ** (1.0 / n)
        return (0.0, edge) if values[0] == 0.0 else (1.0 - edge, 1.0)
    return mean_interval(values, level)


def problem_metrics(correct: Sequence[bool], answers: Sequence[str | None], k: int) -> tuple[float, float, float]:
    """(mean, pass@k, maj) of one problem's samples, in sample order."""
    n, c = len(correct), int(sum(bool(x) for x in correct))
    majority = majority_answer(answers)
    maj = 1.0 if majority is not None and bool(correct[majority]) else 0.0
    return c / n, pass_at_k(n, c, min(k, n)), maj


def summarize_problems(problems: Iterable[tuple[Sequence[bool], Sequence[str | None]]], k: int) -> dict[str, Any]:
    """One set's metrics from its problems' (correct flags, extracted answers), each in sample order."""
    rows = [problem_metrics(correct, answers, k) for correct, answers in problems]
    if not rows:
        return {"mean_at_k": 0.0, "pass_at_k": 0.0, "maj_at_k": 0.0, "n": 0, "k": k, "ci_low": None, "ci_high": None}
    means, passes, majs = (np.asarray(col, dtype=np.float64) for col in zip(*rows, strict=True))
    low, high = problem_interval(means) or (None, None)
    return {
        "mean_at_k": float(means.mean()),
        "pass_at_k": float(passes.mean()),
        "maj_at_k": float(majs.mean()),
        "n": len(rows),
        "k": k,
        "ci_low": low,
        "ci_high": high,
    }


def summarize_table(table: pa.Table, k: int) -> dict[str, dict[str, Any]]:
    """Per set metrics from a completions table (columns ``set``, ``problem_id``, ``sample``, ``correct``,
    ``extracted``); sets keep their first-seen order, samples are taken in ``sample`` order."""
    data = table.select(["set", "problem_id", "sample", "correct", "extracted"]).to_pylist()
    grouped: dict[str, dict[Any, list[tuple[int, bool, str | None]]]] = {}
    for row in data:
        by_problem = grouped.setdefault(row["set"], {})
        by_problem.setdefault(row["problem_id"], []).append((row["sample"], row["correct"], row["extracted"]))
    out = {}
    for name, by_problem in grouped.items():
        problems = []
        for samples in by_problem.values():
            samples.sort(key=lambda s: s[0])
            problems.append(([s[1] for s in samples], [s[2] for s in samples]))
        out[name] = summarize_problems(problems, k)
    return out


def overall(per_set: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The paper's average column: each metric's unweighted mean over the sets (and the problems in all)."""
    if not per_set:
        return {key: 0.0 for key in METRIC_KEYS} | {"n": 0, "sets": 0}
    sets = list(per_set.values())
    out: dict[str, Any] = {key: float(np.mean([s[key] for s in sets])) for key in METRIC_KEYS}
    out["n"] = int(sum(s["n"] for s in sets))
    out["sets"] = len(sets)
    return out
