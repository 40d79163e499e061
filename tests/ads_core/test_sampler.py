"""Properties of the ADS sampler and its baselines (issue 5, "Done when"), plus a check against an
independent, loop-by-loop model of the reference algorithm."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads_core.config.sampler import (
    ADSSamplerConfig,
    DifficultyTargetedConfig,
    DynamicSamplingConfig,
    UniformSamplerConfig,
)
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.base import Sampler
from ads_core.sampler.baselines import DifficultyTargetedSampler, UniformSampler
from ads_core.sampler.dynamic import DynamicSamplingSampler
from ads_core.sampler.window import shift_window

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GRID = np.arange(9) / 8  # success rates observable with n = 8 rollouts


def make_dataset(seed: int, sizes: list[int], ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rows in shuffled order; cluster ids are arbitrary (non-contiguous, possibly negative) integers."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(-3, 500), size=len(sizes), replace=False)
    cid = np.repeat(ids, sizes)
    rank = np.concatenate([rng.integers(0, max(1, s // 3), s) if ties else rng.permutation(s) for s in sizes])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm]


@st.composite
def scenarios(draw: st.DrawFn, min_sizes: int = 1) -> tuple[np.ndarray, np.ndarray, ADSSamplerConfig, int]:
    k = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(min_sizes, 30), min_size=k, max_size=k))
    seed = draw(st.integers(0, 2**31))
    cid, rank = make_dataset(seed, sizes, ties=draw(st.booleans()))
    weighting = draw(st.sampled_from(["success", "learnability", "inverse"]))
    cfg = ADSSamplerConfig(
        active_clusters=draw(st.integers(1, 5)),
        mini_cluster_size=draw(st.integers(1, 8)),
        boundary_eps=draw(st.floats(0.0, 0.5)),
        alpha=draw(st.floats(0.0, 1.0)),
        r_init=draw(st.floats(0.0, 1.0)),
        seed=seed % 1000,
        reset_every=draw(st.sampled_from([None, 0, 1, 3, 7])),
        prob_floor=draw(st.sampled_from([0.0, 0.5 / k, 1.0 / k])),
        inter_cluster_weighting=weighting,
    )
    return cid, rank, cfg, seed


def feedback(rng: np.random.Generator, idx: np.ndarray, eps: float) -> np.ndarray:
    """Successes on the n = 8 grid, plus values exactly on and just beyond the band edges."""
    edges = np.array([0.5 - eps, 0.5 + eps, np.nextafter(0.5 - eps, -1), np.nextafter(0.5 + eps, 2)])
    pool = np.clip(np.concatenate([GRID, edges]), 0.0, 1.0)
    return rng.choice(pool, size=len(idx))


def windows(s: ADSSampler) -> dict[int, np.ndarray]:
    return {int(c): s.window(int(c)) for c in s.cluster_ids}


def check_invariants(s: ADSSampler) -> None:
    assert s.p.shape == (s.n_clusters,)
    assert np.all(s.p >= 0) and s.p.sum() == pytest.approx(1.0, abs=1e-12)
    q = s.sampling_probs()
    assert np.all(q >= 0) and q.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all((s.r >= 0) & (s.r <= 1))
    for k, c in enumerate(s.cluster_ids):
        w = s.window(int(c))
        assert len(w) == min(s.cfg.mini_cluster_size, s.sizes[k])
        assert np.all(np.diff(w) > 0) and w[0] >= 0 and w[-1] < s.sizes[k]


def check_batch(s: ADSSampler, before: dict[int, np.ndarray], batch: np.ndarray) -> None:
    """Every slot of B rows comes from one drawn cluster and is exactly its window, easy to hard."""
    a, b = s.cfg.active_clusters, s.cfg.mini_cluster_size
    assert batch.dtype == np.int64 and batch.shape == (s.batch_size,) == (a * b,)
    slots = batch.reshape(a, b)
    drawn = []
    for slot in slots:
        clusters = s.cluster_of_rows(slot)
        assert np.all(clusters == clusters[0])
        c = int(clusters[0])
        drawn.append(c)
        k = int(np.searchsorted(s.cluster_ids, c))
        rows_in_window = s._order[s._starts[k] + before[c]]
        assert set(slot.tolist()) <= set(rows_in_window.tolist())
        assert slot.tolist() == np.resize(rows_in_window, b).tolist()
    if s.n_clusters >= a:
        assert len(set(drawn)) == a
    else:
        assert set(drawn) == {int(c) for c in s.cluster_ids}


# -- the core properties ---------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.integers(1, 25))
def test_batches_windows_and_distribution_stay_valid(scenario, steps):
    cid, rank, cfg, seed = scenario
    s = ADSSampler(cid, rank, cfg)
    rng = np.random.default_rng(seed)
    check_invariants(s)
    for _ in range(steps):
        before = windows(s)
        batch = s.next_batch()
        check_batch(s, before, batch)
        s.update(batch, feedback(rng, batch, cfg.boundary_eps))
        check_invariants(s)


@SETTINGS
@given(scenarios(), st.integers(0, 20), st.integers(1, 10))
def test_state_round_trip_gives_identical_continuation(scenario, before, after):
    cid, rank, cfg, seed = scenario
    s = ADSSampler(cid, rank, cfg)
    rng = np.random.default_rng(seed)
    for _ in range(before):
        batch = s.next_batch()
        s.update(batch, feedback(rng, batch, cfg.boundary_eps))
    state = json.loads(json.dumps(s.state_dict()))  # plain JSON, no pickle
    other = ADSSampler(cid, rank, cfg.replaced(seed=cfg.seed + 1))  # the seed is restored from the state
    other.load_state_dict(state)
    for _ in range(after):
        b1, b2 = s.next_batch(), other.next_batch()
        assert b1.tolist() == b2.tolist()
        succ = feedback(rng, b1, cfg.boundary_eps)
        s.update(b1, succ)
        other.update(b2, succ)
        assert s.metrics() == other.metrics()
    assert json.dumps(s.state_dict()) == json.dumps({**other.state_dict(), "config": s.state_dict()["config"]})


def test_state_is_json_and_resumes_between_next_batch_and_update():
    cid, rank = make_dataset(0, [50, 40, 60, 45, 70])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=8))
    pending = s.next_batch()  # a checkpoint may land after the draw, before the update
    state = s.state_dict()
    text = json.dumps(state)
    assert "NaN" not in text
    other = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=8))
    other.load_state_dict(json.loads(text))
    succ = np.linspace(0, 1, len(pending))
    s.update(pending, succ)
    other.update(pending, succ)
    assert s.next_batch().tolist() == other.next_batch().tolist()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.17, 0.25, 0.5])
def test_keep_easier_harder_exactly_at_band_edges(eps):
    cid = np.zeros(100, dtype=np.int64)
    rank = np.arange(100)
    cfg = ADSSamplerConfig(active_clusters=1, mini_cluster_size=4, boundary_eps=eps, reset_every=0)
    s = ADSSampler(cid, rank, cfg)
    lo, hi = 0.5 - eps, 0.5 + eps

    def step(value: float) -> dict[str, float]:
        batch = s.next_batch()
        s.update(batch, np.full(len(batch), value))
        return s.metrics()

    for _ in range(3):  # climb off the easy end first, so a move easier is visible
        if hi < 1.0:
            assert step(1.0)["ads/frac_harder"] == 1.0
    start = s.window(0).tolist()
    m = step(hi)  # exactly on the upper edge: keep
    assert (m["ads/frac_keep"], s.window(0).tolist()) == (1.0, start)
    if hi < 1.0:
        m = step(float(np.nextafter(hi, 2.0)))  # just above: all too easy, slide one harder
        assert m["ads/frac_harder"] == 1.0 and s.window(0).tolist() == [p + 1 for p in start]
        start = s.window(0).tolist()
    m = step(lo)  # exactly on the lower edge: keep
    assert (m["ads/frac_keep"], s.window(0).tolist()) == (1.0, start)
    if lo > 0.0 and start[0] > 0:
        m = step(float(np.nextafter(lo, -1.0)))  # just below: all too hard, slide one easier
        assert m["ads/frac_easier"] == 1.0 and s.window(0).tolist() == [p - 1 for p in start]


@SETTINGS
@given(st.integers(1, 400), st.integers(1, 4), st.integers(1, 6), st.sampled_from([None, 1, 2, 5]))
def test_reset_period_is_honoured(n_rows, active, b, reset_every):
    cid = np.arange(n_rows) % 3
    rank = np.arange(n_rows)
    cfg = ADSSamplerConfig(active_clusters=active, mini_cluster_size=b, reset_every=reset_every, r_init=0.25)
    s = ADSSampler(cid, rank, cfg)
    period = max(1, n_rows // (active * b)) if reset_every is None else reset_every
    assert s.reset_every == period
    fresh = (s.r.copy(), s.p.copy(), windows(s))
    for step in range(1, 2 * period + 1):
        batch = s.next_batch()
        s.update(batch, np.ones(len(batch)))  # all solved: r moves to 1, windows slide harder
        at_reset = step % period == 0
        assert s.steps_in_epoch == (0 if at_reset else step % period)
        if at_reset:
            assert np.array_equal(s.r, fresh[0]) and np.array_equal(s.p, fresh[1])
            assert all(np.array_equal(w, fresh[2][c]) for c, w in windows(s).items())
        else:
            assert np.all(s.r[np.unique(np.searchsorted(s.cluster_ids, s.cluster_of_rows(batch)))] == 1.0)


def test_reset_disabled_with_zero():
    cid, rank = make_dataset(1, [10, 10])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=2, reset_every=0))
    for _ in range(50):
        batch = s.next_batch()
        s.update(batch, np.ones(len(batch)))
    assert s.steps_in_epoch == 50 and np.all(s.r == 1.0)


# -- the reference, step by step ------------------------------------------------------------------------


class ReferenceModel:
    """The reference pseudocode (spec section 3.7) with dicts and sets, written from the spec, not from ours."""

    def __init__(self, cid: np.ndarray, rank: np.ndarray, cfg: ADSSamplerConfig) -> None:
        members: dict[int, list[tuple[float, int]]] = {}
        for i, (k, r) in enumerate(zip(cid.tolist(), rank.tolist(), strict=True)):
            members.setdefault(k, []).append((r, i))
        self.keys = sorted(members)
        self.order = {k: [i for _, i in sorted(members[k])] for k in self.keys}
        self.cluster_of = {i: k for k in self.keys for i in self.order[k]}
        self.pos_of = {i: q for k in self.keys for q, i in enumerate(self.order[k])}
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        n = len(cid)
        self.reset_every = max(1, n // cfg.batch_size) if cfg.reset_every is None else cfg.reset_every
        self.steps_in_epoch = 0
        self.reset()

    def reset(self) -> None:
        b = self.cfg.mini_cluster_size
        self.succ = {k: self.cfg.r_init for k in self.keys}
        self.prob = {k: 1.0 / len(self.keys) for k in self.keys}
        self.window = {k: set(range(min(b, len(self.order[k])))) for k in self.keys}

    def next_batch(self) -> list[int]:
        p = np.array([self.prob[k] for k in self.keys])
        p = p / p.sum()
        ks = self.rng.choice(len(self.keys), size=self.cfg.active_clusters, replace=False, p=p)
        return [self.order[self.keys[j]][q] for j in ks for q in sorted(self.window[self.keys[j]])]

    def update(self, rows: list[int], rhos: list[float]) -> None:
        eps = self.cfg.boundary_eps
        per_cluster: dict[int, list[float]] = {}
        dirs: dict[int, dict[int, int]] = {}
        for i, rho in zip(rows, rhos, strict=True):
            k, q = self.cluster_of[i], self.pos_of[i]
            per_cluster.setdefault(k, []).append(rho)
            if q in self.window[k]:
                dirs.setdefault(k, {})[q] = -1 if rho < 0.5 - eps else 1 if rho > 0.5 + eps else 0
        for k, values in per_cluster.items():
            self.succ[k] = float(np.mean(values))
        for k, d in dirs.items():
            self.window[k] = self.shift(self.window[k], d, len(self.order[k]))
        r = np.array([self.succ[k] for k in self.keys])
        w = {"success": r, "learnability": r * (1 - r), "inverse": 1 - r}[self.cfg.inter_cluster_weighting]
        target = w / w.sum() if w.sum() > 0 else np.full(len(r), 1 / len(r))
        p = np.array([self.prob[k] for k in self.keys])
        p = (1 - self.cfg.alpha) * p + self.cfg.alpha * target
        p = p / p.sum()
        self.prob = dict(zip(self.keys, p.tolist(), strict=True))
        self.steps_in_epoch += 1
        if self.reset_every > 0 and self.steps_in_epoch >= self.reset_every:
            self.reset()
            self.steps_in_epoch = 0

    @staticmethod
    def shift(window: set[int], d: dict[int, int], size: int) -> set[int]:
        """Spec 3.4 step 4, stated declaratively (not the implementation's search loop): stayers keep their
        slot; each mover, easier ones ascending then harder ones descending, takes the free slot closest to one
        step in its direction (the clamped target), a tie going to the side of its direction."""
        if size <= len(window):
            return window
        occupied = {q for q in window if d.get(q, 0) == 0}
        movers = [(q, -1) for q in sorted(q for q in window if d.get(q) == -1)]
        movers += [(q, 1) for q in sorted((q for q in window if d.get(q) == 1), reverse=True)]
        for q, direction in movers:
            target = min(max(q + direction, 0), size - 1)
            free = [c for c in range(size) if c not in occupied]
            occupied.add(min(free, key=lambda c: (abs(c - target), (c - target) * direction < 0)))
        return occupied


@SETTINGS
@given(scenarios(min_sizes=8), st.integers(1, 30), st.booleans())
def test_matches_reference_model_where_the_reference_is_defined(scenario, steps, foreign):
    cid, rank, cfg, seed = scenario
    k = len(np.unique(cid))
    cfg = cfg.replaced(mini_cluster_size=min(cfg.mini_cluster_size, 8), prob_floor=0.0)
    cfg = cfg.replaced(active_clusters=min(cfg.active_clusters, k))  # the reference needs K >= active
    ours, ref = ADSSampler(cid, rank, cfg), ReferenceModel(cid, rank, cfg)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        if np.count_nonzero(ours.p) < cfg.active_clusters:
            return  # the reference's draw raises here (alpha = 1 starved clusters); ours is tested apart
        batch = ours.next_batch()
        assert batch.tolist() == ref.next_batch()
        rows = batch
        if foreign:  # rows the sampler didn't emit, each once (the reference is last-wins on repeats)
            rows = rng.permutation(len(cid))[: len(batch)]
        succ = feedback(rng, rows, cfg.boundary_eps)
        ours.update(rows, succ)
        ref.update(rows.tolist(), succ.tolist())
        assert np.allclose(ours.p, [ref.prob[c] for c in ref.keys], rtol=0, atol=1e-12)
        assert np.allclose(ours.r, [ref.succ[c] for c in ref.keys], rtol=0, atol=1e-12)
        assert all(ours.window(c).tolist() == sorted(ref.window[c]) for c in ref.keys)


def test_shift_window_documented_consequences():
    full = list(range(32))
    assert shift_window(full, [], full, 100) == list(range(1, 33))  # all too easy: one slot harder
    assert shift_window(full, full, [], 100) == full  # all too hard at the easy end: stays
    assert shift_window(full, [], [5], 100) == full  # isolated mover inside: its nearest free slot is its own
    assert shift_window(full, [], [31], 100) == [*range(31), 32]  # top edge moves out, window gaps
    assert shift_window(list(range(10, 20)), list(range(10, 20)), [], 100) == list(range(9, 19))
    assert shift_window(list(range(5)), [], list(range(5)), 5) == list(range(5))  # whole cluster: no move
    assert shift_window(list(range(95, 100)), [], list(range(95, 100)), 100) == list(range(95, 100))


@SETTINGS
@given(st.integers(2, 60), st.data())
def test_shift_window_keeps_count_distinct_and_in_bounds(size, data):
    m = data.draw(st.integers(1, size))
    window = sorted(data.draw(st.sets(st.integers(0, size - 1), min_size=m, max_size=m)))
    dirs = data.draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=m, max_size=m))
    easier = [p for p, d in zip(window, dirs, strict=True) if d < 0]
    harder = [p for p, d in zip(window, dirs, strict=True) if d > 0]
    new = shift_window(window, easier, harder, size)
    assert len(new) == len(window) == len(set(new))
    assert all(0 <= p < size for p in new)
    stayers = set(window) - set(easier) - set(harder)
    assert stayers <= set(new)


# -- the fixes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[3, 40, 5, 50], [2], [1, 1], [40, 3]])
def test_fixed_batch_size_with_small_clusters_and_few_clusters(sizes):
    cid, rank = make_dataset(7, sizes)
    cfg = ADSSamplerConfig(active_clusters=4, mini_cluster_size=8)
    s = ADSSampler(cid, rank, cfg)
    rng = np.random.default_rng(0)
    for _ in range(20):
        before = windows(s)
        batch = s.next_batch()
        check_batch(s, before, batch)
        s.update(batch, rng.choice(GRID, len(batch)))
    small = [int(c) for k, c in enumerate(s.cluster_ids) if s.sizes[k] < 8]
    for c in small:  # a small cluster's window is the whole cluster, forever
        assert s.window(c).tolist() == list(range(int(s.sizes[np.searchsorted(s.cluster_ids, c)])))


def test_update_rejects_bad_input():
    cid, rank = make_dataset(2, [10, 10])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=4))
    batch = s.next_batch()
    state = json.dumps(s.state_dict())
    bad = [
        (batch, np.ones(len(batch) - 1), "length mismatch"),
        (batch, np.full(len(batch), 1.5), r"\[0, 1\]"),
        (batch, np.full(len(batch), -0.1), r"\[0, 1\]"),
        (batch, np.full(len(batch), np.nan), r"\[0, 1\]"),
        (np.array([0, 20]), np.array([0.5, 0.5]), "out of range"),
        (np.array([-1]), np.array([0.5]), "out of range"),
        (batch.astype(float), np.ones(len(batch)), "integer"),
        (batch.reshape(2, 2), np.ones((2, 2)), "1-D"),
        (batch, np.array(["a"] * len(batch)), "numeric"),
    ]
    for idx, succ, message in bad:
        with pytest.raises(ValueError, match=message):
            s.update(idx, succ)
    assert json.dumps(s.state_dict()) == state  # a rejected update changes nothing


def test_update_accepts_foreign_and_repeated_rows():
    cid = np.repeat([10, 20], 50)
    rank = np.tile(np.arange(50), 2)
    cfg = ADSSamplerConfig(active_clusters=1, mini_cluster_size=4, reset_every=0)
    s = ADSSampler(cid, rank, cfg)
    # A row of cluster 20 far outside its window: counts towards r, leaves the window alone.
    outside = int(np.flatnonzero((cid == 20) & (rank == 40))[0])
    s.update([outside], [1.0])
    assert s.r.tolist() == [0.5, 1.0] and s.window(20).tolist() == [0, 1, 2, 3]
    assert s.metrics()["ads/classified"] == 0
    # A window row repeated with 0 and 1: classified once, on the mean 0.5 -> keep.
    top = int(np.flatnonzero((cid == 10) & (rank == 3))[0])
    s.update([top, top], [0.0, 1.0])
    assert s.window(10).tolist() == [0, 1, 2, 3]
    m = s.metrics()
    assert (m["ads/classified"], m["ads/frac_keep"]) == (1, 1.0)
    assert s.r[0] == 0.5
    # Repeated too-easy top row: slides out by one.
    s.update([top, top, top], [1.0, 1.0, 0.75])
    assert s.window(10).tolist() == [0, 1, 2, 4]
    s.update([], [])  # an empty update is a step with no feedback
    assert s.steps == 4
    check_invariants(s)


def test_probability_floor():
    cid = np.repeat(np.arange(4), 20)
    rank = np.tile(np.arange(20), 4)
    base = ADSSamplerConfig(active_clusters=1, mini_cluster_size=4, alpha=1.0, reset_every=0)
    with pytest.raises(ValueError, match="above 1/K"):
        ADSSampler(cid, rank, base.replaced(prob_floor=0.3))
    starve = ADSSampler(cid, rank, base)
    floored = ADSSampler(cid, rank, base.replaced(prob_floor=0.05))
    draws = {0: 0, 1: 0}
    for s, key in ((starve, 0), (floored, 1)):
        s.update(np.arange(80), (np.repeat(np.arange(4), 20) > 0).astype(float))  # cluster 0 solves nothing
        assert s.p[0] == 0.0  # success weighting, alpha = 1: p_0 = r_0 / sum(r) = 0
        q = s.sampling_probs()
        assert q.sum() == pytest.approx(1.0) and np.all(q >= (0.05 if key else 0.0) - 1e-15)
        for _ in range(400):
            draws[key] += int(s.cluster_of_rows(s.next_batch()[:1])[0] == 0)
    assert draws[0] == 0  # the reference starves the cluster
    assert draws[1] > 0  # the floor keeps drawing it (expected 20 of 400)
    assert floored.sampling_probs()[0] == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("weighting", "weight"),
    [("success", lambda r: r), ("learnability", lambda r: r * (1 - r)), ("inverse", lambda r: 1 - r)],
)
def test_each_weighting_sets_the_ema_target(weighting, weight):
    cid = np.repeat(np.arange(4), 10)
    rank = np.tile(np.arange(10), 4)
    cfg = ADSSamplerConfig(active_clusters=2, mini_cluster_size=2, alpha=0.3, r_init=0.5, reset_every=0)
    s = ADSSampler(cid, rank, cfg.replaced(inter_cluster_weighting=weighting))
    r = np.array([0.125, 0.5, 0.875, 1.0])
    s.update(np.arange(40), np.repeat(r, 10))
    assert s.r.tolist() == r.tolist()
    target = weight(r) / weight(r).sum()
    expected = 0.7 * np.full(4, 0.25) + 0.3 * target
    assert np.allclose(s.p, expected / expected.sum(), atol=1e-15)
    s.update([], [])  # r carries over: p keeps moving towards the same target
    expected = 0.7 * expected + 0.3 * target
    assert np.allclose(s.p, expected, atol=1e-15)


@pytest.mark.parametrize("active", [2, 4, 6])
def test_starved_clusters_never_break_the_draw(active):
    """alpha = 1 and success weighting: p is 0 for clusters that solved nothing; numpy's draw would raise."""
    cid = np.repeat(np.arange(4), 10)
    rank = np.tile(np.arange(10), 4)
    cfg = ADSSamplerConfig(active_clusters=active, mini_cluster_size=3, alpha=1.0, reset_every=0)
    s = ADSSampler(cid, rank, cfg)
    s.update(np.arange(40), (cid == 2).astype(float))  # only cluster 2 has r > 0
    assert np.count_nonzero(s.p) == 1
    for _ in range(5):
        before = windows(s)
        batch = s.next_batch()
        check_batch(s, before, batch)
        assert 2 in s.cluster_of_rows(batch)


def test_degenerate_weights_fall_back_to_uniform_target():
    cid = np.repeat(np.arange(3), 4)
    rank = np.tile(np.arange(4), 3)
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=2, alpha=1.0))
    s.update(np.arange(12), np.zeros(12))  # success weighting, all r = 0
    assert np.allclose(s.p, 1 / 3)


