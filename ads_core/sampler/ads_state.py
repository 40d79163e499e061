"""The ADS sampler's saved state, defined once: the keys `state_dict` writes are the keys the check reads.

A checkpoint is untrusted input: `check_ads_state` validates every field against the sampler it is loaded
into (artifact fingerprint, config but the seed, window, cluster sizes) and returns it parsed, assigning
nothing. Version 2 names the window (`reference` saves the B window positions of each cluster, `frontier`
each band centre); a version-1 state (before the frontier window) has no `window` and loads as a
reference-window state with the new knobs at their defaults. Version 3 adds pre-rollout skipping: its knobs in
the config and, when ``skip`` is on, each row's zero-variance streak (sparse) and the skip counters; a version-2
state (before skipping) loads as one with the skipping knobs at their defaults (off). Only numpy is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np

from ads_core.config.sampler import DEFAULT_WEIGHTING, ADSSamplerConfig
from ads_core.sampler.skip import STREAK_CAP
from ads_core.sampler.state import (
    SamplerStateError,
    refuse,
    state_config,
    state_header,
    state_int,
    state_list,
    state_reals,
    state_rng,
)
from ads_core.sampler.window import frontier_bands

ADS_STATE_VERSION = 3
NO_SKIP_VERSION = 2  # before skipping: no skip knobs in the config, no skip fields
LEGACY_VERSION = 1  # before the frontier window: no "window" key, config without the new knobs


class ADSState(NamedTuple):
    """A checked ADS state, ready to assign: the arrays are fresh copies owned by the caller."""

    steps: int
    steps_in_epoch: int
    r: np.ndarray  # (K,) float64
    p: np.ndarray  # (K,) float64, sums to 1
    windows: np.ndarray  # (K, B) int64, reference window; row k's first min(B, size_k) entries are its window
    centers: np.ndarray  # (K,) float64 in [0, 1], frontier window: band centre (0 = easiest)
    uses: np.ndarray  # (|D|,) int64, frontier window: trainings of each row, in (cluster, rank) order
    last_counts: np.ndarray  # (3,) int64: easier, keep, harder
    rng: np.random.Generator
    streaks: np.ndarray  # (|D|,) int16, skipping: zero-variance streak of each row (+ solved, - failed), sorted order
    skipped: np.ndarray  # (3,) int64, skipping: rows skipped in the last draw (solved, failed), and in all draws


HEADER_KEYS = ("kind", "version", "config", "n_rows", "fingerprint")
# What each window saves (the other window's field is not written); the order is the saved order.
WINDOW_FIELDS = {
    "reference": ("steps", "steps_in_epoch", "r", "p", "windows", "last_counts", "rng"),
    "frontier": ("steps", "steps_in_epoch", "r", "p", "centers", "used_rows", "use_counts", "last_counts", "rng"),
}
LEGACY_KEYS = HEADER_KEYS + WINDOW_FIELDS["reference"]
# saved when skip is on, after the window's fields: rows with a solved / failed streak, the streak's length
SKIP_FIELDS = ("solved_rows", "solved_streaks", "failed_rows", "failed_streaks", "skipped")
# Config fields added with the frontier window: a legacy state had them at these (the defaults).
_NEW_FIELDS = ("window", "frontier_target", "frontier_gain", "frontier_band", "frontier_weight_floor")
# Config fields added with skipping: a version-1 or -2 state had them at these (the defaults: off).
_SKIP_KNOBS = ("skip", "skip_solved_rate", "skip_failed_rate", "skip_max")


def ads_state_keys(window: str, skip: bool = False) -> tuple[str, ...]:
    return HEADER_KEYS + ("window",) + WINDOW_FIELDS[window] + (SKIP_FIELDS if skip else ())


class ADSShape(Protocol):
    """What the check needs of the sampler a state is loaded into."""

    n_rows: int
    cfg: ADSSamplerConfig
    reset_every: int
    sizes: np.ndarray
    cluster_ids: np.ndarray

    @property
    def fingerprint(self) -> str: ...

    def sorted_index_of(self, rows: np.ndarray) -> np.ndarray: ...

    def rows_in_order(self) -> np.ndarray: ...


def ads_state_dict(sampler: ADSShape, state: ADSState) -> dict[str, Any]:
    """Plain JSON-able state (lists, floats, ints, str): the header, the window, then its fields."""
    b = sampler.cfg.mini_cluster_size
    sizes = np.minimum(sampler.sizes, b)
    values = {
        "steps": int(state.steps),
        "steps_in_epoch": int(state.steps_in_epoch),
        "r": state.r.tolist(),
        "p": state.p.tolist(),
        "windows": [state.windows[k, : sizes[k]].tolist() for k in range(len(sizes))],
        "centers": state.centers.tolist(),
        # only the rows trained at least once, by artifact row position (ascending): sparse and readable
        "used_rows": np.sort(sampler.rows_in_order()[np.flatnonzero(state.uses)]).tolist(),
        "use_counts": [],
        "last_counts": state.last_counts.tolist(),
        "rng": state.rng.bit_generator.state,
        "skipped": state.skipped.tolist(),
    }
    used = np.asarray(values["used_rows"], dtype=np.int64)
    values["use_counts"] = state.uses[sampler.sorted_index_of(used)].tolist() if len(used) else []
    for name, sign in (("solved", 1), ("failed", -1)):  # only the rows with a streak, by row position, like uses
        rows = np.sort(sampler.rows_in_order()[np.flatnonzero(sign * state.streaks.astype(np.int32) > 0)])
        values[f"{name}_rows"] = rows.tolist()
        values[f"{name}_streaks"] = (sign * state.streaks[sampler.sorted_index_of(rows)].astype(np.int64)).tolist()
    window = sampler.cfg.window
    header = {
        "kind": "ADSSampler",
        "version": ADS_STATE_VERSION,
        "config": sampler.cfg.model_dump(),
        "n_rows": sampler.n_rows,
        "fingerprint": sampler.fingerprint,
        "window": window,
    }
    return {**header, **{key: values[key] for key in ads_state_keys(window, sampler.cfg.skip)[len(header) :]}}


def _resolved(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config dump with an unset weighting replaced by its window's default (success == null there)."""
    out = dict(config)
    window = out.get("window")
    unset = "inter_cluster_weighting" in out and out["inter_cluster_weighting"] is None
    if unset and isinstance(window, str) and window in DEFAULT_WEIGHTING:
        out["inter_cluster_weighting"] = DEFAULT_WEIGHTING[window]
    return out


