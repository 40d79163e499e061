"""The ADS sampler's intra-cluster level: a window strategy per ``window`` knob, chosen once when the sampler is made.

``ADSSampler`` draws clusters and keeps r and p (the inter-cluster level); its window strategy decides which
positions of each drawn cluster are emitted and how they move after an update. Both strategies offer the same
calls, so the sampler never asks which one it holds:

* ``reset()``: the schedule's start and every periodic reset;
* ``draw(chosen, rng, streaks)``: the (A, B) positions of the drawn clusters, with the rows skipped before rollout
  (solved, failed) when the sampler skips;
* ``update(idx, rows, rho)``: move after the feedback; returns how many in-window rows were too hard, kept, too easy;
* ``positions(k)``, ``extent()``, ``place()``: introspection (the window's positions, first and last position, its
  place in [0, 1]);
* ``saved()`` / ``load(checked)``: the window's part of the saved state (``ads_core.sampler.ads_state``).

``ReferenceWindow`` is the paper's (B positions that move one slot per update, ``shift_window``), ``FrontierWindow``
the band that jumps towards a target success (``frontier_bands``, ``fresh_positions``, ``move_frontier``). Only numpy
is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads_state import ADSState
from ads_core.sampler.skip import SkipRule
from ads_core.sampler.window import fresh_positions, frontier_bands, move_frontier, shift_window


@dataclass(frozen=True)
class ClusterLayout:
    """The rows arranged by (cluster, rank), fixed for a sampler's life; shared by the sampler and its window."""

    sizes: np.ndarray  # (K,) rows of each cluster
    starts: np.ndarray  # (K,) each cluster's first index in the (cluster, rank) order
    cluster_of: np.ndarray  # (|D|,) each row's cluster index
    pos_of: np.ndarray  # (|D|,) each row's 0-based easy-to-hard position in its cluster

    def sorted_index_of(self, rows: np.ndarray) -> np.ndarray:
        """Each row's index in the (cluster, rank) order: its cluster's start plus its position."""
        return self.starts[self.cluster_of[rows]] + self.pos_of[rows]


def classify(rho: np.ndarray, cfg: ADSSamplerConfig) -> np.ndarray:
    """-1 (too hard: move easier), 0 (keep) or 1 (too easy: move harder) per success; the keep band is inclusive."""
    lo, hi = 0.5 - cfg.boundary_eps, 0.5 + cfg.boundary_eps
    return np.where(rho < lo, -1, np.where(rho > hi, 1, 0))


def counts_of(direction: np.ndarray) -> np.ndarray:
    """(easier, keep, harder) counts of classified rows."""
    return np.bincount(direction + 1, minlength=3)