def test_first_draw_is_the_reference_rng_call():
    cid, rank = make_dataset(3, [40] * 10)
    s = ADSSampler(cid, rank, ADSSamplerConfig(seed=123))
    expected = np.random.default_rng(123).choice(10, size=4, replace=False, p=np.full(10, 0.1))
    assert np.unique(cid)[expected].tolist() == s.cluster_of_rows(s.next_batch()[::32]).tolist()


def test_ties_in_rank_keep_row_order():
    cid = np.array([5, 5, 5, 5, 7, 7])
    rank = np.array([1, 0, 1, 0, 0, 0])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=4))
    assert s.window_rows(5).tolist() == [1, 3, 0, 2]
    assert s.position_of_rows([0, 1, 2, 3, 4, 5]).tolist() == [2, 0, 3, 1, 0, 1]


def test_config_and_column_validation():
    with pytest.raises(ValueError, match="inter_cluster_weighting"):
        ADSSamplerConfig(inter_cluster_weighting="magic")  # type: ignore[arg-type]
    for bad in (dict(active_clusters=0), dict(mini_cluster_size=0), dict(boundary_eps=0.6), dict(alpha=2.0)):
        with pytest.raises(ValueError):
            ADSSamplerConfig(**bad)  # type: ignore[arg-type]
    assert ADSSamplerConfig(active_clusters=3, mini_cluster_size=5).batch_size == 15
    with pytest.raises(ValueError, match="length mismatch"):
        ADSSampler([1, 2], [0])
    with pytest.raises(ValueError, match="no rows"):
        ADSSampler([], [])
    with pytest.raises(ValueError, match="integers"):
        ADSSampler([0.5, 1.0], [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        ADSSampler([0, 1], [0.0, np.nan])


def test_load_state_refuses_other_artifact_or_config():
    cid, rank = make_dataset(4, [30, 30, 30])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=4))
    state = s.state_dict()
    moved = rank.copy()
    moved[[0, 1]] = moved[[1, 0]]
    other_order = ADSSampler(cid, moved, ADSSamplerConfig(active_clusters=2, mini_cluster_size=4))
    if not np.array_equal(other_order._order, s._order):
        with pytest.raises(ValueError, match="another artifact"):
            other_order.load_state_dict(state)
    with pytest.raises(ValueError, match="different config"):
        ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=4, alpha=0.5)).load_state_dict(
            state
        )
    broken = json.loads(json.dumps(state))
    broken["windows"][0] = [0, 0, 1, 2]
    with pytest.raises(ValueError, match="window"):
        ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=4)).load_state_dict(broken)


