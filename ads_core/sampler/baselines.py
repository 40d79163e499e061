"""Baseline samplers behind the ADS sampler's API, for fair comparisons in the simulator and in training.

* ``UniformSampler``: GRPO's default, a fresh shuffle of all rows every epoch.
* ``EasiestShareSampler``: the same over the easiest ``share`` of each cluster (by ``rank_in_cluster``): a static
  data selection that trains where ADS's windows sit without moving them (Experiment 2's "sitting vs moving").
* ``DifficultyTargetedSampler``: DOTS-style. It predicts each candidate's success rate as a similarity-
  weighted average over recently observed rows and trains on the candidates predicted nearest 0.5. DOTS
  proper learns an adapter on embeddings and rolls out a reference set; this keeps only the selection rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ads_core.config.sampler import DifficultyTargetedConfig, EasiestShareConfig, UniformSamplerConfig
from ads_core.sampler.base import BaseSampler, as_sampler_columns, check
from ads_core.sampler.state import state_config, state_header, state_int, state_list, state_reals, state_rng

STATE_VERSION = 1


class UniformSampler(BaseSampler):
    """Epoch-wise random permutation; a batch that crosses an epoch boundary continues in the next one.

    The permutation of epoch e is drawn from ``default_rng([seed, e])``, so the state is two integers.
    """

    STATE_KIND = "UniformSampler"

    def __init__(self, cluster_ids: Any, rank_in_cluster: Any, cfg: Any = None) -> None:
        self.cfg = cfg if cfg is not None else UniformSamplerConfig()
        cid, rank = as_sampler_columns(cluster_ids, rank_in_cluster)
        self.n_rows = len(cid)
        self.batch_size = self.cfg.batch_size
        self._pool = self._rows(cid, rank)  # the rows an epoch permutes
        self.steps = 0
        self._epoch = 0
        self._cursor = 0
        self._perm = self._permutation(0)

    def _rows(self, cluster_ids: np.ndarray, rank: np.ndarray) -> np.ndarray:
        return np.arange(len(cluster_ids), dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        return self._pool[np.random.default_rng([self.cfg.seed, epoch]).permutation(len(self._pool))]

    def next_batch(self) -> np.ndarray:
        parts, need, epoch_rows = [], self.batch_size, len(self._pool)
        while need:
            if self._cursor == epoch_rows:
                self._epoch += 1
                self._cursor = 0
                self._perm = self._permutation(self._epoch)
            take = min(need, epoch_rows - self._cursor)
            parts.append(self._perm[self._cursor : self._cursor + take])
            self._cursor += take
            need -= take
        return np.concatenate(parts).astype(np.int64, copy=False)

    def update(self, idx: Any, success: Any) -> None:
        self._checked_update(idx, success)  # same contract as ADS, though the schedule ignores feedback
        self.steps += 1

    @property
    def position(self) -> tuple[int, int]:
        """(epoch, rows of that epoch already emitted): where the stream stands."""
        return self._epoch, self._cursor

    def seek(self, epoch: int, cursor: int) -> None:
        """Continue the stream at ``position`` (epoch, cursor); the caller has checked both."""
        self._epoch, self._cursor, self._perm = epoch, cursor, self._permutation(epoch)

    def metrics(self) -> dict[str, float]:
        return {"uniform/step": float(self.steps), "uniform/epoch": float(self._epoch)}

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.STATE_KIND,
            "version": STATE_VERSION,
            "config": self.cfg.model_dump(),
            "n_rows": self.n_rows,
            "steps": self.steps,
            "epoch": self._epoch,
            "cursor": self._cursor,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; all fields are checked first, so a refused state changes nothing."""
        s = state_header(state, self.STATE_KIND, _UNIFORM_KEYS, self.n_rows, STATE_VERSION)
        state_config(s["config"], self.cfg)  # the seed too: it picks every epoch's permutation
        steps = state_int(s["steps"], "state['steps']")
        epoch = state_int(s["epoch"], "state['epoch']")
        cursor = state_int(s["cursor"], "state['cursor']", 0, len(self._pool))
        self.seek(epoch, cursor)
        self.steps = steps


