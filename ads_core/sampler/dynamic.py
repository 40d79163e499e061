"""DAPO-style dynamic sampling as a sampler, and the step loop that drops and draws again.

verl's ``algorithm.filter_groups`` rolls out a generation batch, drops the groups whose rewards all agree
(all 0 or all 1: zero advantage, no gradient) and draws more prompts until ``train_batch_size`` informative
groups are in hand. A sampler that only sees ``next_batch`` / ``update`` cannot drop anything itself: the
trainer must roll out before it knows. So the sampler (``DynamicSamplingSampler``) is the prompt stream
(shuffled epochs, like the uniform baseline) plus the ``GroupFilter`` extension of the protocol (``keep``,
``max_draws``), and ``fill_step`` is the trainer's side: it calls ``next_batch``, the rollout and ``update``
once per generation batch, keeps the informative groups, and reports what the step cost in rollouts. Any
other sampler goes through ``fill_step`` as one draw, so every sampler's rollouts are counted the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ads_core.config.sampler import DynamicSamplingConfig, UniformSamplerConfig
from ads_core.sampler.base import BaseSampler, GroupFilter, Sampler, as_sampler_columns
from ads_core.sampler.baselines import UniformSampler
from ads_core.sampler.state import state_config, state_header, state_int

STATE_VERSION = 1
_KEYS = ("kind", "version", "config", "n_rows", "draws", "informative", "epoch", "cursor")


def informative(success: np.ndarray) -> np.ndarray:
    """Groups whose rollouts disagree (0 < mean reward < 1): the only ones with a GRPO gradient."""
    success = np.asarray(success, dtype=np.float64)
    return (success > 0.0) & (success < 1.0)


class DynamicSamplingSampler(BaseSampler):
    """Shuffled-epoch prompts in generation batches of ``batch_size``; ``keep`` drops uniform-reward groups."""

    def __init__(self, cluster_ids: Any, rank_in_cluster: Any, cfg: DynamicSamplingConfig | None = None) -> None:
        self.cfg = cfg = cfg if cfg is not None else DynamicSamplingConfig()
        cid, rank = as_sampler_columns(cluster_ids, rank_in_cluster)
        self.n_rows = len(cid)
        self.batch_size = cfg.batch_size  # groups per optimizer step
        self.max_draws = cfg.max_draws
        self._stream = UniformSampler(cid, rank, UniformSamplerConfig(batch_size=cfg.batch_size, seed=cfg.seed))
        self.draws = 0  # generation batches fed back
        self.informative = 0  # informative groups among them
        self._last_share = float("nan")

    def next_batch(self) -> np.ndarray:
        """The next generation batch (``batch_size`` prompts) of the shuffled stream."""
        return self._stream.next_batch()

    def update(self, idx: Any, success: Any) -> None:
        """Count one rolled-out generation batch; the stream itself ignores feedback, like uniform."""
        _, success = self._checked_update(idx, success)
        kept = int(informative(success).sum())
        self.draws += 1
        self.informative += kept
        self._last_share = kept / len(success) if len(success) else float("nan")

    def keep(self, success: np.ndarray) -> np.ndarray:
        return informative(success)

    def metrics(self) -> dict[str, float]:
        return {
            "dynamic/draws": float(self.draws),
            "dynamic/epoch": float(self._stream.position[0]),
            "dynamic/informative_share_last": self._last_share,
            "dynamic/informative_total": float(self.informative),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "DynamicSamplingSampler",
            "version": STATE_VERSION,
            "config": self.cfg.model_dump(),
            "n_rows": self.n_rows,
            "draws": self.draws,
            "informative": self.informative,
            "epoch": self._stream.position[0],
            "cursor": self._stream.position[1],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; all fields are checked first, so a refused state changes nothing."""
        s = state_header(state, "DynamicSamplingSampler", _KEYS, self.n_rows, STATE_VERSION)
        state_config(s["config"], self.cfg)  # the seed too: it picks every epoch's permutation
        draws = state_int(s["draws"], "state['draws']")
        kept = state_int(s["informative"], "state['informative']", 0, draws * self.cfg.batch_size)
        epoch = state_int(s["epoch"], "state['epoch']")
        cursor = state_int(s["cursor"], "state['cursor']", 0, self.n_rows)
        self._stream.seek(epoch, cursor)  # all checked: nothing below can fail
        self.draws, self.informative, self._stream.steps = draws, kept, draws


@dataclass
class StepBatch:
    """What one optimizer step trains on, and what it cost."""

    rows: np.ndarray  # batch_size row positions
    success: np.ndarray  # their groups' mean rewards
    prompts: int  # prompts rolled out for this step (each with the trainer's n rollouts)
    draws: int  # generation batches rolled out
    informative: int  # informative groups found (before truncation to batch_size)


_FILTERS_GROUPS: dict[type, bool] = {}


def _filters_groups(sampler: Sampler) -> bool:
    """``isinstance(sampler, GroupFilter)``, once per class: a runtime Protocol check costs ~50 us a call."""
    cls = type(sampler)
    if cls not in _FILTERS_GROUPS:
        _FILTERS_GROUPS[cls] = isinstance(sampler, GroupFilter)
    return _FILTERS_GROUPS[cls]


def select_groups(keep_masks: Sequence[np.ndarray], need: int) -> list[tuple[int, int]]:
    """Which rolled-out groups one step trains on, as (generation batch, group) pairs: the kept groups in draw
    order, then, while the step is still short, the dropped ones in draw order; at most ``need``. ``fill_step``
    and the TRL trainer (``ads_core.train.trl.dynamic``) both choose with this."""
    kept = [(d, int(g)) for d, mask in enumerate(keep_masks) for g in np.flatnonzero(mask)]
    if len(kept) < need:
        kept += [(d, int(g)) for d, mask in enumerate(keep_masks) for g in np.flatnonzero(~np.asarray(mask))]
    return kept[:need]


def fill_step(sampler: Sampler, rollout: Callable[[np.ndarray], np.ndarray]) -> StepBatch:
    """One optimizer step's batch: draw, roll out and feed back generation batches until ``batch_size``
    informative groups are in hand (a ``GroupFilter`` sampler), or once (any other sampler).

    As in verl, surplus informative groups of the last draw are rolled out but not trained on. Unlike verl
    (which raises), a step still short after ``max_draws`` is topped up with dropped groups, in draw order:
    they carry no gradient, so the step trains on fewer informative groups.
    """
    if not _filters_groups(sampler):
        rows = sampler.next_batch()
        success = rollout(rows)
        sampler.update(rows, success)
        return StepBatch(rows, success, len(rows), 1, int(informative(success).sum()))
    need = sampler.batch_size
    drawn: list[tuple[np.ndarray, np.ndarray]] = []
    masks: list[np.ndarray] = []
    prompts = found = 0
    while len(drawn) < sampler.max_draws and found < need:
        rows = sampler.next_batch()
        success = np.asarray(rollout(rows), dtype=np.float64)
        sampler.update(rows, success)
        mask = np.asarray(sampler.keep(success), dtype=bool)
        drawn.append((rows, success))
        masks.append(mask)
        prompts, found = prompts + len(rows), found + int(mask.sum())
    picks = select_groups(masks, need)
    rows = np.array([drawn[d][0][g] for d, g in picks], dtype=np.int64)
    success = np.array([drawn[d][1][g] for d, g in picks], dtype=np.float64)
    return StepBatch(rows, success, prompts, len(drawn), found)
