"""The run's sampler (ADS or a baseline, any kind from `ads_core.sampler.kinds`) as the ``sampler=`` of verl's
training ``StatefulDataLoader``.

verl 0.9 builds its train loader as ``StatefulDataLoader(dataset, batch_size=data.train_batch_size,
num_workers=0, drop_last=True, sampler=<ours>, collate_fn=...)``; torchdata wraps the sampler in its own
stateful ``BatchSampler``. ``ADSVerlSampler`` therefore

* yields, per training step, exactly one sampler batch (``next_batch()``, ``batch_size`` row positions of the
  ``RLHFDataset``); the draw happens lazily when the trainer asks for the next batch, i.e. after the previous
  step's ``update`` (``num_workers`` must be 0);
* runs finite "epochs" of ``steps_per_epoch = max(1, len(dataset) // batch_size)`` batches, so verl's
  epoch counter and ``total_epochs`` keep their meaning (the ADS schedule itself resets on its own clock);
* implements ``state_dict`` / ``load_state_dict``: torchdata stores them in verl's ``data.pt`` and, on
  load, calls ``load_state_dict`` and then ``iter()`` again, which resumes at the saved batch.

The sampler is made by ``build_sampler`` (the kind and knobs of the run's sampler.json, default ads) and driven
only through the protocol of ``ads_core.sampler.base``, so every kind without extra rollouts per step trains the
same way.
``feedback(batch)`` turns a verl training batch (n rollouts per prompt, grouped by ``uid``) into the
sampler's ``update(idx, success)`` arguments, identifying prompts by ``extra_info.sample_id`` (or
``extra_info.index``), since verl drops custom top-level columns before the reward step.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch.utils.data

from ads_core.sampler.base import Sampler, checked_batch
from ads_core.sampler.feedback import Feedback
from ads_core.sampler.kinds import build_sampler
from ads_core.sampler.state import SamplerStateError, refuse, state_int, state_mapping
from ads_core.train.verl.options import VerlConfig
from ads_core.train.verl.sampler_file import RunSampler, default_run_sampler

log = logging.getLogger("ads.verl")

STATE_KIND = "ADSVerlSampler"
STATE_KEYS = ("kind", "yielded", "steps_per_epoch", "batch_size", "sampler")
SUCCESS_KEYS = ("acc",)  # per-rollout 0/1 (or fraction) correctness, from the reward function's extra info
SCORE_KEYS = ("score",)  # fallback: the sign of the reward
SCORE_TENSORS = ("token_level_scores", "rm_scores", "token_level_rewards")


class BatchIdentityError(ValueError):
    """A training batch can't be mapped back to rows of the training set."""


@dataclass
class BatchFeedback(Feedback):
    """One verl training batch as sampler feedback: each prompt group's row in the RLHFDataset (``rows``) and the
    mean correctness of its rollouts (``success``), and how the batch mapped onto rows."""

    groups: int  # uid groups in the batch
    unmatched: int  # groups whose id is not a training row (skipped when not strict)
    rollouts: int
    source: str  # where correctness came from: acc, score or a tensor name