_UNIFORM_KEYS = ("kind", "version", "config", "n_rows", "steps", "epoch", "cursor")


class EasiestShareSampler(UniformSampler):
    """Shuffled epochs over the easiest ``share`` of each cluster: the first ceil(share x size) rows of every
    cluster in ``rank_in_cluster`` order (at least one), where ADS's windows start and mostly sit. Feedback is
    ignored, so it separates training on the easy end from moving along it."""

    STATE_KIND = "EasiestShareSampler"

    def _rows(self, cluster_ids: np.ndarray, rank: np.ndarray) -> np.ndarray:
        assert isinstance(self.cfg, EasiestShareConfig)
        _, cluster = np.unique(cluster_ids, return_inverse=True)
        order = np.lexsort((rank, cluster))  # stable: equal ranks keep row order, as ADS's windows do
        sizes = np.bincount(cluster)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order)) - starts[cluster[order]]
        keep = np.maximum(1, np.ceil(self.cfg.share * sizes - 1e-9)).astype(np.int64)
        return np.flatnonzero(position < keep[cluster]).astype(np.int64)

    def metrics(self) -> dict[str, float]:
        return {"easiest/step": float(self.steps), "easiest/epoch": float(self._epoch), "easiest/rows": len(self._pool)}


class DifficultyTargetedSampler(BaseSampler):
    """Pick the candidates whose predicted success is nearest ``target`` (DOTS's adaptive difficulty).

    Similarity is attention over L2-normalised embeddings when given, else a kernel over (same cluster,
    rank fraction). The prediction shrinks towards the memory's mean with ``prior_strength`` pseudo-counts,
    so rows unlike anything seen are predicted at the average success, not at 0.5.
    """

    def __init__(
        self,
        cluster_ids: Any,
        rank_in_cluster: Any,
        cfg: DifficultyTargetedConfig | None = None,
        embeddings: np.ndarray | None = None,
    ) -> None:
        self.cfg = cfg = cfg if cfg is not None else DifficultyTargetedConfig()
        cid, rank = as_sampler_columns(cluster_ids, rank_in_cluster)
        self.n_rows = n = len(cid)
        self.batch_size = cfg.batch_size
        _, self._cluster = np.unique(cid, return_inverse=True)
        self._n_clusters = int(self._cluster.max()) + 1
        # Rank fraction inside the cluster (0 easiest, 1 hardest) from the order, whatever the rank scale.
        order = np.lexsort((rank, self._cluster))
        sizes = np.bincount(self._cluster)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        pos = np.empty(n, dtype=np.float64)
        pos[order] = np.arange(n) - starts[self._cluster[order]]
        self._frac = pos / np.maximum(sizes[self._cluster] - 1, 1)
        self._emb = None
        if embeddings is not None:
            emb = np.asarray(embeddings, dtype=np.float32)
            check(emb.ndim == 2 and len(emb) == n, "embeddings must be a (|D|, d) array aligned with rows")
            self._emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        self._rng = np.random.default_rng(cfg.seed)
        self._mem_rows = np.zeros(0, dtype=np.int64)
        self._mem_succ = np.zeros(0, dtype=np.float64)
        self.steps = 0
        self._last_pred = np.zeros(0)

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """Predicted success of each row from the current memory."""
        rows = np.asarray(rows, dtype=np.int64)
        prior = float(self._mem_succ.mean()) if len(self._mem_succ) else self.cfg.target
        if not len(self._mem_rows):
            return np.full(len(rows), prior)
        lam = self.cfg.prior_strength
        if self._emb is None and self.cfg.cross_cluster_weight == 0.0:
            num, den = self._same_cluster_sums(rows)
        else:
            w = self._similarity(rows, self._mem_rows)
            num, den = w @ self._mem_succ, w.sum(axis=1)
        return (num + lam * prior) / (den + lam)

    def _same_cluster_sums(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kernel sums over same-cluster memory only: O(pairs) instead of a dense |rows| x |memory| matrix."""
        mem = self._mem_rows
        order = np.argsort(self._cluster[mem], kind="stable")
        mem, succ = mem[order], self._mem_succ[order]
        counts = np.bincount(self._cluster[mem], minlength=self._n_clusters)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        k = self._cluster[rows]
        per_row = counts[k]
        total = int(per_row.sum())
        if total == 0:
            return np.zeros(len(rows)), np.zeros(len(rows))
        row_of_pair = np.repeat(np.arange(len(rows)), per_row)
        offset = np.arange(total) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        mem_of_pair = starts[k][row_of_pair] + offset
        d = (self._frac[rows][row_of_pair] - self._frac[mem][mem_of_pair]) / self.cfg.rank_bandwidth
        w = np.exp(-0.5 * d * d)
        num = np.bincount(row_of_pair, weights=w * succ[mem_of_pair], minlength=len(rows))
        den = np.bincount(row_of_pair, weights=w, minlength=len(rows))
        return num, den

    def _similarity(self, rows: np.ndarray, mem: np.ndarray) -> np.ndarray:
        if self._emb is not None:
            cos = self._emb[rows] @ self._emb[mem].T
            return np.exp((cos - 1.0) / self.cfg.temperature)
        d = (self._frac[rows][:, None] - self._frac[mem][None, :]) / self.cfg.rank_bandwidth
        same = self._cluster[rows][:, None] == self._cluster[mem][None, :]
        return np.exp(-0.5 * d * d) * np.where(same, 1.0, self.cfg.cross_cluster_weight)

    def next_batch(self) -> np.ndarray:
        pool = min(max(self.cfg.candidate_pool, self.batch_size), self.n_rows)
        cand = self._rng.choice(self.n_rows, size=pool, replace=False)
        pred = self.predict(cand)
        best = np.argsort(np.abs(pred - self.cfg.target), kind="stable")[: self.batch_size]
        self._last_pred = pred[best]
        batch = cand[best]
        if len(batch) < self.batch_size:  # fewer rows than a batch: repeat them to keep the size fixed
            batch = np.resize(batch, self.batch_size)
        return batch.astype(np.int64, copy=False)

    def update(self, idx: Any, success: Any) -> None:
        idx, success = self._checked_update(idx, success)
        keep = self.cfg.memory_size
        self._mem_rows = np.concatenate([self._mem_rows, idx])[-keep:]
        self._mem_succ = np.concatenate([self._mem_succ, success])[-keep:]
        self.steps += 1

    def metrics(self) -> dict[str, float]:
        pred = self._last_pred
        return {
            "dots-lite/step": float(self.steps),
            "dots-lite/memory": float(len(self._mem_rows)),
            "dots-lite/pred_mean": float(pred.mean()) if len(pred) else float("nan"),
            "dots-lite/pred_abs_gap_mean": float(np.abs(pred - self.cfg.target).mean()) if len(pred) else float("nan"),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "DifficultyTargetedSampler",
            "version": STATE_VERSION,
            "config": self.cfg.model_dump(),
            "n_rows": self.n_rows,
            "steps": self.steps,
            "memory_rows": self._mem_rows.tolist(),
            "memory_success": self._mem_succ.tolist(),
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; all fields are checked first, so a refused state changes nothing."""
        s = state_header(state, "DifficultyTargetedSampler", _DOTS_KEYS, self.n_rows, STATE_VERSION)
        state_config(s["config"], self.cfg)
        steps = state_int(s["steps"], "state['steps']")
        memory = state_list(s["memory_rows"], "state['memory_rows']", self.cfg.memory_size, "rows", at_most=True)
        rows = [state_int(v, f"state['memory_rows'][{i}]", 0, self.n_rows - 1) for i, v in enumerate(memory)]
        succ = state_reals(s["memory_success"], "state['memory_success']", len(rows), "values, one per memory row")
        rng = state_rng(s["rng"], "state['rng']")
        self._mem_rows, self._mem_succ, self._rng = np.array(rows, dtype=np.int64), succ, rng
        self.steps = steps


_DOTS_KEYS = ("kind", "version", "config", "n_rows", "steps", "memory_rows", "memory_success", "rng")
