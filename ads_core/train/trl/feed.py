"""The prompt sampler TRL iterates, and the path by which each prompt's rewards return to the live sampler.

`FeedbackSampler` is a torch ``Sampler[int]`` in the shape of TRL's ``RepeatSampler``: every generation batch
is one ``next_batch()`` of the wrapped sampler (any kind, through the protocol in ``ads_core.sampler.base``),
each row repeated ``num_generations`` times in a row, the whole batch yielded ``repeat_count`` times. The draw
happens lazily, when the dataloader asks for the batch's first index, so it reads the sampler's *current* state.

The feedback lag. accelerate's dataloader fetches one batch ahead of the one it hands out, so batch t + 1 is
drawn when batch t starts, before batch t's rewards exist: each batch misses exactly the feedback of the batch
before it (lag 1 generation batch; the first batch has lag 0). It can't grow: the dataloader holds at most one
batch ahead, and one update follows each generation batch. Every draw records how many updates preceded it,
and the per-step log carries ``lag = step - 1 - updates_before_draw``, so the lag is measured, not assumed.

Exact resume. A checkpoint after step N holds the sampler state after update N (its generator already past the
prefetched draw N + 1) and that drawn-but-unrewarded batch (``pending``). Restored, the sampler yields the
pending batch first and then draws on, so the batches after a resume are those the uninterrupted run drew.

Dynamic sampling (a ``GroupFilter`` sampler, kind ``dynamic``). The dataloader's batch is each step's first
generation batch; when too few of its groups are informative, the trainer draws more generation batches inside
the same step (``draw_extra``) and feeds each back at once (``feedback_extra``), so they never wait in
``pending``. ``updates`` still counts steps; ``extra_draws`` counts the additional generation batches.

The rows (`load_rows`): TRL renders each ``prompt`` (the artifact's chat messages) with the policy's chat template
and passes every other column to the reward functions, one entry per completion. So ``row`` (the position in the
training file) keys the feedback to the sampler, ``sample_id`` names the prompt in the log, ``ground_truth`` is
what the math reward checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import torch.utils.data

from ads_core import storage
from ads_core.sampler.base import GroupFilter, Sampler, checked_batch
from ads_core.sampler.checkpoint import SamplerCheckpoint
from ads_core.sampler.dynamic import informative
from ads_core.sampler.feedback import Feedback as SamplerFeedback
from ads_core.sampler.state import SamplerStateError, refuse, state_int, state_list, state_mapping

STATE_FORMAT = "ads-trl-sampler"
STATE_VERSION = 2  # 2 added extra_draws; a version-1 state (no dynamic sampling then) loads with 0
STATE_KEYS = ("format", "version", "kind", "prompts_per_step", "draws", "updates", "extra_draws", "sampler", "pending")
STATE_KEYS_V1 = tuple(k for k in STATE_KEYS if k != "extra_draws")
DRAW_KEYS = ("index", "rows", "after_updates")


@dataclass
class Draw:
    index: int  # 1-based: the step that trains on it
    rows: list[int]
    after_updates: int  # updates the sampler had received when it drew this batch

    @property
    def lag(self) -> int:
        """Earlier batches whose feedback this draw could not see."""
        return self.index - 1 - self.after_updates


@dataclass
class Feedback(SamplerFeedback):
    """One generation batch's (or one step's) feedback: each prompt once (first appearance order, ``rows``) with
    its mean correctness (``success``: what update() got) and reward, and each group (``num_generations``
    completions of one drawn row) in draw order."""

    draw: Draw
    rewards: np.ndarray  # mean total reward (correctness + optional format reward) of each row's completions
    completions: int
    group_success: np.ndarray = field(default_factory=lambda: np.zeros(0))  # mean correctness of each group
    rollout_batches: int = 1  # generation batches rolled out for this step
    rollout_prompts: int = 0  # prompts (groups) rolled out for this step
    trained: np.ndarray | None = None  # mean correctness of each group of the gradient batch; None: group_success

    @property
    def trained_group_success(self) -> np.ndarray:
        """Each group's mean correctness in the gradient batch's order (dynamic sampling picks from several
        generation batches; otherwise the one rolled-out batch)."""
        return self.group_success if self.trained is None else self.trained

    @property
    def informative_groups(self) -> int:
        """Rolled-out groups whose completions disagree (0 < mean correctness < 1): those with a gradient."""
        return int(informative(self.group_success).sum())


class FeedbackSampler(torch.utils.data.Sampler[int]):
    """TRL's prompt sampler over a live ``Sampler``: lazy draws, repeat semantics, exact resume."""

    def __init__(
        self, sampler: Sampler, kind: str, num_generations: int, repeat_count: int, n_rows: int, steps: int
    ) -> None:
        self.sampler = sampler
        self.kind = kind
        self.num_generations = int(num_generations)
        self.repeat_count = int(repeat_count)
        self.n_rows = int(n_rows)
        self.steps = int(steps)
        self.draws = 0
        self.updates = 0
        self.extra_draws = 0  # generation batches drawn inside a step, beyond its first (dynamic sampling)
        self.pending: list[Draw] = []  # drawn, not yet fed back (oldest first)
        self._replay: list[Draw] = []  # restored pending batches, yielded before any new draw

    @property
    def batch_size(self) -> int:
        return int(self.sampler.batch_size)

    @property
    def filters_groups(self) -> bool:
        """The sampler drops uninformative groups and wants more drawn in the same step (DAPO-style)."""
        return isinstance(self.sampler, GroupFilter)

    def __len__(self) -> int:  # the whole run in one "epoch": the Trainer stops at max_steps
        return max(1, self.steps) * self.batch_size * self.num_generations * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        while True:
            draw = self._replay.pop(0) if self._replay else self._draw()
            for _ in range(self.repeat_count):
                for row in draw.rows:
                    for _ in range(self.num_generations):
                        yield row

    def _draw(self) -> Draw:
        rows = self._take(self.draws + 1)
        self.draws += 1
        draw = Draw(index=self.draws, rows=rows, after_updates=self.updates)
        self.pending.append(draw)
        return draw

    # -- feedback ----------------------------------------------------------------------------------

    def feedback(self, rows: Any, correctness: Any, rewards: Any) -> Feedback:
        """Feed one generation batch back: per-completion rows (global order), correctness and total rewards."""
        if not self.pending:
            raise RuntimeError("feedback without a drawn batch: the trainer generated rows this sampler never drew")
        draw = self.pending[0]
        fb = self._feed(draw, rows, correctness, rewards)
        self.updates += 1
        self.pending.pop(0)
        return fb

    def draw_extra(self) -> Draw:
        """Another generation batch for the current step (dynamic sampling); fed back by ``feedback_extra``."""
        rows = self._take(self.updates)
        self.extra_draws += 1
        return Draw(index=self.updates, rows=rows, after_updates=self.updates)

    def _take(self, step: int) -> list[int]:
        """The sampler's next batch for STEP, checked before the dataloader hands out any row of it (a bad one
        stops the run here, naming the sampler: nothing of it is rolled out, trained or checkpointed)."""
        return checked_batch(self.sampler.next_batch(), self.n_rows, self.batch_size, self.kind, step)

    def feedback_extra(self, draw: Draw, rows: Any, correctness: Any, rewards: Any) -> Feedback:
        """Feed back a generation batch from ``draw_extra``: the sampler is updated, the step count is not."""
        return self._feed(draw, rows, correctness, rewards)

    def _feed(self, draw: Draw, rows: Any, correctness: Any, rewards: Any) -> Feedback:
        rows = np.asarray(rows, dtype=np.int64)
        correctness = np.clip(np.nan_to_num(np.asarray(correctness, dtype=np.float64), nan=0.0), 0.0, 1.0)
        rewards = np.nan_to_num(np.asarray(rewards, dtype=np.float64), nan=0.0)
        unique, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # first-appearance order, as drawn
        counts = np.bincount(inverse)
        success = (np.bincount(inverse, weights=correctness) / counts)[order]
        mean_reward = (np.bincount(inverse, weights=rewards) / counts)[order]
        unique = unique[order]
        drawn = list(dict.fromkeys(draw.rows))
        if unique.tolist() != drawn:
            raise RuntimeError(
                f"step {draw.index}: the generation batch holds rows {unique.tolist()[:8]}..., the sampler drew "
                f"{drawn[:8]}...; TRL must consume exactly one drawn batch per generation batch "
                "(num_iterations 1, steps_per_generation = gradient_accumulation_steps)"
            )
        groups = len(rows) // self.num_generations
        fb = Feedback(
            draw=draw,
            rows=unique,
            success=success,
            rewards=mean_reward,
            completions=len(rows),
            group_success=correctness[: groups * self.num_generations].reshape(groups, -1).mean(axis=1),
            rollout_prompts=groups,
        )
        fb.apply(self.sampler)  # the sampler's one update with this generation batch
        return fb

    # -- state ---------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "kind": self.kind,
            "prompts_per_step": self.batch_size,
            "draws": self.draws,
            "updates": self.updates,
            "extra_draws": self.extra_draws,
            "sampler": self.sampler.state_dict(),
            "pending": [{"index": d.index, "rows": d.rows, "after_updates": d.after_updates} for d in self.pending],
        }

    def checkpoint(self, step: int) -> SamplerCheckpoint:
        """The state as the one sampler checkpoint format: kind, step, the sampler's state, the pending draws, and
        the feed's own counters (``trainer``)."""
        state = self.state_dict()
        own = {k: v for k, v in state.items() if k not in ("kind", "sampler", "pending")}
        return SamplerCheckpoint(self.kind, step, state["sampler"], state["pending"], own)

    @staticmethod
    def state_of(checkpoint: SamplerCheckpoint) -> dict[str, Any]:
        """The feed state a checkpoint holds (``load_state_dict`` checks it); its counters must say STEP updates."""
        state = {**checkpoint.trainer, "kind": checkpoint.kind}
        state |= {"sampler": checkpoint.sampler, "pending": checkpoint.pending}
        if state.get("updates") != checkpoint.step:
            raise SamplerStateError("['trainer']['updates']", f"expected {checkpoint.step} updates (one per step)")
        return state

    def check_state(self, state: Any, fresh: Sampler) -> list[Draw]:
        """Validate a saved state without changing this sampler; ``fresh`` (a new sampler of the same kind)
        takes the nested sampler state, which checks every field of it. Returns the pending draws."""
        if not isinstance(state, Mapping):
            refuse("state", "a dict (a saved TRL sampler state)", state)
        if "format" in state and state["format"] != STATE_FORMAT:
            refuse("state['format']", repr(STATE_FORMAT), state["format"])
        version = state.get("version")
        if version not in (1, STATE_VERSION) or isinstance(version, bool):
            refuse("state['version']", f"state version 1 or {STATE_VERSION}", version)
        state_mapping(state, "state", STATE_KEYS if version == STATE_VERSION else STATE_KEYS_V1)
        state_int(state.get("extra_draws", 0), "state['extra_draws']")
        if state["kind"] != self.kind:
            raise SamplerStateError(
                "state['kind']", f"the run was checkpointed with sampler {state['kind']!r}, this one is {self.kind!r}"
            )
        batch = state_int(state["prompts_per_step"], "state['prompts_per_step']", 1)
        if batch != self.batch_size:
            raise SamplerStateError(
                "state['prompts_per_step']", f"saved with {batch} prompts per step, this run has {self.batch_size}"
            )
        updates = state_int(state["updates"], "state['updates']")
        draws = state_int(state["draws"], "state['draws']", updates)
        waiting = "drawn batches awaiting feedback"
        pending_raw = state_list(state["pending"], "state['pending']", draws - updates, waiting)
        pending = []
        for i, item in enumerate(pending_raw):
            where = f"state['pending'][{i}]"
            d = state_mapping(item, where, DRAW_KEYS)
            index = state_int(d["index"], f"{where}['index']", updates + 1 + i, updates + 1 + i)
            after = state_int(d["after_updates"], f"{where}['after_updates']", 0, updates)
            rows = state_list(d["rows"], f"{where}['rows']", batch, "row positions")
            rows = [state_int(r, f"{where}['rows'][{j}]", 0, self.n_rows - 1) for j, r in enumerate(rows)]
            pending.append(Draw(index=index, rows=rows, after_updates=after))
        fresh.load_state_dict(state["sampler"])  # the sampler's own all-or-nothing check
        return pending

    def load_state_dict(self, state: Any, fresh: Sampler) -> None:
        """Restore a checkpoint's state: all of it checked first (``check_state``), so a refused one changes
        nothing; then ``fresh`` (holding the checked schedule) becomes the live sampler."""
        pending = self.check_state(state, fresh)
        self.sampler = fresh
        self.draws, self.updates = int(state["draws"]), int(state["updates"])
        self.extra_draws = int(state.get("extra_draws", 0))
        self.pending = pending
        self._replay = list(pending)