class ADSVerlSampler(torch.utils.data.Sampler[int]):
    """torch ``Sampler[int]`` over an ``RLHFDataset`` that emits whole sampler batches, with resumable state."""

    def __init__(
        self,
        sampler: Sampler,
        sample_ids: Any,
        index_ids: Any = None,
        cluster_ids: Any = None,
        *,
        kind: str = "ads",
        steps_per_epoch: int | None = None,
        cluster_metrics_interval: int = VerlConfig.model_fields["cluster_metrics_interval"].default,
        strict_ids: bool = VerlConfig.model_fields["strict_ids"].default,
    ) -> None:
        self.sampler = sampler
        self.kind = kind
        n = len(np.asarray(sample_ids)) if sample_ids is not None else int(getattr(sampler, "n_rows", 0))
        if getattr(sampler, "n_rows", n) != n:
            raise ValueError(f"{n} sample ids for a sampler over {sampler.n_rows} rows")  # type: ignore[attr-defined]
        self.n_rows = n
        self._row_of_sid = _unique_map(sample_ids, n, "sample_id")
        self._row_of_index = _unique_map(index_ids, n, "extra_info.index", required=False)
        self._cluster_ids = None if cluster_ids is None else np.asarray(cluster_ids, dtype=np.int64)
        self.steps_per_epoch = int(steps_per_epoch) if steps_per_epoch else max(1, n // sampler.batch_size)
        if self.steps_per_epoch < 1:
            raise ValueError("steps_per_epoch must be >= 1")
        self.cluster_metrics_interval = int(cluster_metrics_interval)
        self.strict_ids = bool(strict_ids)
        self._yielded = 0  # indices yielded by the live iterator in this epoch
        self._resume = 0  # where the next iter() starts (set by load_state_dict)
        self.last_feedback: BatchFeedback | None = None
        self.step_of: Callable[[], int] | None = None  # the trainer's global step, for errors (else epoch batch)

    def follow_steps(self, step_of: Callable[[], int]) -> None:
        """Name STEP_OF's step (the trainer's global step) in a bad batch's error. verl makes this sampler before
        its trainer, so ``ADSRayPPOTrainer`` hands it over once it exists, by this call."""
        self.step_of = step_of

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_dataset(cls, dataset: Any, run: RunSampler | None = None) -> ADSVerlSampler:
        """Build over verl's ``RLHFDataset`` (its ``.dataframe`` after overlong-prompt filtering) with the run's
        sampler: RUN, as ``ADSTaskRunner`` reads it from RUN_DIR/sampler.json (default: every default)."""
        run = run or default_run_sampler()
        section = run.sampler
        cols = dataset_columns(dataset)
        cid, rank = cols["cluster_id"], cols["rank_in_cluster"]
        sampler = build_sampler(section.kind, cid, rank, section, run.batch_size)
        return cls(
            sampler,
            cols["sample_id"],
            cols.get("index"),
            cid,
            kind=section.kind,
            cluster_metrics_interval=run.cluster_metrics_interval,
            strict_ids=run.strict_ids,
        )

    @property
    def batch_size(self) -> int:
        return int(self.sampler.batch_size)

    # -- torch Sampler ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.steps_per_epoch * self.batch_size

    def __iter__(self) -> Iterator[int]:
        start = self._resume
        self._resume = 0
        self._yielded = start
        return self._generate(start // self.batch_size)

    def _generate(self, first_batch: int) -> Iterator[int]:
        for batch in range(first_batch, self.steps_per_epoch):
            step = self.step_of() if self.step_of is not None else batch + 1
            rows = checked_batch(self.sampler.next_batch(), self.n_rows, self.batch_size, self.kind, step)
            for row in rows:  # checked whole before the loader takes its first row: a bad batch rolls out nothing
                self._yielded += 1  # counted before the yield: a suspended generator has handed it out
                yield row

    # -- state (verl's data.pt, via torchdata) ---------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": STATE_KIND,
            "yielded": int(self._yielded),
            "steps_per_epoch": self.steps_per_epoch,
            "batch_size": self.batch_size,
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the schedule and the position in the epoch; the next ``iter()`` resumes there.

        A checkpoint is untrusted input: every field (the nested sampler state too) is checked before anything
        is assigned, so a refused state (a ``SamplerStateError`` naming the field, e.g.
        ``state['sampler']['steps']``) leaves this sampler exactly as it was.
        """
        yielded, loaded = self._checked(state)
        self.sampler = loaded
        if yielded % self.batch_size:
            log.warning("sampler state saved mid-batch (%d indices); resuming at the batch start", yielded)
        self._resume = min(yielded - yielded % self.batch_size, len(self))
        self._yielded = self._resume

    def check_state(self, state: Any) -> int:
        """Validate a saved ``state_dict`` against this sampler without changing it; returns ``yielded``."""
        return self._checked(state)[0]

    def _checked(self, state: Any) -> tuple[int, Sampler]:
        if not isinstance(state, Mapping):
            refuse("state", f"a dict (a saved {STATE_KIND} state)", state)
        if "kind" in state and not (isinstance(state["kind"], str) and state["kind"] == STATE_KIND):
            refuse("state['kind']", repr(STATE_KIND), state["kind"])
        state_mapping(state, "state", STATE_KEYS)
        batch_size = state_int(state["batch_size"], "state['batch_size']", 1)
        if batch_size != self.batch_size:
            raise SamplerStateError(
                "state['batch_size']",
                f"state was saved with batch size {batch_size}, this sampler's is {self.batch_size}",
            )
        steps = state_int(state["steps_per_epoch"], "state['steps_per_epoch']", 1)
        if steps != self.steps_per_epoch:
            raise SamplerStateError(
                "state['steps_per_epoch']",
                f"state was saved with {steps} steps per epoch, "
                f"this sampler has {self.steps_per_epoch} (another training set?)",
            )
        yielded = state_int(
            state["yielded"],
            "state['yielded']",
            0,
            steps * batch_size,
            f" (indices of this epoch: {steps} steps of {batch_size})",
        )
        return yielded, loaded_copy(self.sampler, state["sampler"], "state['sampler']")

    def restore_schedule(self, sampler_state: Mapping[str, Any]) -> None:
        """Restore only the sampler's own state and start the next ``iter()`` at the beginning of an epoch.

        The trainer uses this when verl skips ``data.pt`` at an epoch boundary. A refused state
        (``SamplerStateError``) changes nothing.
        """
        self.sampler = loaded_copy(self.sampler, sampler_state, "state")
        self._resume = 0
        self._yielded = 0

    def load_schedule(self, sampler_state: Mapping[str, Any]) -> None:
        """Restore only the sampler's own state, keeping the position in the epoch (verl's ``data.pt`` has it)."""
        self.sampler = loaded_copy(self.sampler, sampler_state, "state")

    # -- feedback --------------------------------------------------------------------------------

    def row_of(self, extra_info: Any) -> int | None:
        """Dataset row of one rollout, from its ``extra_info`` (``sample_id`` first, then ``index``)."""
        if not isinstance(extra_info, Mapping):
            return None
        sid = extra_info.get("sample_id")
        if sid is not None:
            return self._row_of_sid.get(int(sid))
        index = extra_info.get("index")
        if index is not None and self._row_of_index is not None:
            return self._row_of_index.get(int(index))
        return None

    def feedback(self, batch: Any) -> BatchFeedback:
        """Group a verl ``DataProto`` by ``uid`` and return each prompt's row and mean rollout success."""
        ntb = batch.non_tensor_batch
        for key in ("uid", "extra_info"):
            if key not in ntb:
                raise BatchIdentityError(f"training batch has no non-tensor column {key!r}; found {sorted(ntb)}")
        uids = np.asarray([str(u) for u in ntb["uid"]], dtype=object)
        success, source = rollout_success(batch)
        if len(success) != len(uids):
            raise BatchIdentityError(f"{len(success)} correctness values for {len(uids)} rollouts")
        rows = np.array([-1 if (r := self.row_of(e)) is None else r for e in ntb["extra_info"]], dtype=np.int64)
        _, first, inverse = np.unique(uids, return_index=True, return_inverse=True)
        counts = np.bincount(inverse)
        group_success = np.bincount(inverse, weights=success) / counts
        group_rows = rows[first]
        # every rollout of a group must point at the same row
        if not np.array_equal(rows, group_rows[inverse]):
            bad = int(np.flatnonzero(rows != group_rows[inverse])[0])
            raise BatchIdentityError(
                f"rollouts of uid {uids[bad]} map to different rows ({rows[bad]} vs {group_rows[inverse[bad]]})"
            )
        unknown = group_rows < 0
        if unknown.any():
            sample = ntb["extra_info"][int(first[np.flatnonzero(unknown)[0]])]
            message = (
                f"{int(unknown.sum())} of {len(group_rows)} prompt groups have no known row id in "
                f"extra_info (first: sample_id={_get(sample, 'sample_id')!r}, "
                f"index={_get(sample, 'index')!r}); was the run started on another artifact?"
            )
            if self.strict_ids:
                raise BatchIdentityError(message + " (to skip them, set verl.strict_ids false: -s strict_ids=false)")
            log.warning(message)
        if self._cluster_ids is not None:
            self._check_clusters(ntb["extra_info"], rows)
        keep = ~unknown
        return BatchFeedback(
            rows=group_rows[keep],
            success=np.clip(group_success[keep], 0.0, 1.0),
            groups=len(group_rows),
            unmatched=int(unknown.sum()),
            rollouts=len(uids),
            source=source,
        )

    def _check_clusters(self, extra_infos: Any, rows: np.ndarray) -> None:
        for e, r in zip(extra_infos, rows.tolist(), strict=True):
            cid = _get(e, "cluster_id")
            if r >= 0 and cid is not None and int(cid) != int(self._cluster_ids[r]):
                raise BatchIdentityError(
                    f"extra_info.cluster_id={cid} but row {r} of the training set is in cluster "
                    f"{int(self._cluster_ids[r])}: extra_info and the cluster columns disagree"
                )

    def update_from_batch(self, batch: Any, step: int | None = None) -> dict[str, float]:
        """``feedback`` + the sampler's ``update``; returns the metrics to log for this step."""
        fb = self.feedback(batch)
        fb.apply(self.sampler)
        self.last_feedback = fb
        return self.metrics(step)

    def metrics(self, step: int | None = None) -> dict[str, float]:
        """``ads/*`` summaries every step; per-cluster series every ``cluster_metrics_interval`` steps."""
        every = self.cluster_metrics_interval
        per_cluster = every > 0 and (step is None or step % every == 0 or step == 1)
        out = {k: v for k, v in self.sampler.metrics().items() if per_cluster or k.count("/") == 1}
        fb = self.last_feedback
        if fb is not None:
            out["ads/groups"] = float(fb.groups)
            out["ads/unmatched_groups"] = float(fb.unmatched)
            out["ads/batch_success_mean"] = float(fb.success.mean()) if len(fb.success) else 0.0
        return out


def rollout_success(batch: Any) -> tuple[np.ndarray, str]:
    """Per-rollout correctness in [0, 1]: ``acc`` if the reward returned it, else the sign of the score."""
    ntb = batch.non_tensor_batch
    for key in SUCCESS_KEYS:
        if key in ntb:
            vals = np.asarray(ntb[key], dtype=np.float64)
            return np.clip(np.nan_to_num(vals, nan=0.0), 0.0, 1.0), key
    for key in SCORE_KEYS:
        if key in ntb:
            vals = np.nan_to_num(np.asarray(ntb[key], dtype=np.float64), nan=0.0)
            return (vals > 0).astype(np.float64), key
    tensors = batch.batch
    for key in SCORE_TENSORS:
        if tensors is not None and key in tensors.keys():
            total = tensors[key].float().reshape(len(tensors[key]), -1).sum(-1).cpu().numpy()
            return (total > 0).astype(np.float64), key
    raise BatchIdentityError(
        f"training batch has no correctness signal: none of acc, score, {', '.join(SCORE_TENSORS)}"
    )


def dataset_columns(dataset: Any) -> dict[str, np.ndarray]:
    """cluster_id, rank_in_cluster, sample_id (and extra_info.index) of an ``RLHFDataset``'s rows, in order."""
    frame = getattr(dataset, "dataframe", None)
    if frame is None:
        raise ValueError("the training dataset has no .dataframe (expected verl's RLHFDataset)")
    names = set(frame.column_names)
    missing = [c for c in ("cluster_id", "rank_in_cluster") if c not in names]
    if missing:
        raise ValueError(f"training set lacks the ADS columns {missing}; build it with `ads build`")
    wanted = ["cluster_id", "rank_in_cluster"] + [c for c in ("sample_id", "extra_info") if c in names]
    table = frame.select_columns(wanted).with_format("arrow")[:]
    out = {
        "cluster_id": table.column("cluster_id").to_numpy(),
        "rank_in_cluster": table.column("rank_in_cluster").to_numpy(),
    }
    info = table.column("extra_info").combine_chunks() if "extra_info" in names else None
    info_fields = {info.type.field(i).name for i in range(info.type.num_fields)} if info is not None else set()
    if "sample_id" in names:
        out["sample_id"] = table.column("sample_id").to_numpy()
    elif "sample_id" in info_fields:
        out["sample_id"] = info.field("sample_id").to_numpy(zero_copy_only=False)
    else:
        raise ValueError("training set has no sample_id (top-level or extra_info.sample_id)")
    if "index" in info_fields:
        out["index"] = info.field("index").to_numpy(zero_copy_only=False)
    if "sample_id" in names and "sample_id" in info_fields:
        inner = info.field("sample_id").to_numpy(zero_copy_only=False)
        if not np.array_equal(inner, out["sample_id"]):
            raise ValueError("sample_id and extra_info.sample_id differ; the batch can't be mapped to rows")
    return out


def loaded_copy(sampler: Sampler, state: Any, field: str) -> Sampler:
    """A copy of SAMPLER with STATE loaded (the sampler's own all-or-nothing check); SAMPLER is unchanged.
    Errors name the state's full path: ``field`` + the sampler's own (``state['sampler']['steps']``)."""
    fresh = copy.deepcopy(sampler)
    try:
        fresh.load_state_dict(state)  # type: ignore[arg-type]
    except SamplerStateError as exc:
        inner = exc.field.removeprefix("state")  # "state['steps']" -> "['steps']"; "state" -> ""
        raise SamplerStateError(field + inner, exc.problem) from None
    return fresh


def _unique_map(values: Any, n: int, what: str, required: bool = True) -> dict[int, int] | None:
    if values is None:
        if required:
            raise ValueError(f"{what} is required")
        return None
    arr = np.asarray(values)
    if len(arr) != n:
        raise ValueError(f"{len(arr)} {what} values for {n} rows")
    if arr.dtype == object and any(v is None for v in arr):
        if required:
            raise ValueError(f"{what} has null values")
        return None
    arr = arr.astype(np.int64)
    uniq, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        if required:
            raise ValueError(f"{what} is not unique (e.g. {int(uniq[counts > 1][0])} repeats)")
        return None  # a non-unique optional id is simply not used
    return dict(zip(arr.tolist(), range(n), strict=True))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else None
