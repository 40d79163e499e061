"""The ``dots`` sampler: a selection round every ``mu`` steps, driven by the trained predictor.

A round: draw a uniform reference set of K rows; get their success under the *current* policy (``reference_rollouts``,
the callable the trainer provides for the kind's declared need ``reference_rollouts``, handed to the constructor:
TRL's rolls them out with the training G, temperature and prompt, not for gradients); predict every row's success
from those labels (``predictor.predict``); refit linearly on the references (the official code's RL-time
calibration); draw the next ``mu`` batches with ``selection.select_round``. Each round records Pearson rho between
predicted and observed success on the reference set, the reference rollouts' count and seconds; each update
records the share of the step's rows with 0 < success < 1.

A trainer that cannot roll out references refuses the kind (``ads_core.train.trainers.unmet_needs``: verl). Made
without one (the artifact check, a test of the rule alone), the references are the most recent K rows the sampler
was fed back (their observed success under the policy that trained on them), and the first round, before any
feedback, is uniform. The reference rollout of round r runs under its own seed (``seed``, r), so where it runs
(during a prefetch, after a resume) does not change what it draws.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ads_core.common.errors import InputError
from ads_core.sampler.base import BaseSampler, ReferenceRollout, as_sampler_columns, check
from ads_core.sampler.dots.options import DotsSamplerConfig
from ads_core.sampler.dots.selection import select_round
from ads_core.sampler.state import state_config, state_header, state_int, state_list, state_reals, state_rng

STATE_VERSION = 1
_KEYS = ("kind", "version", "config", "n_rows", "steps", "rounds", "queue", "memory_rows", "memory_success", "rng")
_KEYS += ("round_metrics", "drawn_metrics")


class DotsSampler(BaseSampler):
    """DOTS's online selection over the rows of an artifact (see the module)."""

    def __init__(
        self,
        cluster_ids: Any,
        rank_in_cluster: Any,
        cfg: DotsSamplerConfig | None = None,
        predictor: Any = None,
        embeddings: np.ndarray | None = None,
        reference_rollouts: ReferenceRollout | None = None,
    ) -> None:
        self.cfg = cfg = cfg if cfg is not None else DotsSamplerConfig()
        cid, _ = as_sampler_columns(cluster_ids, rank_in_cluster)
        self.n_rows = len(cid)
        self.batch_size = cfg.batch_size
        if predictor is None and cfg.predictor is not None:
            from ads_core.sampler.dots.artifact import load

            loaded = load(cfg.predictor)
            predictor, embeddings = loaded.model, loaded.embeddings
        if predictor is None:  # an option to set, not something wrong with the artifact's columns
            raise InputError(
                "the dots sampler needs sampler.dots.predictor: train one with `ads dots-train ART`",
                options=("sampler.dots.predictor",),
            )
        emb = np.asarray(embeddings, dtype=np.float32)
        check(
            emb.ndim == 2 and len(emb) == self.n_rows,
            f"the DOTS predictor's embeddings cover {len(emb)} rows, the training artifact has {self.n_rows}: "
            "train the predictor on this artifact (`ads dots-train ART`)",
        )
        self.predictor, self.embeddings = predictor, emb
        self._rollout = reference_rollouts  # the trainer's (the kind's need); None: fed-back rows as references
        self._rng = np.random.default_rng(cfg.seed)
        self._queue: list[list[int]] = []
        self._mem_rows = np.zeros(0, dtype=np.int64)
        self._mem_succ = np.zeros(0, dtype=np.float64)
        self.steps = 0
        self.rounds = 0
        self.round_metrics: dict[str, float] = {}  # of the newest round
        self._drawn: list[dict[str, float]] = []  # each drawn, not yet fed back batch's round metrics (oldest first)
        self._step_metrics: dict[str, float] = {}  # of the batch last fed back

    # -- a round --------------------------------------------------------------------------------------

    def _references(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """(reference rows, their success, seconds, rollouts) for the next round."""
        k = min(self.cfg.reference_size, self.n_rows)
        if self._rollout is not None:
            rows = np.sort(self._rng.choice(self.n_rows, size=k, replace=False))
            started = time.perf_counter()
            success = np.asarray(self._rollout(rows, self.cfg.seed * 1_000_003 + self.rounds), dtype=np.float64)
            check(len(success) == len(rows), "the reference rollout returned a success per row")
            return rows, np.clip(success, 0.0, 1.0), time.perf_counter() - started, float(k)
        rows, success = self._mem_rows[-k:], self._mem_succ[-k:]
        rows, first = np.unique(rows[::-1], return_index=True)  # the most recent observation of each row
        return rows, success[::-1][first], 0.0, 0.0

    def _new_round(self) -> None:
        from ads_core.sampler.dots import predictor as dp

        refs, success, seconds, rollouts = self._references()
        if len(refs) >= 2:
            raw = dp.predict(self.predictor, self.embeddings, refs, success)
            rho = dp.pearson(raw[refs], success)
            pred = dp.linear_refit(raw, refs, success) if self.cfg.linear_refit else raw
        else:  # no labels yet (no reference rollout, first round): every row alike, a uniform draw
            pred, rho = np.full(self.n_rows, 1.0 - self.cfg.alpha), float("nan")
        batches = select_round(pred, self.batch_size, self.cfg.mu, self.cfg.alpha, self.cfg.tau, self._rng)
        self._queue = [b.tolist() for b in batches]
        self.rounds += 1
        chosen = np.concatenate(batches)
        self.round_metrics = {
            "dots/round": float(self.rounds),
            "dots/rho": rho,
            "dots/reference_rows": float(len(refs)),
            "dots/reference_rollouts": rollouts,
            "dots/reference_seconds": seconds,
            "dots/reference_success_mean": float(success.mean()) if len(success) else float("nan"),
            "dots/predicted_difficulty_mean": float(1.0 - pred[chosen].mean()),
        }

    def next_batch(self) -> np.ndarray:
        new_round = not self._queue
        if new_round:
            self._new_round()
        self._drawn.append({**self.round_metrics, "dots/new_round": float(new_round)})
        return np.asarray(self._queue.pop(0), dtype=np.int64)

    def update(self, idx: Any, success: Any) -> None:
        idx, success = self._checked_update(idx, success)
        keep = max(self.cfg.reference_size, 1)
        self._mem_rows = np.concatenate([self._mem_rows, idx])[-keep:]
        self._mem_succ = np.concatenate([self._mem_succ, success])[-keep:]
        self.steps += 1
        effective = (success > 0) & (success < 1)
        self._step_metrics = self._drawn.pop(0) if self._drawn else {}  # the round this batch was drawn in
        self._step_metrics["dots/effective_share"] = float(effective.mean()) if len(success) else float("nan")

    def metrics(self) -> dict[str, float]:
        """The last fed-back batch's: its round's rho, reference cost and predicted difficulty, and the share of
        its rows with 0 < success < 1 (the sampler may already have drawn the next round: the prefetch)."""
        return {"dots/step": float(self.steps), **self._step_metrics}

    # -- state ----------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "DotsSampler",
            "version": STATE_VERSION,
            "config": self.cfg.model_dump(),
            "n_rows": self.n_rows,
            "steps": self.steps,
            "rounds": self.rounds,
            "queue": [list(map(int, b)) for b in self._queue],
            "memory_rows": self._mem_rows.tolist(),
            "memory_success": self._mem_succ.tolist(),
            "rng": self._rng.bit_generator.state,
            "round_metrics": _plain(self.round_metrics),
            "drawn_metrics": [_plain(m) for m in self._drawn],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; every field is checked first, so a refused state changes nothing."""
        s = state_header(state, "DotsSampler", _KEYS, self.n_rows, STATE_VERSION)
        state_config(s["config"], self.cfg)
        steps = state_int(s["steps"], "state['steps']")
        rounds = state_int(s["rounds"], "state['rounds']")
        queue_raw = state_list(s["queue"], "state['queue']", self.cfg.mu, "batches", at_most=True)
        queue = []
        for i, batch in enumerate(queue_raw):
            rows = state_list(batch, f"state['queue'][{i}]", self.batch_size, "row positions")
            queue.append([state_int(r, f"state['queue'][{i}][{j}]", 0, self.n_rows - 1) for j, r in enumerate(rows)])
        keep = max(self.cfg.reference_size, 1)
        memory = state_list(s["memory_rows"], "state['memory_rows']", keep, "rows", at_most=True)
        rows = [state_int(v, f"state['memory_rows'][{i}]", 0, self.n_rows - 1) for i, v in enumerate(memory)]
        succ = state_reals(s["memory_success"], "state['memory_success']", len(rows), "values, one per memory row")
        rng = state_rng(s["rng"], "state['rng']")
        metrics, drawn = s["round_metrics"], s["drawn_metrics"]
        check(isinstance(metrics, dict), "state['round_metrics']: expected a dict")
        check(isinstance(drawn, list) and all(isinstance(m, dict) for m in drawn), "state['drawn_metrics']: a list")
        self.steps, self.rounds, self._queue, self._rng = steps, rounds, queue, rng
        self._mem_rows, self._mem_succ = np.array(rows, dtype=np.int64), succ
        self.round_metrics = _floats(metrics)
        self._drawn = [_floats(m) for m in drawn]


def _plain(metrics: dict[str, float]) -> dict[str, float | None]:
    return {k: (float(v) if np.isfinite(v) else None) for k, v in metrics.items()}


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    return {str(k): float("nan") if v is None else float(v) for k, v in metrics.items()}
