"""The ADS sampler: a framework-agnostic, exactly resumable re-implementation of the reference scheduler.

Two levels decide what the policy trains on at each step:

* inter-cluster: each cluster k keeps a success rate r_k (mean success of its rows in the last update that
  touched it) and clusters are drawn from p, an EMA of ``weights(r) / sum(weights(r))``;
* intra-cluster: each cluster has a window of B difficulty-sorted positions that keeps, slides easier or
  slides harder depending on whether a row's success is inside, below or above [0.5 - eps, 0.5 + eps].

Only numpy is imported: trainers (verl, TRL, a simulator) drive it through ``next_batch`` / ``update``.
The fixes relative to the reference are listed in ``docs/sampler.md``.
"""

from __future__ import annotations

import hashlib
import math
import reprlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, NoReturn, Protocol, Self, get_args, runtime_checkable

import numpy as np

Weighting = Literal["success", "learnability", "inverse"]
WEIGHTINGS: tuple[str, ...] = get_args(Weighting)
STATE_VERSION = 1
INT64_MAX = 2**63 - 1  # bound of every counter in a saved state
SAMPLER_COLUMNS = ("cluster_id", "rank_in_cluster")


@runtime_checkable
class Sampler(Protocol):
    """What every sampler here offers, so trainers and the simulator can swap them."""

    batch_size: int

    def next_batch(self) -> np.ndarray: ...

    def update(self, idx: Any, success: Any) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def metrics(self) -> dict[str, float]: ...


