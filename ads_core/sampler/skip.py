"""Pre-rollout skipping (GRESO-style, Zheng et al. 2025): rows whose recent groups all agreed are left out of a
batch, with a probability that grows with the evidence, before anything is rolled out.

A group whose rollouts all agree (all solved or all failed) gives GRPO no gradient, and a row that gave one is
likely to give one again. DAPO-style dynamic sampling finds this out *after* paying for the rollouts; skipping
predicts it from the row's own history and pays nothing. Each row keeps a signed streak of zero-variance groups
(+n: its last n groups were all solved, -n: all failed, 0: the last one disagreed, or never seen). When a drawn
cluster offers a row with a streak, the row is skipped with probability
``min(skip_max, rate * |streak|)`` (``skip_solved_rate`` for solved streaks, ``skip_failed_rate`` for failed ones),
drawn from the sampler's own seeded generator. ``skip_max < 1`` is the exploration floor: every row is offered
again with probability at least ``1 - skip_max``, so a row the policy has since learned (or forgotten) is found.

How a skipped row is replaced, so the batch keeps its size (both from the same drawn cluster):

* frontier window: the visit takes the band's least-turned rows nearest the centre, without the skipped ones;
  a skipped row that would have been taken counts a turn (as if trained), so it waits for its next turn
  instead of staying first;
* reference window: a skipped window row is moved as the reference would move it after that outcome, to the
  nearest free position harder than it (solved) or easier (failed), past the rest of the window; the moved-to row
  is emitted in its place. So the window slides past what it already knows instead of rolling it out again.

The streaks are the data's history, like the frontier's training counts: resets keep them. Per-row state is one
int16 per row (2 MB at 1M rows), in the sampler's (cluster, rank) order; a saved state holds only the rows with
a streak. Only numpy is imported.
"""

from __future__ import annotations

import numpy as np

from ads_core.sampler.window import fresh_positions

STREAK_CAP = 1000  # |streak| stops growing here (int16, and far past the point where skip_max is reached)


def new_streaks(n_rows: int) -> np.ndarray:
    """All rows unseen: no streak."""
    return np.zeros(n_rows, dtype=np.int16)


def record_outcomes(streaks: np.ndarray, sorted_rows: np.ndarray, success: np.ndarray) -> None:
    """Update the streaks in place from one update's feedback: ``sorted_rows`` are distinct row indices in the
    (cluster, rank) order, ``success`` their mean reward. All solved (1) extends a solved streak or starts one,
    all failed (0) likewise, anything between ends the streak."""
    old = streaks[sorted_rows].astype(np.int32)
    solved, failed = success >= 1.0, success <= 0.0
    new = np.zeros_like(old)
    new[solved] = np.minimum(np.where(old[solved] > 0, old[solved] + 1, 1), STREAK_CAP)
    new[failed] = np.maximum(np.where(old[failed] < 0, old[failed] - 1, -1), -STREAK_CAP)
    streaks[sorted_rows] = new.astype(np.int16)


def skip_probability(streaks: np.ndarray, solved_rate: float, failed_rate: float, skip_max: float) -> np.ndarray:
    """Skip probability of rows with these streaks: ``min(skip_max, rate * |streak|)``, 0 without a streak."""
    s = streaks.astype(np.float64)
    rate = np.where(s > 0, solved_rate, failed_rate)
    return np.minimum(skip_max, rate * np.abs(s))


def skip_moves(window: list[int], solved: list[int], failed: list[int], size: int) -> list[int]:
    """The reference window after skipping: each skipped position moves to the nearest position in the direction
    its outcome asks for (solved: harder, failed: easier) that the window does not hold, or the other way when
    that end is full; it stays only when the cluster has no such position.

    ``window`` holds the current positions, ``solved`` / ``failed`` the skipped subsets. Solved movers go hardest
    first, failed ones easiest first; no mover lands on a position the window held (a skipped row stays out).
    Returns the new sorted positions (same count, all distinct).
    """
    taken = set(window)
    kept = taken.difference(solved, failed)
    for pos, step in [(p, 1) for p in sorted(solved, reverse=True)] + [(p, -1) for p in sorted(failed)]:
        new = _next_free(pos, step, taken, size)
        taken.add(new)
        kept.add(new)
    return sorted(kept)


def _next_free(pos: int, step: int, taken: set[int], size: int) -> int:
    """The first position beyond ``pos`` in direction ``step`` not in ``taken``, else the first the other way,
    else ``pos`` itself."""
    for direction in (step, -step):
        cand = pos + direction
        while 0 <= cand < size:
            if cand not in taken:
                return cand
            cand += direction
    return pos


