"""Paired comparisons over seeds, and the verdict rule every comparison here uses (`ads demo`, `ads compare`, the
studies): a winner is named only when at least ``MIN_VERDICT_SEEDS`` paired seeds give a t-interval that excludes 0.

Why a t-interval. A percentile bootstrap over n seeds resamples only the seeds' own values: at n = 2 it is their
range, and at n = 16 it is about 0.87x as wide as the t-interval (it ignores that the sd is itself estimated), so
it names winners too often at the seed counts we can afford. The t-interval of the mean paired difference is exact
for normal differences and close to its nominal coverage for the bounded, roughly symmetric accuracy differences
of a few seeds; it is what decides. The bootstrap is printed beside it for comparison, never alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_VERDICT_SEEDS = 5  # below this, no winner is named: the estimate is printed with how many seeds a verdict needs
DEFAULT_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample sd (ddof 1; 0 for one value)."""
    x = np.asarray(values, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else 0.0


def t_interval(values: Sequence[float], level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """The LEVEL Student-t interval of the mean of VALUES (one per seed); None for fewer than two."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    mean, sd = mean_sd(values)
    half = float(t.ppf(0.5 + level / 2.0, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean - half, mean + half


def bootstrap_interval(
    values: Sequence[float], level: float = DEFAULT_LEVEL, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float] | None:
    """The LEVEL percentile-bootstrap interval of the mean of VALUES (seeded); None for fewer than two."""
    if len(values) < 2:
        return None
    x = np.asarray(values, dtype=np.float64)
    picks = np.random.default_rng(BOOTSTRAP_SEED).integers(0, len(x), size=(resamples, len(x)))
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(x[picks].mean(axis=1), [tail, 1.0 - tail])
    return float(low), float(high)


def _span(interval: tuple[float, float] | None) -> str:
    return f"[{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "(none)"


def paired_verdict(
    cand: str, base: str, diffs: Sequence[float], level: float = DEFAULT_LEVEL, min_seeds: int = MIN_VERDICT_SEEDS
) -> dict[str, Any]:
    """CAND - BASE over paired seeds (DIFFS): the mean, the LEVEL t-interval (which decides) and bootstrap interval,
    and the verdict. A winner is named only with at least MIN_SEEDS seeds and a t-interval that excludes 0."""
    n = len(diffs)
    mean = sum(diffs) / n if n else float("nan")
    t_span, boot = t_interval(diffs, level), bootstrap_interval(diffs, level)
    pct = f"{100 * level:g}%"
    winner = None
    if n < min_seeds:
        text = (
            f"no verdict at {n} seed(s): {cand} - {base} = {mean:+.3f}; a verdict needs at least {min_seeds} "
            f"paired seeds (rerun with more seeds)"
        )
    else:
        shown = f"{cand} - {base} = {mean:+.3f}, {pct} t-interval {_span(t_span)} over {n} seeds"
        assert t_span is not None
        if t_span[0] > 0:
            winner, text = cand, f"{cand} ended higher: {shown}"
        elif t_span[1] < 0:
            winner, text = base, f"{base} ended higher: {shown}"
        else:
            text = f"no resolved difference at this size: {shown}"
    return {
        "mean": mean,
        "n": n,
        "level": level,
        "interval": t_span,
        "t_interval": t_span,
        "bootstrap_interval": boot,
        "winner": winner,
        "text": text,
    }