def _saved_window(state: Any, cfg: ADSSamplerConfig) -> tuple[bool, str]:
    """(legacy, window) of a saved state, refusing a window other than this sampler's."""
    if not isinstance(state, Mapping) or "window" not in state:
        legacy = isinstance(state, Mapping) and state.get("version") == LEGACY_VERSION
        if legacy and cfg.window != "reference":
            raise SamplerStateError(
                "state['window']",
                f"missing: a version-{LEGACY_VERSION} state is a reference-window state, this sampler uses "
                f"window={cfg.window!r}",
            )
        return legacy, "reference"
    window = state["window"]
    if not (isinstance(window, str) and window in WINDOW_FIELDS):
        refuse("state['window']", f"one of {sorted(WINDOW_FIELDS)}", window)
    if window != cfg.window:
        raise SamplerStateError(
            "state['window']", f"state was saved with window {window!r}, this sampler uses {cfg.window!r}"
        )
    return False, window


def check_ads_state(state: Any, sampler: ADSShape) -> ADSState:
    """Validate a saved ``ADSSampler`` state against the sampler it is loaded into (artifact, config but the
    seed, window, clusters) and return it parsed; raises ``SamplerStateError`` on the first bad field."""
    n_rows, cfg, reset_every, sizes = sampler.n_rows, sampler.cfg, sampler.reset_every, sampler.sizes
    if isinstance(state, Mapping) and "kind" in state and state["kind"] != "ADSSampler":
        refuse("state['kind']", "'ADSSampler'", state["kind"])  # another sampler's state: say so first
    legacy, window = _saved_window(state, cfg)
    no_skip = legacy or (isinstance(state, Mapping) and _is_version(state.get("version"), NO_SKIP_VERSION))
    if legacy:
        keys, version = LEGACY_KEYS, LEGACY_VERSION
    else:
        version = NO_SKIP_VERSION if no_skip else ADS_STATE_VERSION
        keys = ads_state_keys(window, cfg.skip and not no_skip)
    s = state_header(state, "ADSSampler", keys, n_rows, version)
    fp = s["fingerprint"]
    if not (isinstance(fp, str) and fp == sampler.fingerprint):
        raise SamplerStateError(
            "state['fingerprint']", "state was saved for another artifact (clustering or row order differ)"
        )
    saved_config = s["config"]
    if no_skip and isinstance(saved_config, Mapping):
        defaults = ADSSamplerConfig().model_dump()
        added = _SKIP_KNOBS + (_NEW_FIELDS if legacy else ())
        saved_config = {**{key: defaults[key] for key in added}, **saved_config}
    if isinstance(saved_config, Mapping):
        saved_config = _resolved(saved_config)
    state_config(saved_config, cfg, ignore_seed=True, expected=_resolved(cfg.model_dump()))
    steps = state_int(s["steps"], "state['steps']")
    # steps_in_epoch counts from the last reset, which happens as soon as it reaches reset_every
    in_epoch_max = min(steps, reset_every - 1) if reset_every else steps
    steps_in_epoch = state_int(s["steps_in_epoch"], "state['steps_in_epoch']", 0, in_epoch_max)
    k, b = len(sizes), cfg.mini_cluster_size
    r = state_reals(s["r"], "state['r']", k, "success rates, one per cluster")
    p = state_reals(s["p"], "state['p']", k, "probabilities, one per cluster")
    if abs(math.fsum(p.tolist()) - 1.0) > 1e-6:
        raise SamplerStateError("state['p']", f"expected a distribution summing to 1, got sum {float(p.sum())!r}")
    win = np.broadcast_to(np.arange(b, dtype=np.int64), (k, b)).copy()
    centers = np.zeros(k, dtype=np.float64)
    uses = np.zeros(0, dtype=np.int64)
    if window == "frontier":
        centers = state_reals(s["centers"], "state['centers']", k, "band centres in [0, 1], one per cluster")
        uses = _check_uses(s["used_rows"], s["use_counts"], sampler)
        total = int(frontier_bands(centers, sizes, b, cfg.frontier_band)[1].sum())  # rows in all bands
    else:
        total = _check_windows(s["windows"], win, sampler)
    # a row is classified at most once per update, and only inside a window
    counts = state_list(s["last_counts"], "state['last_counts']", 3, "counts (easier, keep, harder)")
    counts = [state_int(v, f"state['last_counts'][{i}]", 0, total) for i, v in enumerate(counts)]
    if sum(counts) > total:
        raise SamplerStateError(
            "state['last_counts']",
            f"expected counts summing to at most {total} (rows in all windows), got {sum(counts)}",
        )
    rng = state_rng(s["rng"], "state['rng']")
    streaks, skipped = np.zeros(0, dtype=np.int16), np.zeros(3, dtype=np.int64)
    if cfg.skip:  # a version-2 state with skip on was refused by its config above
        streaks = _check_streaks(s, sampler)
        skipped = _check_skipped(s["skipped"], n_rows)
    return ADSState(
        steps, steps_in_epoch, r, p, win, centers, uses, np.array(counts, dtype=np.int64), rng, streaks, skipped
    )