class SkipRule:
    """The knobs of one sampler's skipping; it draws from the generator it is given (the sampler's own)."""

    def __init__(self, solved_rate: float, failed_rate: float, skip_max: float) -> None:
        # the skip probability of every int16 streak, looked up by its bits read as uint16 (one gather a draw)
        streaks = np.arange(2**16, dtype=np.uint16).view(np.int16)
        self.table = skip_probability(np.clip(streaks, -STREAK_CAP, STREAK_CAP), solved_rate, failed_rate, skip_max)

    def draw(self, streaks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Which of these rows are skipped this time (a bool mask of the same shape). Rows without a streak are
        never skipped; if any row has one, one uniform per row is drawn from ``rng`` (in order), else none, so a
        sampler that has seen no agreeing group draws exactly what it would without skipping."""
        if not streaks.any():
            return np.zeros(streaks.shape, dtype=bool)
        return rng.random(streaks.shape) < self.table[streaks.astype(np.int16, copy=False).view(np.uint16)]

    def band_rows(
        self, turns: np.ndarray, streaks: np.ndarray, lo: int, centre: float, b: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, int, int]:
        """Frontier window: ``b`` rows of a band for one visit, with skipping; returns them (positions) and how
        many rows were skipped (solved, failed).

        ``turns`` are the band's turn counts (trainings and skips; a view, changed in place), ``streaks`` its
        streaks, ``lo`` its first position, ``centre`` the band centre (a position). The window's order is
        ``fresh_positions``': the least-turned rows first, nearest the centre first. The visit goes down that
        order (2b rows at a time, then 4b, ...), gives each row with a streak one coin, and takes the first b
        rows that are not skipped. A skipped row ahead of a taken one had its turn: it counts one in ``turns``,
        so it waits for its next turn like a trained row instead of staying first. A band with fewer than b rows
        not skipped gives them and then its first skipped ones.
        """
        width = len(turns)
        if width <= b or not streaks.any():  # a band that must cycle has nothing to replace a row with
            return fresh_positions(turns, lo, centre, b), 0, 0
        n = min(width, 2 * b)
        order = self._in_order(turns, lo, centre, n)
        skipped = self.draw(streaks[order], rng)
        kept = np.flatnonzero(~skipped)
        if len(kept) < b and n < width:  # rare: more than b of the first 2b skipped; go further down the order
            order, skipped, kept = self._further(turns, streaks, lo, centre, b, order, skipped, rng)
        if len(kept) >= b:
            cut = kept[b - 1]
            taken, had = order[kept[:b]], order[:cut][skipped[:cut]]
        else:  # fewer than b rows of the band not skipped: them, then the first skipped ones
            passed = order[skipped]
            taken, had = np.concatenate([order[kept], passed[: b - len(kept)]]), passed[b - len(kept) :]
        if len(had):
            turns[had] += 1
        solved = int(np.count_nonzero(streaks[had] > 0))
        return lo + np.sort(taken), solved, len(had) - solved

    @staticmethod
    def _in_order(turns: np.ndarray, lo: int, centre: float, n: int) -> np.ndarray:
        """The first ``n`` band rows (offsets) in the window's order: fewest turns, then nearest the centre."""
        cand = fresh_positions(turns, lo, centre, n) - lo
        key = turns[cand] * (2.0 * (len(turns) + 1)) + np.abs(lo + cand - centre)
        return cand[np.argsort(key, kind="stable")]

    def _further(
        self,
        turns: np.ndarray,
        streaks: np.ndarray,
        lo: int,
        centre: float,
        b: int,
        order: np.ndarray,
        skipped: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Look at 4b, 8b, ... rows in the window's order until b are not skipped (or the band is done); rows
        already looked at keep their coin, the new ones get theirs."""
        width = len(turns)
        seen, skip = np.zeros(width, dtype=bool), np.zeros(width, dtype=bool)
        seen[order], skip[order] = True, skipped
        n = len(order)
        while True:
            n = min(width, 2 * n)
            order = self._in_order(turns, lo, centre, n)
            new = order[~seen[order]]
            seen[new], skip[new] = True, self.draw(streaks[new], rng)
            kept = np.flatnonzero(~skip[order])
            if len(kept) >= b or n == width:
                return order, skip[order], kept

    def windows(
        self, windows: np.ndarray, streaks: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
    ) -> tuple[list[tuple[int, np.ndarray]], int, int]:
        """Reference window: the drawn clusters' windows after their skipped rows moved (``skip_moves``).

        ``windows`` holds one window per drawn cluster (B entries, the first ``min(B, size)`` valid),
        ``streaks`` the streak of each entry (0 for entries that are not valid, or whose window is the whole
        cluster), ``sizes`` the clusters' sizes. One coin per entry with a streak, in row-major order. Returns
        (index, new valid entries) for each window that changed, and how many rows were skipped (solved, failed).
        """
        skipped = self.draw(streaks.ravel(), rng).reshape(streaks.shape)
        changed, n_solved, n_failed = [], 0, 0
        for i in np.flatnonzero(skipped.any(axis=1)).tolist():
            m = min(windows.shape[1], int(sizes[i]))
            row, hit, sign = windows[i, :m], skipped[i, :m], streaks[i, :m]
            solved, failed = row[hit & (sign > 0)].tolist(), row[hit & (sign < 0)].tolist()
            moved = skip_moves(row.tolist(), solved, failed, int(sizes[i]))
            changed.append((i, np.asarray(moved, dtype=np.int64)))
            n_solved, n_failed = n_solved + len(solved), n_failed + len(failed)
        return changed, n_solved, n_failed
