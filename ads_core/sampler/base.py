"""What every sampler here shares: the protocol trainers drive, input checks, the parquet constructor.

Only numpy (and pyarrow/fsspec to read an artifact's two sampler columns) is imported, so trainers (verl,
TRL, the simulator) can use any sampler without pulling in the rest of the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np

SAMPLER_COLUMNS = ("cluster_id", "rank_in_cluster")
# What a trainer provides for the need `reference_rollouts` (ads_core.sampler.kinds.REFERENCE_ROLLOUTS): (rows,
# seed) -> each row's mean success over a group of completions by the *current* policy, in [0, 1]; not trained on.
# The sampler gets it at construction and calls it from `next_batch`; the same seed must give the same rollouts.
ReferenceRollout = Callable[[np.ndarray, int], np.ndarray]


@runtime_checkable
class Sampler(Protocol):
    """What every sampler here offers, so trainers and the simulator can swap them."""

    batch_size: int

    def next_batch(self) -> np.ndarray: ...

    def update(self, idx: Any, success: Any) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def metrics(self) -> dict[str, float]: ...


@runtime_checkable
class GroupFilter(Protocol):
    """A sampler whose trainer rolls out, drops groups and draws again before each optimizer step (DAPO's
    dynamic sampling). Each generation batch is ``next_batch`` then ``update``; ``keep`` says which of its
    groups the step may train on. ``ads_core.sampler.dynamic.fill_step`` is that loop for any trainer."""

    batch_size: int
    max_draws: int

    def keep(self, success: np.ndarray) -> np.ndarray: ...


class BaseSampler:
    """Shared input checks and the parquet constructor of every sampler here."""

    batch_size: int
    n_rows: int

    @classmethod
    def from_parquet(cls, uri: str, cfg: Any = None, **kwargs: Any) -> Self:
        """Build from an artifact's ``cluster_id`` / ``rank_in_cluster`` columns (local path or fsspec URI)."""
        cluster_ids, ranks = read_sampler_columns(uri)
        return cls(cluster_ids, ranks, cfg, **kwargs)

    def _checked_update(self, idx: Any, success: Any) -> tuple[np.ndarray, np.ndarray]:
        return check_update_args(idx, success, self.n_rows)


def as_sampler_columns(cluster_ids: Any, rank_in_cluster: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate the two aligned columns: 1-D, same length, non-empty, integer cluster ids, finite ranks."""
    cid = np.asarray(cluster_ids)
    rank = np.asarray(rank_in_cluster)
    check(cid.ndim == 1 and rank.ndim == 1, "cluster_ids and rank_in_cluster must be 1-D")
    check(len(cid) == len(rank), f"length mismatch: {len(cid)} cluster ids vs {len(rank)} ranks")
    check(len(cid) > 0, "the artifact has no rows")
    check(np.issubdtype(cid.dtype, np.integer), f"cluster_ids must be integers, got {cid.dtype}")
    check(
        np.issubdtype(rank.dtype, np.number) and not np.issubdtype(rank.dtype, np.complexfloating),
        f"rank_in_cluster must be numeric, got {rank.dtype}",
    )
    check(bool(np.all(np.isfinite(rank))), "rank_in_cluster has NaN or inf values")
    return cid.astype(np.int64, copy=False), rank


def check_update_args(idx: Any, success: Any, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate an ``update`` call and return (int64 rows, float64 successes)."""
    idx = np.asarray(idx)
    success = np.asarray(success)
    check(idx.ndim == 1 and success.ndim == 1, "idx and success must be 1-D")
    check(len(idx) == len(success), f"length mismatch: {len(idx)} rows vs {len(success)} success values")
    if len(idx) == 0:
        return idx.astype(np.int64), success.astype(np.float64)
    check(np.issubdtype(idx.dtype, np.integer), f"idx must hold integer row positions, got {idx.dtype}")
    check(
        np.issubdtype(success.dtype, np.number) or success.dtype == np.bool_,
        f"success must be numeric, got {success.dtype}",
    )
    idx = idx.astype(np.int64, copy=False)
    success = success.astype(np.float64, copy=False)
    bad = (idx < 0) | (idx >= n_rows)
    check(not bad.any(), f"row positions out of range [0, {n_rows}): {idx[bad][:5].tolist()}")
    bad = ~((success >= 0.0) & (success <= 1.0))  # also catches NaN
    check(not bad.any(), f"success values must be in [0, 1]; got {success[bad][:5].tolist()}")
    return idx, success


class SamplerBatchError(ValueError):
    """A sampler's ``next_batch`` returned something other than the step's row positions: the run stops there,
    before any row of the batch is rolled out or trained and before any checkpoint."""


def checked_batch(batch: Any, n_rows: int, batch_size: int, sampler: str, step: int) -> list[int]:
    """BATCH, what SAMPLER (its kind or class path) returned from ``next_batch`` for STEP, as the step's row
    positions; anything else raises SamplerBatchError naming the sampler, the step and the offending value.

    Every index must be an integer (Python or NumPy; not a bool, float or str) in [0, n_rows), and there must be
    exactly BATCH_SIZE of them: unchecked, a float is truncated to another row (261.7 trains row 261), -1 rolls
    out the last row, an extra row is silently dropped and an index past the end fails deep inside the dataset
    after a minute of generation. Both trainers call this where they take the batch (TRL: the prompt feed; verl:
    its train sampler)."""
    where = f"sampler {sampler!r} at step {step}"
    if isinstance(batch, list | tuple):
        values = list(batch)
    else:
        array = np.asarray(batch)  # an ndarray, a tensor, a range
        if array.ndim != 1:
            raise SamplerBatchError(f"{where} returned {_shown(batch)}, not a 1-D sequence of row positions")
        values = array.tolist()  # NumPy integers become ints, floats floats, strings str
    if len(values) != batch_size:
        raise SamplerBatchError(f"{where} returned {len(values)} row positions; the step takes exactly {batch_size}")
    for i, value in enumerate(values):
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise SamplerBatchError(
                f"{where} returned {_shown(value)} ({type(value).__name__}) at position {i}; row positions are "
                f"integers in [0, {n_rows})"
            )
        if not 0 <= value < n_rows:
            raise SamplerBatchError(
                f"{where} returned row {int(value)} at position {i}, outside the training set's rows [0, {n_rows})"
            )
    return [int(v) for v in values]


def _shown(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def read_sampler_columns(uri: str, columns: tuple[str, str] = SAMPLER_COLUMNS) -> tuple[np.ndarray, np.ndarray]:
    """Read the cluster and rank columns of a parquet artifact from a local path or any fsspec URI."""
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(uri, "rb") as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        missing = [c for c in columns if c not in names]
        check(not missing, f"{uri}: missing sampler columns {missing}; found {names}")
        table = pf.read(columns=list(columns))
    out = []
    for name in columns:
        col = table.column(name)
        check(col.null_count == 0, f"{uri}: column {name!r} has {col.null_count} null values")
        out.append(col.to_numpy())
    return out[0], out[1]


def check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)