# -- the training rows -----------------------------------------------------------------------------------------

COLUMNS = ["prompt", "reward_model", "sample_id", "cluster_id", "rank_in_cluster"]


@dataclass
class TrainRows:
    dataset: Any  # datasets.Dataset: prompt, ground_truth, row, sample_id
    sample_ids: np.ndarray  # (n,) int64, by row
    cluster_ids: np.ndarray  # (n,) int64, by row
    rank_in_cluster: np.ndarray  # (n,), by row

    @property
    def n_rows(self) -> int:
        return len(self.sample_ids)


def load_rows(uri: str) -> TrainRows:
    """Read the training file (local or any fsspec URI) once; rows keep the file's order."""
    import datasets

    table = storage.read_parquet(uri, columns=COLUMNS)
    truth = table.column("reward_model").combine_chunks().field("ground_truth")
    n = table.num_rows
    frame = pa.table(
        {
            "prompt": table.column("prompt"),
            "ground_truth": truth.cast(pa.string()),
            "row": pa.array(np.arange(n, dtype=np.int64)),
            "sample_id": table.column("sample_id").cast(pa.int64()),
        }
    )
    return TrainRows(
        dataset=datasets.Dataset(frame),
        sample_ids=table.column("sample_id").to_numpy().astype(np.int64),
        cluster_ids=table.column("cluster_id").to_numpy().astype(np.int64),
        rank_in_cluster=table.column("rank_in_cluster").to_numpy(),
    )
