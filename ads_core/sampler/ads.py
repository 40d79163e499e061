"""The ADS sampler: a framework-agnostic, exactly resumable re-implementation of the reference scheduler.

Two levels decide what the policy trains on at each step:

* inter-cluster: each cluster k keeps a success rate r_k (mean success of its rows in the last update that
  touched it) and clusters are drawn from p, an EMA of ``weights(r) / sum(weights(r))``;
* intra-cluster: each cluster has a window of difficulty-sorted positions, kept by the window strategy the
  ``window`` knob names (``ads_core.sampler.ads_windows``, chosen once here). The reference window (the
  default) holds B positions that keep, slide easier or slide harder by one slot, depending on whether a
  row's success is inside, below or above [0.5 - eps, 0.5 + eps]. The frontier window is a band around a
  centre u (a share of the cluster) that jumps by ``frontier_gain * (band success - frontier_target)``.

Only numpy is imported: trainers (verl, TRL, a simulator) drive it through ``next_batch`` / ``update``.
The fixes relative to the reference are listed in ``docs/sampler.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads_state import ADSState, ads_state_dict, check_ads_state
from ads_core.sampler.ads_windows import WINDOWS, ClusterLayout
from ads_core.sampler.base import BaseSampler, as_sampler_columns, check
from ads_core.sampler.skip import SkipRule, new_streaks, record_outcomes


def _frontier_weights(s: ADSSampler) -> np.ndarray:
    """Held-out weight (size) times how unsettled the cluster is: u(1 - u) of its place u (the band centre), plus
    the floor that keeps clusters at either end drawable."""
    u = s._window.place()
    return s.sizes * (u * (1.0 - u) + s.cfg.frontier_weight_floor)


# The inter-cluster weights w by ``inter_cluster_weighting`` (p moves towards w / sum(w)); `frontier` needs the
# frontier window (the config refuses it with the reference window).
WEIGHTINGS: dict[str, Callable[[ADSSampler], np.ndarray]] = {
    "success": lambda s: s.r,
    "learnability": lambda s: s.r * (1.0 - s.r),
    "inverse": lambda s: 1.0 - s.r,
    "frontier": _frontier_weights,
}


class ADSSampler(BaseSampler):
    """Dual-level ADS scheduler over rows ``0..|D|-1`` of an artifact.

    ``next_batch`` always returns ``cfg.batch_size`` row positions; ``update`` feeds back the mean reward of
    each row's rollouts. All state is numpy arrays plus a PCG64 generator, and round-trips through JSON.
    """

    def __init__(self, cluster_ids: Any, rank_in_cluster: Any, cfg: ADSSamplerConfig | None = None) -> None:
        self.cfg = cfg = cfg if cfg is not None else ADSSamplerConfig()
        cid, rank = as_sampler_columns(cluster_ids, rank_in_cluster)
        self.n_rows = n = len(cid)
        self.batch_size = cfg.batch_size
        self.cluster_ids, cluster_of = np.unique(cid, return_inverse=True)
        self.n_clusters = k = len(self.cluster_ids)
        check(cfg.prob_floor * k <= 1.0, f"prob_floor={cfg.prob_floor} is above 1/K (K={k} clusters)")
        # Rows sorted by (cluster, rank); lexsort is stable, so equal ranks keep row order (deterministic).
        self._order = np.lexsort((rank, cluster_of)).astype(np.int64)
        self.sizes = np.bincount(cluster_of, minlength=k).astype(np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self._cluster_of = cluster_of.astype(np.int64)
        self._pos_of = np.empty(n, dtype=np.int64)
        self._pos_of[self._order] = np.arange(n, dtype=np.int64) - self._starts[self._cluster_of[self._order]]
        self._layout = ClusterLayout(self.sizes, self._starts, self._cluster_of, self._pos_of)
        if cfg.reset_every is None:
            self.reset_every = max(1, n // self.batch_size)
        else:
            self.reset_every = cfg.reset_every if cfg.reset_every > 0 else 0
        self._rng = np.random.default_rng(cfg.seed)
        self._fingerprint: str | None = None
        self.steps = 0
        self.steps_in_epoch = 0
        self._counts = np.zeros(3, dtype=np.int64)  # easier, keep, harder in the last update
        # skipping: each row's zero-variance streak, in (cluster, rank) order (data history, kept across resets),
        # and the rows skipped in the last draw (solved, failed) and in all draws
        self._skip = SkipRule(cfg.skip_solved_rate, cfg.skip_failed_rate, cfg.skip_max) if cfg.skip else None
        self._streaks = new_streaks(n if cfg.skip else 0)
        self._skipped = np.zeros(3, dtype=np.int64)
        self._window = WINDOWS[cfg.window](self._layout, cfg, self._skip)  # the intra-cluster level, chosen once
        self._weights = WEIGHTINGS[cfg.cluster_weighting]  # what p moves towards, chosen once
        self._reset_schedule()

    # -- schedule -----------------------------------------------------------------------------------

    def _reset_schedule(self) -> None:
        """Reference init and periodic reset: r = r_init, uniform p, windows on the easiest rows."""
        k = self.n_clusters
        self.r = np.full(k, self.cfg.r_init, dtype=np.float64)
        self.p = np.full(k, 1.0 / k, dtype=np.float64)
        self._window.reset()

    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        """Frontier window: each cluster's band as (first position, width), from the centres (the reference
        window has no bands: AttributeError)."""
        return self._window.bands()

    def sampling_probs(self) -> np.ndarray:
        """The distribution clusters are drawn from: normalised p, mixed with the floor when one is set."""
        p, k = self.p, self.n_clusters
        total = p.sum()
        q = p / total if np.isfinite(total) and total > 0 else np.full(k, 1.0 / k)
        floor = self.cfg.prob_floor
        if floor > 0:
            q = (1.0 - k * floor) * q + floor
            q /= q.sum()
        return q

    def next_batch(self) -> np.ndarray:
        """Draw ``active_clusters`` clusters from p and emit each one's window rows, easy to hard."""
        a, k = self.cfg.active_clusters, self.n_clusters
        q = self.sampling_probs()
        if k >= a:  # the reference's single draw without replacement
            chosen = self._draw_distinct(q, a)
        else:  # fewer clusters than slots: every cluster once, then extra slots drawn from q
            first = self._draw_distinct(q, k)
            chosen = np.concatenate([first, self._rng.choice(k, size=a - k, replace=True, p=q)])
        positions, solved, failed = self._window.draw(chosen, self._rng, self._streaks)
        if self._skip is not None:  # rows skipped before rollout: in this draw, and in all draws
            self._skipped[:2] = (solved, failed)
            self._skipped[2] += solved + failed
        return self._order[self._starts[chosen][:, None] + positions].ravel()

    def _draw_distinct(self, q: np.ndarray, n: int) -> np.ndarray:
        live = int(np.count_nonzero(q))
        if live >= n:
            return self._rng.choice(len(q), size=n, replace=False, p=q)
        # Fewer clusters with p > 0 than slots (alpha = 1, or p decayed below float range): numpy's draw
        # would raise, so take every live cluster and fill the rest uniformly from the starved ones.
        first = self._rng.choice(len(q), size=live, replace=False, p=q) if live else np.zeros(0, np.int64)
        rest = self._rng.choice(np.flatnonzero(q == 0), size=n - live, replace=False)
        return np.concatenate([first, rest]).astype(np.int64)

    def update(self, idx: Any, success: Any) -> None:
        """Feed back the mean rollout reward ``success[i]`` of row ``idx[i]`` and advance one step.

        Any valid row counts towards its cluster's r, whether or not this sampler emitted it; a row repeated
        in one call is classified once, on the mean of its values.
        """
        idx, success = self._checked_update(idx, success)
        self._counts[:] = 0
        if len(idx):
            # each row once, on the mean of its values (small clusters repeat rows in a batch)
            rows, inverse = np.unique(idx, return_inverse=True)
            rho = np.bincount(inverse, weights=success) / np.bincount(inverse)
            if self._skip is not None:
                record_outcomes(self._streaks, self.sorted_index_of(rows), rho)
            self._update_success(idx, success)
            self._counts[:] = self._window.update(idx, rows, rho)
        self._update_distribution()
        self.steps += 1
        self.steps_in_epoch += 1
        if self.reset_every and self.steps_in_epoch >= self.reset_every:
            self._reset_schedule()
            self.steps_in_epoch = 0

    def _update_success(self, idx: np.ndarray, success: np.ndarray) -> None:
        ks = self._cluster_of[idx]
        n = np.bincount(ks, minlength=self.n_clusters)
        total = np.bincount(ks, weights=success, minlength=self.n_clusters)
        seen = n > 0
        self.r[seen] = total[seen] / n[seen]  # plain replacement, as in the reference; unseen carry over

    def _update_distribution(self) -> None:
        w = self._weights(self)
        total = w.sum()
        k = self.n_clusters
        target = w / total if np.isfinite(total) and total > 0 else np.full(k, 1.0 / k)
        p = (1.0 - self.cfg.alpha) * self.p + self.cfg.alpha * target
        self.p = p / p.sum()

    # -- introspection --------------------------------------------------------------------------------

    def window(self, cluster_id: int) -> np.ndarray:
        """Sorted window positions (0 = easiest) of a cluster, by its original id; the whole band for the
        frontier window (a visit draws ``mini_cluster_size`` of them)."""
        return self._window.positions(self._index_of(cluster_id))

    def window_rows(self, cluster_id: int) -> np.ndarray:
        """Row positions currently inside a cluster's window."""
        k = self._index_of(cluster_id)
        return self._order[self._starts[k] + self.window(cluster_id)]

    def window_extent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per cluster: first and last window position, and the window's place in [0, 1] (0 = easiest):
        the mean position over (size - 1) for the reference window, the band centre for the frontier."""
        return self._window.extent()

    def cluster_of_rows(self, idx: Any) -> np.ndarray:
        """Original cluster id of each row position."""
        return self.cluster_ids[self._cluster_of[np.asarray(idx, dtype=np.int64)]]

    def sorted_index_of(self, rows: np.ndarray) -> np.ndarray:
        """Each row's index in the (cluster, rank) order: its cluster's start plus its position."""
        return self._layout.sorted_index_of(rows)

    def rows_in_order(self) -> np.ndarray:
        """Row positions in (cluster, rank) order (a view: do not modify)."""
        return self._order

    def position_of_rows(self, idx: Any) -> np.ndarray:
        """0-based easy-to-hard position of each row inside its cluster."""
        return self._pos_of[np.asarray(idx, dtype=np.int64)]

    def _index_of(self, cluster_id: int) -> int:
        k = int(np.searchsorted(self.cluster_ids, cluster_id))
        if k >= self.n_clusters or self.cluster_ids[k] != cluster_id:
            raise KeyError(f"unknown cluster id {cluster_id!r}")
        return k

    def metrics(self) -> dict[str, float]:
        """Flat ``name -> number`` dict for any logger: summary scalars plus per-cluster p, r and window."""
        p, r = self.p, self.r
        lo, hi, frac = self.window_extent()
        classified = int(self._counts.sum())
        shares = self._counts / classified if classified else np.zeros(3)
        out: dict[str, float] = {
            "ads/step": float(self.steps),
            "ads/steps_in_epoch": float(self.steps_in_epoch),
            "ads/prob_max": float(p.max()),
            "ads/prob_min": float(p.min()),
            "ads/prob_entropy": float(-(p * np.log(p + 1e-12)).sum()),
            "ads/success_rate_mean": float(r.mean()),
            "ads/window_frac_mean": float(frac.mean()),
            "ads/classified": float(classified),
            "ads/frac_easier": float(shares[0]),
            "ads/frac_keep": float(shares[1]),
            "ads/frac_harder": float(shares[2]),
        }
        if self._skip is not None:  # rows left out of the last batch before rollout, and of all batches
            out["ads/skipped_solved"] = float(self._skipped[0])
            out["ads/skipped_failed"] = float(self._skipped[1])
            out["ads/skipped_total"] = float(self._skipped[2])
            out["ads/zero_variance_rows"] = float(np.count_nonzero(self._streaks))
        for i, cid in enumerate(self.cluster_ids.tolist()):
            out[f"ads/p/{cid}"] = float(p[i])
            out[f"ads/r/{cid}"] = float(r[i])
            out[f"ads/window_lo/{cid}"] = float(lo[i])
            out[f"ads/window_hi/{cid}"] = float(hi[i])
            out[f"ads/window_frac/{cid}"] = float(frac[i])
        return out

    # -- checkpointing --------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """Digest of the clustering and ordering, so a checkpoint can't be loaded onto another artifact."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=16)
            for arr in (self.cluster_ids, self.sizes, self._order):
                h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-able state (lists, floats, ints, str): the whole schedule plus the generator."""
        windows, centers, uses = self._window.saved()
        state = ADSState(
            self.steps,
            self.steps_in_epoch,
            self.r,
            self.p,
            windows,
            centers,
            uses,
            self._counts,
            self._rng,
            self._streaks,
            self._skipped,
        )
        return ads_state_dict(self, state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; refuses state from another artifact or config (the seed may differ).

        Every field is checked before anything is assigned, so a refused state (a ``SamplerStateError``,
        a ``ValueError`` naming the field) leaves this sampler exactly as it was.
        """
        checked = check_ads_state(state, self)
        # all checked: nothing below can fail
        self.r, self.p, self._rng = checked.r, checked.p, checked.rng
        self._window.load(checked)
        if self._skip is not None:
            self._streaks, self._skipped = checked.streaks, checked.skipped
        self.steps, self.steps_in_epoch, self._counts = checked.steps, checked.steps_in_epoch, checked.last_counts