class ReferenceWindow:
    """The reference window: B positions per cluster (all of a smaller cluster), on the easiest at each reset; a
    window row too hard moves one slot easier, one too easy one slot harder (``shift_window``). With skipping, a
    drawn window's skipped rows move before they are emitted (``SkipRule.windows``)."""

    def __init__(self, layout: ClusterLayout, cfg: ADSSamplerConfig, skip: SkipRule | None) -> None:
        self._layout, self._cfg, self._skip = layout, cfg, skip
        b = cfg.mini_cluster_size
        self._wsize = np.minimum(layout.sizes, b)  # a window never holds more rows than its cluster
        self._cols = np.arange(b, dtype=np.int64)
        # Column j of a cluster's batch slot reads window entry j % wsize: small clusters cycle their rows.
        self._cycle = self._cols[None, :] % self._wsize[:, None]
        self._win = self._easiest()

    def _easiest(self) -> np.ndarray:
        """(K, B) windows on each cluster's B easiest positions (row k's first wsize_k entries are its window)."""
        return np.broadcast_to(self._cols, (len(self._layout.sizes), self._cfg.mini_cluster_size)).copy()

    def reset(self) -> None:
        self._win = self._easiest()

    def draw(self, chosen: np.ndarray, rng: np.random.Generator, streaks: np.ndarray) -> tuple[np.ndarray, int, int]:
        solved = failed = 0
        if self._skip is not None:
            solved, failed = self._skip_rows(chosen, rng, streaks)
        return self._win[chosen[:, None], self._cycle[chosen]], solved, failed

    def _skip_rows(self, chosen: np.ndarray, rng: np.random.Generator, streaks: np.ndarray) -> tuple[int, int]:
        """Move each drawn cluster's skipped window rows before they are emitted; returns (solved, failed) skips."""
        assert self._skip is not None
        sizes, starts = self._layout.sizes, self._layout.starts
        ks = np.fromiter(dict.fromkeys(chosen.tolist()), dtype=np.int64)  # a cluster drawn twice skips once
        valid = (self._cols[None, :] < self._wsize[ks][:, None]) & (self._wsize[ks] < sizes[ks])[:, None]
        windows = np.where(valid, self._win[ks], 0)  # a whole-cluster window has nowhere to move to
        offered = np.where(valid, streaks[starts[ks][:, None] + windows], 0)
        changed, solved, failed = self._skip.windows(windows, offered, sizes[ks], rng)
        for i, moved in changed:
            self._win[ks[i], : len(moved)] = moved
        return solved, failed

    def update(self, idx: np.ndarray, rows: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """Classify the fed-back rows inside their cluster's window and move the windows (the reference's rule)."""
        layout = self._layout
        ks, pos = layout.cluster_of[rows], layout.pos_of[rows]
        valid = self._cols[None, :] < self._wsize[ks][:, None]
        inside = ((self._win[ks] == pos[:, None]) & valid).any(axis=1)
        ks, pos, rho = ks[inside], pos[inside], rho[inside]
        direction = classify(rho, self._cfg)
        counts = counts_of(direction)
        movable = (direction != 0) & (self._wsize[ks] < layout.sizes[ks])  # a full-cluster window stays
        if not movable.any():
            return counts
        # The reference rule is sequential (each mover sees the slots earlier movers took), so this loops
        # over the movers of this step only: at most active_clusters * B of them, never over |D|.
        moves: dict[int, tuple[list[int], list[int]]] = {}
        for k, q, d in zip(ks[movable].tolist(), pos[movable].tolist(), direction[movable].tolist(), strict=True):
            moves.setdefault(k, ([], []))[d > 0].append(q)
        for k, (easier, harder) in moves.items():
            m = int(self._wsize[k])
            self._win[k, :m] = shift_window(self._win[k, :m].tolist(), easier, harder, int(layout.sizes[k]))
        return counts

    def positions(self, k: int) -> np.ndarray:
        return self._win[k, : self._wsize[k]].copy()

    def extent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """First and last window position, and the mean position over (size - 1)."""
        return self._win[:, 0], self._win[np.arange(len(self._wsize)), self._wsize - 1], self.place()

    def place(self) -> np.ndarray:
        wsum = np.where(self._cols[None, :] < self._wsize[:, None], self._win, 0).sum(axis=1)
        return (wsum / self._wsize) / np.maximum(self._layout.sizes - 1, 1)

    def saved(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(windows, centres, uses) for ``ADSState``: this window's positions; no centres, no uses."""
        return self._win, np.zeros(len(self._wsize), dtype=np.float64), np.zeros(0, dtype=np.int64)

    def load(self, checked: ADSState) -> None:
        self._win = checked.windows


class FrontierWindow:
    """The frontier window: a band around a centre u (a share of the cluster, 0 at each reset); a visit takes the
    band's least-trained rows nearest the centre (``fresh_positions``, or ``SkipRule.band_rows`` with skipping), and
    the centre moves by ``frontier_gain * (band success - frontier_target)``. Each row's turns (trainings and skips)
    are the data's history: resets keep them."""

    def __init__(self, layout: ClusterLayout, cfg: ADSSamplerConfig, skip: SkipRule | None) -> None:
        self._layout, self._cfg, self._skip = layout, cfg, skip
        self._uses = np.zeros(len(layout.cluster_of), dtype=np.int64)  # turns of each row, in (cluster, rank) order
        self._center = np.zeros(len(layout.sizes), dtype=np.float64)  # 0 = easiest, 1 = hardest

    def reset(self) -> None:
        self._center = np.zeros(len(self._layout.sizes), dtype=np.float64)

    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        """Each cluster's band as (first position, width), from the centres."""
        cfg = self._cfg
        return frontier_bands(self._center, self._layout.sizes, cfg.mini_cluster_size, cfg.frontier_band)

    def draw(self, chosen: np.ndarray, rng: np.random.Generator, streaks: np.ndarray) -> tuple[np.ndarray, int, int]:
        """(A, B) positions: each drawn cluster's least-trained band rows, nearest its centre first."""
        lo, width = self.bands()
        b, sizes, starts = self._cfg.mini_cluster_size, self._layout.sizes, self._layout.starts
        out = np.empty((len(chosen), b), dtype=np.int64)
        solved = failed = 0
        for i, k in enumerate(chosen.tolist()):
            first = starts[k] + lo[k]
            centre = self._center[k] * (sizes[k] - 1)
            uses = self._uses[first : first + width[k]]
            if self._skip is None:
                out[i] = fresh_positions(uses, int(lo[k]), centre, b)
            else:
                band = streaks[first : first + width[k]]
                out[i], s, f = self._skip.band_rows(uses, band, int(lo[k]), centre, b, rng)
                solved, failed = solved + s, failed + f
        return out, solved, failed

    def update(self, idx: np.ndarray, rows: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """Count every fed-back row as trained once more; move each cluster's band centre by the mean success of its
        in-band rows (each row once)."""
        layout, cfg = self._layout, self._cfg
        np.add.at(self._uses, layout.sorted_index_of(idx), 1)
        ks, pos = layout.cluster_of[rows], layout.pos_of[rows]
        lo, width = self.bands()
        inside = (pos >= lo[ks]) & (pos < lo[ks] + width[ks])
        ks, rho = ks[inside], rho[inside]
        counts = counts_of(classify(rho, cfg))
        k = len(layout.sizes)
        n = np.bincount(ks, minlength=k)
        band_success = np.bincount(ks, weights=rho, minlength=k) / np.maximum(n, 1)
        movable = (n > 0) & (width < layout.sizes)  # a band that is the whole cluster stays
        self._center = move_frontier(self._center, band_success, cfg.frontier_gain, cfg.frontier_target, movable)
        return counts

    def positions(self, k: int) -> np.ndarray:
        """The whole band (a visit draws ``mini_cluster_size`` of it)."""
        lo, width = self.bands()
        return np.arange(lo[k], lo[k] + width[k], dtype=np.int64)

    def extent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """First and last band position, and the band centre."""
        lo, width = self.bands()
        return lo, lo + width - 1, self.place()

    def place(self) -> np.ndarray:
        return self._center.copy()

    def saved(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(windows, centres, uses) for ``ADSState``: no windows (the easiest, unsaved), the centres and turns."""
        k, b = len(self._layout.sizes), self._cfg.mini_cluster_size
        return np.broadcast_to(np.arange(b, dtype=np.int64), (k, b)).copy(), self._center, self._uses

    def load(self, checked: ADSState) -> None:
        self._center, self._uses = checked.centers, checked.uses


WINDOWS: dict[str, type[ReferenceWindow] | type[FrontierWindow]] = {
    "reference": ReferenceWindow,
    "frontier": FrontierWindow,
}