def _is_version(value: Any, version: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == version


def _check_streaks(s: Mapping[str, Any], sampler: ADSShape) -> np.ndarray:
    """Skipping's per-row streaks: for solved and for failed streaks, ascending distinct rows, each with a
    length in [1, cap]; no row in both."""
    n = sampler.n_rows
    streaks = np.zeros(n, dtype=np.int16)
    for name, sign in (("solved", 1), ("failed", -1)):
        where = f"state['{name}_rows']"
        rows = state_list(s[f"{name}_rows"], where, n, "row positions (ascending)", at_most=True)
        parsed, prev = [], -1
        for i, v in enumerate(rows):
            prev = state_int(v, f"{where}[{i}]", prev + 1, n - 1, " (ascending row positions)")
            parsed.append(prev)
        lengths = state_list(s[f"{name}_streaks"], f"state['{name}_streaks']", len(parsed), "streaks, one per row")
        checked = [state_int(v, f"state['{name}_streaks'][{i}]", 1, STREAK_CAP) for i, v in enumerate(lengths)]
        if parsed:
            index = sampler.sorted_index_of(np.array(parsed, dtype=np.int64))
            both = np.flatnonzero(streaks[index] != 0)
            if len(both):
                raise SamplerStateError(
                    f"{where}[{int(both[0])}]", f"row {parsed[int(both[0])]} has a solved streak too"
                )
            streaks[index] = sign * np.array(checked, dtype=np.int16)
    return streaks


def _check_skipped(value: Any, most: int) -> np.ndarray:
    """The skip counters: solved and failed rows skipped in the last draw (together at most ``most``, the rows),
    and in all draws."""
    items = state_list(value, "state['skipped']", 3, "counts (solved, failed in the last draw; all draws)")
    solved = state_int(items[0], "state['skipped'][0]", 0, most)
    failed = state_int(items[1], "state['skipped'][1]", 0, most - solved)
    total = state_int(items[2], "state['skipped'][2]", solved + failed)
    return np.array([solved, failed, total], dtype=np.int64)


def _check_uses(rows_value: Any, counts_value: Any, sampler: ADSShape) -> np.ndarray:
    """The frontier's per-row training counts: ascending distinct rows, each with a count >= 1."""
    n = sampler.n_rows
    rows = state_list(rows_value, "state['used_rows']", n, "row positions (ascending)", at_most=True)
    parsed, prev = [], -1
    for i, v in enumerate(rows):
        prev = state_int(v, f"state['used_rows'][{i}]", prev + 1, n - 1, " (ascending row positions)")
        parsed.append(prev)
    counts = state_list(counts_value, "state['use_counts']", len(parsed), "counts, one per used row")
    values = [state_int(v, f"state['use_counts'][{i}]", 1) for i, v in enumerate(counts)]
    uses = np.zeros(n, dtype=np.int64)
    if parsed:
        uses[sampler.sorted_index_of(np.array(parsed, dtype=np.int64))] = values
    return uses


def _check_windows(value: Any, win: np.ndarray, sampler: ADSShape) -> int:
    """Parse the reference windows into ``win`` (strictly ascending inside each cluster); returns their rows."""
    k, b = win.shape
    windows = state_list(value, "state['windows']", k, "windows, one per cluster")
    total = 0
    for i, w in enumerate(windows):
        size = int(sampler.sizes[i])
        field, m = f"state['windows'][{i}]", min(b, size)
        what = f"positions (cluster {sampler.cluster_ids[i]} has {size} rows, its window min({b}, {size}))"
        positions = state_list(w, field, m, what)
        prev = -1
        for j, v in enumerate(positions):  # strictly ascending inside [0, size): bounds that leave room
            prev = win[i, j] = state_int(v, f"{field}[{j}]", prev + 1, size - m + j, " (ascending positions)")
        total += m
    return total
