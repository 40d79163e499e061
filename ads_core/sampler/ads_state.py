"""The ADS sampler's saved state, defined once: the keys `state_dict` writes are the keys the check reads.

A checkpoint is untrusted input: `check_ads_state` validates every field against the sampler it is loaded
into (artifact fingerprint, config but the seed, cluster sizes) and returns it parsed, assigning nothing.
Only numpy is imported.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.state import (
    SamplerStateError,
    state_config,
    state_header,
    state_int,
    state_list,
    state_reals,
    state_rng,
)

ADS_STATE_VERSION = 1


class ADSState(NamedTuple):
    """A checked ADS state, ready to assign: the arrays are fresh copies owned by the caller."""

    steps: int
    steps_in_epoch: int
    r: np.ndarray  # (K,) float64
    p: np.ndarray  # (K,) float64, sums to 1
    windows: np.ndarray  # (K, B) int64; row k's first min(B, size_k) entries are its window
    last_counts: np.ndarray  # (3,) int64: easier, keep, harder
    rng: np.random.Generator


HEADER_KEYS = ("kind", "version", "config", "n_rows", "fingerprint")
ADS_STATE_KEYS = HEADER_KEYS + ADSState._fields


class ADSShape(Protocol):
    """What the check needs of the sampler a state is loaded into."""

    n_rows: int
    cfg: ADSSamplerConfig
    reset_every: int
    sizes: np.ndarray
    cluster_ids: np.ndarray

    @property
    def fingerprint(self) -> str: ...


def ads_state_dict(sampler: ADSShape, state: ADSState) -> dict[str, Any]:
    """Plain JSON-able state (lists, floats, ints, str): the header, then every `ADSState` field."""
    b = sampler.cfg.mini_cluster_size
    sizes = np.minimum(sampler.sizes, b)
    values = {
        "steps": int(state.steps),
        "steps_in_epoch": int(state.steps_in_epoch),
        "r": state.r.tolist(),
        "p": state.p.tolist(),
        "windows": [state.windows[k, : sizes[k]].tolist() for k in range(len(sizes))],
        "last_counts": state.last_counts.tolist(),
        "rng": state.rng.bit_generator.state,
    }
    header = {
        "kind": "ADSSampler",
        "version": ADS_STATE_VERSION,
        "config": sampler.cfg.model_dump(),
        "n_rows": sampler.n_rows,
        "fingerprint": sampler.fingerprint,
    }
    return {**header, **{key: values[key] for key in ADSState._fields}}


def check_ads_state(state: Any, sampler: ADSShape) -> ADSState:
    """Validate a saved ``ADSSampler`` state against the sampler it is loaded into (artifact, config but the
    seed, clusters) and return it parsed; raises ``SamplerStateError`` on the first bad field."""
    n_rows, cfg, reset_every, sizes = sampler.n_rows, sampler.cfg, sampler.reset_every, sampler.sizes
    s = state_header(state, "ADSSampler", ADS_STATE_KEYS, n_rows, ADS_STATE_VERSION)
    fp = s["fingerprint"]
    if not (isinstance(fp, str) and fp == sampler.fingerprint):
        raise SamplerStateError(
            "state['fingerprint']", "state was saved for another artifact (clustering or row order differ)"
        )
    state_config(s["config"], cfg, ignore_seed=True)
    steps = state_int(s["steps"], "state['steps']")
    # steps_in_epoch counts from the last reset, which happens as soon as it reaches reset_every
    in_epoch_max = min(steps, reset_every - 1) if reset_every else steps
    steps_in_epoch = state_int(s["steps_in_epoch"], "state['steps_in_epoch']", 0, in_epoch_max)
    k, b = len(sizes), cfg.mini_cluster_size
    r = state_reals(s["r"], "state['r']", k, "success rates, one per cluster")
    p = state_reals(s["p"], "state['p']", k, "probabilities, one per cluster")
    if abs(math.fsum(p.tolist()) - 1.0) > 1e-6:
        raise SamplerStateError("state['p']", f"expected a distribution summing to 1, got sum {float(p.sum())!r}")
    windows = state_list(s["windows"], "state['windows']", k, "windows, one per cluster")
    win = np.broadcast_to(np.arange(b, dtype=np.int64), (k, b)).copy()
    total = 0  # rows in all windows
    for i, w in enumerate(windows):
        size = int(sizes[i])
        field, m = f"state['windows'][{i}]", min(b, size)
        what = f"positions (cluster {sampler.cluster_ids[i]} has {size} rows, its window min({b}, {size}))"
        positions = state_list(w, field, m, what)
        prev = -1
        for j, v in enumerate(positions):  # strictly ascending inside [0, size): bounds that leave room
            prev = win[i, j] = state_int(v, f"{field}[{j}]", prev + 1, size - m + j, " (ascending positions)")
        total += m
    # a row is classified at most once per update, and only inside a window
    counts = state_list(s["last_counts"], "state['last_counts']", 3, "counts (easier, keep, harder)")
    counts = [state_int(v, f"state['last_counts'][{i}]", 0, total) for i, v in enumerate(counts)]
    if sum(counts) > total:
        raise SamplerStateError(
            "state['last_counts']",
            f"expected counts summing to at most {total} (rows in all windows), got {sum(counts)}",
        )
    rng = state_rng(s["rng"], "state['rng']")
    return ADSState(steps, steps_in_epoch, r, p, win, np.array(counts, dtype=np.int64), rng)