@dataclass(frozen=True)
class ADSSamplerConfig:
    """Sampler knobs; the defaults are the reference's (``data.ads_sampler.*``)."""

    active_clusters: int = 4  # clusters drawn per step
    mini_cluster_size: int = 32  # B, rows emitted per drawn cluster
    boundary_eps: float = 0.17  # keep band [0.5 - eps, 0.5 + eps]
    alpha: float = 0.3  # EMA weight of the new target distribution
    r_init: float = 0.5  # success rate of every cluster at start and after a reset
    seed: int = 42  # numpy default_rng (PCG64) seed
    reset_every: int | None = None  # None: max(1, |D| // batch_size) steps; <= 0: never reset
    prob_floor: float = 0.0  # draw from (1 - K*floor) * p + floor; 0 = reference (clusters may starve)
    inter_cluster_weighting: Weighting = "success"  # success: r, learnability: r(1-r), inverse: 1-r

    def __post_init__(self) -> None:
        _check(_is_int(self.active_clusters) and self.active_clusters >= 1, "active_clusters must be >= 1")
        _check(_is_int(self.mini_cluster_size) and self.mini_cluster_size >= 1, "mini_cluster_size must be >= 1")
        _check(0.0 <= self.boundary_eps <= 0.5, "boundary_eps must be in [0, 0.5]")
        _check(0.0 <= self.alpha <= 1.0, "alpha must be in [0, 1]")
        _check(0.0 <= self.r_init <= 1.0, "r_init must be in [0, 1]")
        _check(_is_int(self.seed) and self.seed >= 0, "seed must be a non-negative int")
        _check(self.reset_every is None or _is_int(self.reset_every), "reset_every must be an int or None")
        _check(0.0 <= self.prob_floor <= 1.0, "prob_floor must be in [0, 1]")
        _check(
            self.inter_cluster_weighting in WEIGHTINGS,
            f"inter_cluster_weighting must be one of {WEIGHTINGS}, got {self.inter_cluster_weighting!r}",
        )

    @property
    def batch_size(self) -> int:
        return self.active_clusters * self.mini_cluster_size


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
        _check(cfg.prob_floor * k <= 1.0, f"prob_floor={cfg.prob_floor} is above 1/K (K={k} clusters)")
        # Rows sorted by (cluster, rank); lexsort is stable, so equal ranks keep row order (deterministic).
        self._order = np.lexsort((rank, cluster_of)).astype(np.int64)
        self.sizes = np.bincount(cluster_of, minlength=k).astype(np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self._cluster_of = cluster_of.astype(np.int64)
        self._pos_of = np.empty(n, dtype=np.int64)
        self._pos_of[self._order] = np.arange(n, dtype=np.int64) - self._starts[self._cluster_of[self._order]]
        b = cfg.mini_cluster_size
        self._wsize = np.minimum(self.sizes, b)  # a window never holds more rows than its cluster
        self._cols = np.arange(b, dtype=np.int64)
        # Column j of a cluster's batch slot reads window entry j % wsize: small clusters cycle their rows.
        self._cycle = self._cols[None, :] % self._wsize[:, None]
        self._lo = 0.5 - cfg.boundary_eps
        self._hi = 0.5 + cfg.boundary_eps
        if cfg.reset_every is None:
            self.reset_every = max(1, n // self.batch_size)
        else:
            self.reset_every = cfg.reset_every if cfg.reset_every > 0 else 0
        self._rng = np.random.default_rng(cfg.seed)
        self._fingerprint: str | None = None
        self.steps = 0
        self.steps_in_epoch = 0
        self._counts = np.zeros(3, dtype=np.int64)  # easier, keep, harder in the last update
        self._reset_schedule()

    # -- schedule -----------------------------------------------------------------------------------

    def _reset_schedule(self) -> None:
        """Reference init and periodic reset: r = r_init, uniform p, windows on the B easiest rows."""
        k = self.n_clusters
        self.r = np.full(k, self.cfg.r_init, dtype=np.float64)
        self.p = np.full(k, 1.0 / k, dtype=np.float64)
        self._win = np.broadcast_to(self._cols, (k, self.cfg.mini_cluster_size)).copy()

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
        positions = self._win[chosen[:, None], self._cycle[chosen]]
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
            self._update_success(idx, success)
            self._update_windows(idx, success)
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

    def _update_windows(self, idx: np.ndarray, success: np.ndarray) -> None:
        rows, inverse = np.unique(idx, return_inverse=True)
        rho = np.bincount(inverse, weights=success) / np.bincount(inverse)
        ks, pos = self._cluster_of[rows], self._pos_of[rows]
        valid = self._cols[None, :] < self._wsize[ks][:, None]
        inside = ((self._win[ks] == pos[:, None]) & valid).any(axis=1)
        ks, pos, rho = ks[inside], pos[inside], rho[inside]
        direction = np.where(rho < self._lo, -1, np.where(rho > self._hi, 1, 0))
        self._counts[:] = np.bincount(direction + 1, minlength=3)
        movable = (direction != 0) & (self._wsize[ks] < self.sizes[ks])  # a full-cluster window stays
        if not movable.any():
            return
        # The reference rule is sequential (each mover sees the slots earlier movers took), so this loops
        # over the movers of this step only: at most active_clusters * B of them, never over |D|.
        moves: dict[int, tuple[list[int], list[int]]] = {}
        for k, q, d in zip(ks[movable].tolist(), pos[movable].tolist(), direction[movable].tolist(), strict=True):
            moves.setdefault(k, ([], []))[d > 0].append(q)
        for k, (easier, harder) in moves.items():
            m = int(self._wsize[k])
            self._win[k, :m] = shift_window(self._win[k, :m].tolist(), easier, harder, int(self.sizes[k]))

    def _update_distribution(self) -> None:
        r = self.r
        weighting = self.cfg.inter_cluster_weighting
        w = r if weighting == "success" else r * (1.0 - r) if weighting == "learnability" else 1.0 - r
        total = w.sum()
        k = self.n_clusters
        target = w / total if np.isfinite(total) and total > 0 else np.full(k, 1.0 / k)
        p = (1.0 - self.cfg.alpha) * self.p + self.cfg.alpha * target
        self.p = p / p.sum()

    # -- introspection --------------------------------------------------------------------------------

    def window(self, cluster_id: int) -> np.ndarray:
        """Sorted window positions (0 = easiest) of a cluster, by its original id."""
        k = self._index_of(cluster_id)
        return self._win[k, : self._wsize[k]].copy()

    def window_rows(self, cluster_id: int) -> np.ndarray:
        """Row positions currently inside a cluster's window."""
        k = self._index_of(cluster_id)
        return self._order[self._starts[k] + self._win[k, : self._wsize[k]]]

    def cluster_of_rows(self, idx: Any) -> np.ndarray:
        """Original cluster id of each row position."""
        return self.cluster_ids[self._cluster_of[np.asarray(idx, dtype=np.int64)]]

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
        denom = np.maximum(self.sizes - 1, 1)
        wsum = np.where(self._cols[None, :] < self._wsize[:, None], self._win, 0).sum(axis=1)
        frac = (wsum / self._wsize) / denom
        lo = self._win[:, 0]
        hi = self._win[np.arange(self.n_clusters), self._wsize - 1]
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
        return {
            "kind": "ADSSampler",
            "version": STATE_VERSION,
            "config": asdict(self.cfg),
            "n_rows": self.n_rows,
            "fingerprint": self.fingerprint,
            "steps": self.steps,
            "steps_in_epoch": self.steps_in_epoch,
            "r": self.r.tolist(),
            "p": self.p.tolist(),
            "windows": [self._win[k, : self._wsize[k]].tolist() for k in range(self.n_clusters)],
            "last_counts": self._counts.tolist(),
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; refuses state from another artifact or config (the seed may differ).

        Every field is checked before anything is assigned, so a refused state (a ``SamplerStateError``,
        a ``ValueError`` naming the field) leaves this sampler exactly as it was.
        """
        s = _state_header(state, "ADSSampler", _ADS_KEYS, self.n_rows, STATE_VERSION)
        fp = s["fingerprint"]
        if not (isinstance(fp, str) and fp == self.fingerprint):
            raise SamplerStateError(
                "state['fingerprint']", "state was saved for another artifact (clustering or row order differ)"
            )
        _state_config(s["config"], self.cfg, ignore_seed=True)
        steps = _state_int(s["steps"], "state['steps']")
        # steps_in_epoch counts from the last reset, which happens as soon as it reaches reset_every
        in_epoch_max = min(steps, self.reset_every - 1) if self.reset_every else steps
        steps_in_epoch = _state_int(s["steps_in_epoch"], "state['steps_in_epoch']", 0, in_epoch_max)
        k, b = self.n_clusters, self.cfg.mini_cluster_size
        r = _state_reals(s["r"], "state['r']", k, "success rates, one per cluster")
        p = _state_reals(s["p"], "state['p']", k, "probabilities, one per cluster")
        if abs(math.fsum(p.tolist()) - 1.0) > 1e-6:
            raise SamplerStateError("state['p']", f"expected a distribution summing to 1, got sum {float(p.sum())!r}")
        windows = _state_list(s["windows"], "state['windows']", k, "windows, one per cluster")
        win = np.broadcast_to(self._cols, (k, b)).copy()
        for i, w in enumerate(windows):
            field, m, size = f"state['windows'][{i}]", int(self._wsize[i]), int(self.sizes[i])
            what = f"positions (cluster {self.cluster_ids[i]} has {size} rows, its window min({b}, {size}))"
            positions = _state_list(w, field, m, what)
            prev = -1
            for j, v in enumerate(positions):  # strictly ascending inside [0, size): bounds that leave room
                prev = win[i, j] = _state_int(v, f"{field}[{j}]", prev + 1, size - m + j, " (ascending positions)")
        total = int(self._wsize.sum())  # a row is classified at most once per update, and only inside a window
        counts = _state_list(s["last_counts"], "state['last_counts']", 3, "counts (easier, keep, harder)")
        counts = [_state_int(v, f"state['last_counts'][{i}]", 0, total) for i, v in enumerate(counts)]
        if sum(counts) > total:
            raise SamplerStateError(
                "state['last_counts']",
                f"expected counts summing to at most {total} (rows in all windows), got {sum(counts)}",
            )
        rng = _state_rng(s["rng"], "state['rng']")
        # all checked: nothing below can fail
        self.r, self.p, self._win, self._rng = r, p, win, rng
        self.steps, self.steps_in_epoch = steps, steps_in_epoch
        self._counts = np.array(counts, dtype=np.int64)


_ADS_KEYS = (
    "kind", "version", "config", "n_rows", "fingerprint", "steps", "steps_in_epoch",
    "r", "p", "windows", "last_counts", "rng",
)  # fmt: skip


def shift_window(window: list[int], easier: list[int], harder: list[int], size: int) -> list[int]:
    """The reference's window move: stayers keep their slot, then easier movers (ascending) and harder
    movers (descending) each take the free slot nearest to one step in their direction.

    ``window`` holds the current positions, ``easier`` / ``harder`` the subsets classified too hard / too
    easy, and ``size`` the cluster size. Returns the new sorted positions (same count, all distinct).
    """
    if size <= len(window):
        return sorted(window)
    occupied = set(window).difference(easier, harder)
    last = size - 1
    for pos in sorted(easier):
        want = pos - 1 if pos > 0 else 0
        occupied.add(want if want not in occupied else _nearest_free(want, -1, occupied, size, pos))
    for pos in sorted(harder, reverse=True):
        want = pos + 1 if pos < last else last
        occupied.add(want if want not in occupied else _nearest_free(want, 1, occupied, size, pos))
    return sorted(occupied)


def _nearest_free(desired: int, direction: int, occupied: set[int], size: int, fallback: int) -> int:
    """Clamp, then search outwards, trying the move's direction first at each radius."""
    desired = min(max(desired, 0), size - 1)
    if desired not in occupied:
        return desired
    for radius in range(1, size):
        for cand in (desired + direction * radius, desired - direction * radius):
            if 0 <= cand < size and cand not in occupied:
                return cand
    return fallback  # unreachable while the window is smaller than the cluster


def as_sampler_columns(cluster_ids: Any, rank_in_cluster: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate the two aligned columns: 1-D, same length, non-empty, integer cluster ids, finite ranks."""
    cid = np.asarray(cluster_ids)
    rank = np.asarray(rank_in_cluster)
    _check(cid.ndim == 1 and rank.ndim == 1, "cluster_ids and rank_in_cluster must be 1-D")
    _check(len(cid) == len(rank), f"length mismatch: {len(cid)} cluster ids vs {len(rank)} ranks")
    _check(len(cid) > 0, "the artifact has no rows")
    _check(np.issubdtype(cid.dtype, np.integer), f"cluster_ids must be integers, got {cid.dtype}")
    _check(
        np.issubdtype(rank.dtype, np.number) and not np.issubdtype(rank.dtype, np.complexfloating),
        f"rank_in_cluster must be numeric, got {rank.dtype}",
    )
    _check(bool(np.all(np.isfinite(rank))), "rank_in_cluster has NaN or inf values")
    return cid.astype(np.int64, copy=False), rank


def check_update_args(idx: Any, success: Any, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate an ``update`` call and return (int64 rows, float64 successes)."""
    idx = np.asarray(idx)
    success = np.asarray(success)
    _check(idx.ndim == 1 and success.ndim == 1, "idx and success must be 1-D")
    _check(len(idx) == len(success), f"length mismatch: {len(idx)} rows vs {len(success)} success values")
    if len(idx) == 0:
        return idx.astype(np.int64), success.astype(np.float64)
    _check(np.issubdtype(idx.dtype, np.integer), f"idx must hold integer row positions, got {idx.dtype}")
    _check(
        np.issubdtype(success.dtype, np.number) or success.dtype == np.bool_,
        f"success must be numeric, got {success.dtype}",
    )
    idx = idx.astype(np.int64, copy=False)
    success = success.astype(np.float64, copy=False)
    bad = (idx < 0) | (idx >= n_rows)
    _check(not bad.any(), f"row positions out of range [0, {n_rows}): {idx[bad][:5].tolist()}")
    bad = ~((success >= 0.0) & (success <= 1.0))  # also catches NaN
    _check(not bad.any(), f"success values must be in [0, 1]; got {success[bad][:5].tolist()}")
    return idx, success


def read_sampler_columns(uri: str, columns: tuple[str, str] = SAMPLER_COLUMNS) -> tuple[np.ndarray, np.ndarray]:
    """Read the cluster and rank columns of a parquet artifact from a local path or any fsspec URI."""
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(uri, "rb") as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        missing = [c for c in columns if c not in names]
        _check(not missing, f"{uri}: missing sampler columns {missing}; found {names}")
        table = pf.read(columns=list(columns))
    out = []
    for name in columns:
        col = table.column(name)
        _check(col.null_count == 0, f"{uri}: column {name!r} has {col.null_count} null values")
        out.append(col.to_numpy())
    return out[0], out[1]


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


# -- saved-state checks (shared with the baselines) ---------------------------------------------------


class SamplerStateError(ValueError):
    """A saved state that can't be loaded; ``field`` is the offending entry, e.g. ``state['windows'][3][1]``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)  # both in args, so the error pickles (Prefect ships exceptions)
        self.field, self.problem = field, problem

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


def _show(value: Any) -> str:
    """A short repr for messages: a huge int's repr can be megabytes long, or raise."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    try:
        return reprlib.repr(value)
    except ValueError:  # a huge int nested somewhere (int-to-str digit limit)
        return f"a {type(value).__name__}"


def _key(field: str, key: Any) -> str:
    return f"{field}[{_show(key)}]"


def _fail(field: str, expected: str, value: Any) -> NoReturn:
    raise SamplerStateError(field, f"expected {expected}, got {_show(value)}")


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def _state_int(value: Any, field: str, lo: int = 0, hi: int | None = INT64_MAX, note: str = "") -> int:
    """An int (not a bool, float or string) in [lo, hi]."""
    if not (_is_int(value) and lo <= value and (hi is None or value <= hi)):
        _fail(field, (f"an int in [{lo}, {hi}]" if hi is not None else f"an int >= {lo}") + note, value)
    return int(value)


def _state_list(value: Any, field: str, length: int, what: str, at_most: bool = False) -> list[Any]:
    """A list (or tuple, or 1-D array) of exactly ``length`` entries, or at most that many."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    expected = f"{'at most ' if at_most else ''}{length} {what}"
    if not isinstance(value, list | tuple):
        _fail(field, f"a list of {expected}", value)
    if len(value) > length or (len(value) < length and not at_most):
        raise SamplerStateError(field, f"expected {expected}, got {len(value)}")
    return list(value)


def _state_reals(value: Any, field: str, length: int, what: str, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """``length`` finite numbers in [lo, hi] (NaN fails every comparison; bools and strings are refused)."""
    values = _state_list(value, field, length, what)
    for i, v in enumerate(values):
        if not (_is_real(v) and lo <= v <= hi):
            _fail(f"{field}[{i}]", f"a finite number in [{lo:g}, {hi:g}]", v)
    return np.array([float(v) for v in values], dtype=np.float64)


def _state_mapping(value: Any, field: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """A dict with exactly ``keys``: a missing or unexpected key is named."""
    if not isinstance(value, Mapping):
        _fail(field, "a dict", value)
    for key in keys:
        if key not in value:
            raise SamplerStateError(_key(field, key), "missing")
    for key in value:
        if key not in keys:
            raise SamplerStateError(_key(field, key), f"unexpected key (expected only {list(keys)})")
    return value


def _state_header(state: Any, kind: str, keys: tuple[str, ...], n_rows: int, version: int) -> Mapping[str, Any]:
    """Kind first (the clearest message for a state of another sampler), then the key set, version and rows."""
    if not isinstance(state, Mapping):
        _fail("state", f"a dict (a saved {kind} state)", state)
    if "kind" in state and not (isinstance(state["kind"], str) and state["kind"] == kind):
        _fail("state['kind']", repr(kind), state["kind"])
    _state_mapping(state, "state", keys)
    if not (_is_int(state["version"]) and state["version"] == version):
        _fail("state['version']", f"state version {version}", state["version"])
    if not (_is_int(state["n_rows"]) and state["n_rows"] == n_rows):
        raise SamplerStateError(
            "state['n_rows']",
            f"state was saved for another artifact: expected {n_rows} rows, got {_show(state['n_rows'])}",
        )
    return state


def _same_kind(got: Any, want: Any) -> bool:
    if want is None:
        return got is None
    if isinstance(want, str):
        return isinstance(got, str)
    if _is_int(want):
        return _is_int(got)
    return _is_real(got) if isinstance(want, float) else type(got) is type(want)


def _state_config(value: Any, cfg: Any, field: str = "state['config']", ignore_seed: bool = False) -> None:
    """Every config field equal to ``cfg``'s (same kind of value too: True is not 1); the seed may be free."""
    mine = asdict(cfg)
    saved = _state_mapping(value, field, tuple(mine))
    for key, want in mine.items():
        got, where = saved[key], _key(field, key)
        if key == "seed" and ignore_seed:  # superseded by the saved generator state
            _state_int(got, where, 0, None)
        elif not (_same_kind(got, want) and got == want):
            raise SamplerStateError(
                where, f"state was saved with a different config: expected {want!r}, got {_show(got)}"
            )


def _state_rng(value: Any, field: str) -> np.random.Generator:
    """A generator from a saved numpy PCG64 state, checked first: numpy's setter raises TypeError or
    OverflowError halfway through, accepts some bad values (has_uint32=5) and never says which field."""
    if isinstance(value, Mapping) and "bit_generator" in value:  # another generator: say so, not "missing key"
        name = value["bit_generator"]
        if not (isinstance(name, str) and name == "PCG64"):
            _fail(_key(field, "bit_generator"), "'PCG64' (numpy's default_rng)", name)
    saved = _state_mapping(value, field, ("bit_generator", "state", "has_uint32", "uinteger"))
    inner_field = _key(field, "state")
    inner = _state_mapping(saved["state"], inner_field, ("state", "inc"))
    state = _state_int(inner["state"], _key(inner_field, "state"), 0, 2**128 - 1)
    inc = _state_int(inner["inc"], _key(inner_field, "inc"), 0, 2**128 - 1)
    if inc % 2 == 0:
        _fail(_key(inner_field, "inc"), "an odd int (PCG64's increment is always odd)", inc)
    has_uint32 = _state_int(saved["has_uint32"], _key(field, "has_uint32"), 0, 1)
    uinteger = _state_int(saved["uinteger"], _key(field, "uinteger"), 0, 2**32 - 1)
    bit_generator = np.random.PCG64(0)
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }
    return np.random.Generator(bit_generator)