def test_metrics_are_a_flat_dict_of_numbers():
    cid, rank = make_dataset(5, [40, 40, 40, 40])
    s = ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=2, mini_cluster_size=8))
    batch = s.next_batch()
    s.update(batch, np.linspace(0, 1, len(batch)))
    m = s.metrics()
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in m.items())
    assert m["ads/frac_keep"] + m["ads/frac_easier"] + m["ads/frac_harder"] == pytest.approx(1.0)
    assert m["ads/classified"] == 16
    for c in s.cluster_ids:
        for name in ("p", "r", "window_lo", "window_hi", "window_frac"):
            assert f"ads/{name}/{c}" in m
    assert sum(m[f"ads/p/{c}"] for c in s.cluster_ids) == pytest.approx(1.0)


@pytest.mark.parametrize("via", ["path", "memory"])
def test_from_parquet_local_and_fsspec(tmp_path, via):
    import fsspec

    cid, rank = make_dataset(6, [20, 30, 25])
    table = pa.table({"prompt": [f"q{i}" for i in range(len(cid))], "cluster_id": cid, "rank_in_cluster": rank})
    if via == "path":
        uri = str(tmp_path / "train.parquet")
        pq.write_table(table, uri)
    else:
        uri = f"memory://ads-test-{tmp_path.name}/train.parquet"
        with fsspec.open(uri, "wb") as f:
            pq.write_table(table, f)
    cfg = ADSSamplerConfig(active_clusters=2, mini_cluster_size=4)
    assert ADSSampler.from_parquet(uri, cfg).next_batch().tolist() == ADSSampler(cid, rank, cfg).next_batch().tolist()
    uniform = UniformSampler.from_parquet(uri, UniformSamplerConfig(batch_size=8))
    assert len(uniform.next_batch()) == 8


def test_from_parquet_reports_missing_and_null_columns(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"cluster_id": [1, 2]}), path)
    with pytest.raises(ValueError, match="rank_in_cluster"):
        ADSSampler.from_parquet(str(path))
    pq.write_table(pa.table({"cluster_id": pa.array([1, None]), "rank_in_cluster": [0, 0]}), path)
    with pytest.raises(ValueError, match="null"):
        ADSSampler.from_parquet(str(path))


# -- baselines ------------------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 50), st.integers(1, 20), st.integers(0, 9))
def test_uniform_covers_each_epoch_once_and_resumes(n_rows, batch_size, split):
    cid, rank = np.zeros(n_rows, dtype=np.int64), np.arange(n_rows)
    cfg = UniformSamplerConfig(batch_size=batch_size, seed=3)
    s = UniformSampler(cid, rank, cfg)
    seen = []
    for i in range(10):
        if i == split:
            other = UniformSampler(cid, rank, cfg)
            other.load_state_dict(json.loads(json.dumps(s.state_dict())))
            s = other
        batch = s.next_batch()
        assert batch.shape == (batch_size,)
        s.update(batch, np.zeros(batch_size))
        seen.extend(batch.tolist())
    for epoch in range(len(seen) // n_rows):
        assert sorted(seen[epoch * n_rows : (epoch + 1) * n_rows]) == list(range(n_rows))


def test_dots_style_picks_rows_predicted_nearest_half():
    cid = np.zeros(200, dtype=np.int64)
    rank = np.arange(200)
    cfg = DifficultyTargetedConfig(batch_size=10, candidate_pool=200, rank_bandwidth=0.05, seed=1)
    s = DifficultyTargetedSampler(cid, rank, cfg)
    # Observations: easy end solved, hard end failed, the middle (ranks 90-110) at 0.5.
    obs = np.arange(0, 200, 5)
    s.update(obs, np.clip(1.0 - obs / 200 * 1.0, 0, 1).round(1))
    batch = s.next_batch()
    assert len(set(batch.tolist())) == 10
    assert np.all(np.abs(s.predict(batch) - 0.5) <= np.sort(np.abs(s.predict(np.arange(200)) - 0.5))[40])
    assert 60 <= np.median(batch) <= 140
    dense = DifficultyTargetedSampler(cid, rank, cfg.replaced(cross_cluster_weight=1e-9))
    dense.update(obs, np.clip(1.0 - obs / 200, 0, 1).round(1))
    assert np.allclose(dense.predict(np.arange(200)), s.predict(np.arange(200)), atol=1e-6)


def test_dots_style_round_trip_fixed_size_and_errors():
    cid, rank = make_dataset(8, [5, 3])
    cfg = DifficultyTargetedConfig(batch_size=16, memory_size=6, seed=2)
    s = DifficultyTargetedSampler(cid, rank, cfg)
    rng = np.random.default_rng(0)
    for _ in range(3):
        batch = s.next_batch()
        assert batch.shape == (16,)  # fewer rows than a batch: repeated, size unchanged
        s.update(batch, rng.choice(GRID, 16))
    other = DifficultyTargetedSampler(cid, rank, cfg)
    other.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert s.next_batch().tolist() == other.next_batch().tolist()
    with pytest.raises(ValueError, match="length mismatch"):
        s.update([0, 1], [0.5])
    emb = rng.normal(size=(len(cid), 4))
    with_emb = DifficultyTargetedSampler(cid, rank, cfg, embeddings=emb)
    with_emb.update([0, 1, 2], [1.0, 0.0, 0.5])
    assert np.all((with_emb.predict(np.arange(len(cid))) >= 0) & (with_emb.predict(np.arange(len(cid))) <= 1))


def test_all_samplers_share_the_protocol():
    cid, rank = make_dataset(9, [20, 20])
    for s in (
        ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=4)),
        UniformSampler(cid, rank, UniformSamplerConfig(batch_size=4)),
        DifficultyTargetedSampler(cid, rank, DifficultyTargetedConfig(batch_size=4)),
        ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=4, window="frontier")),
        DynamicSamplingSampler(cid, rank, DynamicSamplingConfig(batch_size=4)),
    ):
        assert isinstance(s, Sampler)
        batch = s.next_batch()
        assert batch.dtype == np.int64 and len(batch) == s.batch_size == 4
        s.update(batch, np.full(4, 0.5))
        with pytest.raises(ValueError):
            s.update(batch, np.full(4, 2.0))
        json.dumps(s.state_dict())
