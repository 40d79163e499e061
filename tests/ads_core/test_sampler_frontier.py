"""The frontier window (issue 19): its band, its move, its cluster weighting, its config, state and resume,
and the loading of version-1 states (saved before it existed) as reference-window states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.state import SamplerStateError
from ads_core.sampler.window import fresh_positions, frontier_bands, move_frontier

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GRID = np.arange(9) / 8
DATA = Path(__file__).parent / "data"


def dataset(seed: int, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(-3, 500), size=len(sizes), replace=False)
    cid = np.repeat(ids, sizes)
    rank = np.concatenate([rng.permutation(s) for s in sizes])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm]


def frontier(**fields: object) -> ADSSamplerConfig:
    return ADSSamplerConfig(window="frontier", **fields)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, ADSSamplerConfig, int]:
    k = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 200), min_size=k, max_size=k))
    seed = draw(st.integers(0, 2**31))
    cid, rank = dataset(seed, sizes)
    cfg = frontier(
        active_clusters=draw(st.integers(1, 5)),
        mini_cluster_size=draw(st.integers(1, 12)),
        alpha=draw(st.floats(0.0, 1.0)),
        seed=seed % 1000,
        reset_every=draw(st.sampled_from([None, 0, 3, 9])),
        prob_floor=draw(st.sampled_from([0.0, 0.5 / k])),
        inter_cluster_weighting=draw(st.sampled_from([None, "success", "learnability", "frontier"])),
        frontier_target=draw(st.floats(0.05, 0.95)),
        frontier_gain=draw(st.floats(0.01, 2.0)),
        frontier_band=draw(st.floats(0.0, 1.0)),
        frontier_weight_floor=draw(st.floats(0.0, 0.1)),
    )
    return cid, rank, cfg, seed


# -- the band and its rows -------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 300), st.integers(1, 40), st.floats(0.0, 1.0), st.integers(0, 2**31))
def test_band_rows_are_the_least_trained_nearest_the_centre(width, b, where, seed):
    rng = np.random.default_rng(seed)
    uses = rng.integers(0, 3, width)
    lo = int(rng.integers(0, 50))
    centre = lo + where * (width - 1)
    pos = fresh_positions(uses, lo, centre, b)
    assert len(pos) == b and pos.dtype == np.int64
    if width <= b:  # a band no wider than the slot cycles through all of it, as the reference window does
        assert pos.tolist() == (lo + np.arange(b) % width).tolist()
        return
    assert np.all(np.diff(pos) > 0) and pos[0] >= lo and pos[-1] < lo + width
    picked = np.zeros(width, dtype=bool)
    picked[pos - lo] = True
    assert uses[picked].max() <= uses[~picked].min()  # no row repeats while a less-trained one waits
    tier = uses[picked].max()  # in the last tier taken, the nearest rows to the centre won
    distance = np.abs(lo + np.arange(width) - centre)
    assert distance[picked & (uses == tier)].max() <= distance[~picked & (uses == tier)].min(initial=np.inf)


def test_a_band_offers_every_fresh_row_before_repeating_one():
    cid, rank = np.zeros(1000, dtype=np.int64), np.arange(1000)
    s = ADSSampler(cid, rank, frontier(active_clusters=1, mini_cluster_size=10, frontier_band=0.2))
    lo, width = s.bands()
    assert width[0] == 200
    seen: list[int] = []
    for _ in range(20):
        rows = s.next_batch()
        seen += rows.tolist()
        s.update(rows, np.full(10, 0.5))  # on target: the band stays
    assert len(set(seen)) == 200 and set(s.position_of_rows(np.array(seen))) == set(range(lo[0], lo[0] + 200))
    first = sorted(s.position_of_rows(np.array(seen[:10])).tolist())
    assert first == list(range(10))  # the band is at the easy end; nearest its centre (~0) first
    state = s.state_dict()
    assert state["used_rows"] == sorted(seen) and state["use_counts"] == [1] * 200
    again = s.next_batch()  # every band row used once: now the repeats start, nearest the centre first
    assert sorted(s.position_of_rows(again).tolist()) == list(range(10))


def test_band_is_centred_and_shifted_inwards_at_the_ends():
    sizes = np.array([1000, 1000, 1000, 20])
    lo, width = frontier_bands(np.array([0.5, 0.0, 1.0, 0.5]), sizes, 32, 0.1)
    assert width.tolist() == [100, 100, 100, 20]
    assert lo.tolist() == [450, 0, 900, 0]  # centred on 499.5; clamped at both ends; the whole small cluster


@pytest.mark.parametrize(("success", "expected"), [(1.0, 0.45), (0.0, 0.15), (0.5, 0.3), (0.75, 0.375)])
def test_band_centre_moves_in_proportion_to_the_miss(success, expected):
    moved = move_frontier(np.array([0.3]), np.array([success]), 0.3, 0.5, np.array([True]))
    assert moved[0] == pytest.approx(expected)
    assert move_frontier(np.array([0.3]), np.array([1.0]), 0.3, 0.5, np.array([False]))[0] == 0.3
    assert move_frontier(np.array([0.9]), np.array([1.0]), 2.0, 0.5, np.array([True]))[0] == 1.0  # clamped


def test_a_solved_band_jumps_and_an_unsolved_one_falls_back():
    cid, rank = np.zeros(1000, dtype=np.int64), np.arange(1000)
    s = ADSSampler(cid, rank, frontier(active_clusters=1, mini_cluster_size=10, frontier_gain=0.5, frontier_band=0.05))
    rows = s.next_batch()
    assert np.all(s.position_of_rows(rows) < 50)  # starts on the easiest band (5 % = 50 rows)
    s.update(rows, np.ones(10))
    assert s.window_extent()[2][0] == pytest.approx(0.25)  # one update: a quarter of the cluster, not one slot
    rows = s.next_batch()
    assert np.all(np.abs(s.position_of_rows(rows) - 0.25 * 999) <= 25)
    s.update(rows, np.full(10, 0.125))
    assert s.window_extent()[2][0] == pytest.approx(0.25 - 0.5 * 0.375)
    before = s.window_extent()[2][0]
    s.update(np.array([999]), np.array([1.0]))  # a row outside the band says nothing about the frontier
    assert s.window_extent()[2][0] == before and s.metrics()["ads/classified"] == 0


def test_frontier_weighting_sets_the_ema_target_from_sizes_and_centres():
    cid, rank = dataset(0, [100, 300, 50])
    cfg = frontier(active_clusters=1, mini_cluster_size=5, alpha=0.4, frontier_weight_floor=0.01)
    assert cfg.cluster_weighting == "frontier"
    s = ADSSampler(cid, rank, cfg)
    k = int(np.searchsorted(s.cluster_ids, s.cluster_of_rows(s.next_batch())[0]))
    rows = s.window_rows(int(s.cluster_ids[k]))
    s.update(rows, np.ones(len(rows)))
    u = np.zeros(3)
    u[k] = 0.25
    w = s.sizes * (u * (1 - u) + 0.01)
    assert np.allclose(s.p, 0.6 / 3 + 0.4 * w / w.sum(), rtol=0, atol=1e-15)


# -- properties over random scenarios --------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.integers(1, 20))
def test_batches_stay_in_the_drawn_clusters_bands(scenario, steps):
    cid, rank, cfg, seed = scenario
    s = ADSSampler(cid, rank, cfg)
    rng = np.random.default_rng(seed)
    b = cfg.mini_cluster_size
    for _ in range(steps):
        lo, width = s.bands()
        batch = s.next_batch()
        assert batch.dtype == np.int64 and batch.shape == (cfg.batch_size,)
        for slot in batch.reshape(cfg.active_clusters, b):
            k = np.searchsorted(s.cluster_ids, s.cluster_of_rows(slot))
            assert np.all(k == k[0])
            pos = s.position_of_rows(slot)
            assert np.all((pos >= lo[k[0]]) & (pos < lo[k[0]] + width[k[0]]))
        s.update(batch, rng.choice(GRID, len(batch)))
        centers = s.window_extent()[2]
        assert np.all((centers >= 0) & (centers <= 1))
        assert np.all(s.p >= 0) and s.p.sum() == pytest.approx(1.0, abs=1e-12)


@SETTINGS
@given(scenarios(), st.integers(0, 12), st.integers(1, 8), st.booleans())
def test_state_round_trip_gives_identical_continuation(scenario, before, after, mid_step):
    cid, rank, cfg, seed = scenario
    rng = np.random.default_rng(seed)
    s = ADSSampler(cid, rank, cfg)
    for _ in range(before):
        batch = s.next_batch()
        s.update(batch, rng.choice(GRID, len(batch)))
    pending = s.next_batch() if mid_step else None  # saved between next_batch and update
    state = json.loads(json.dumps(s.state_dict()))
    assert state["window"] == "frontier" and "windows" not in state
    assert {"centers", "used_rows", "use_counts"} <= set(state)
    twin = ADSSampler(cid, rank, cfg.replaced(seed=cfg.seed + 1))
    twin.load_state_dict(state)
    for step in range(after):
        fb = rng.choice(GRID, cfg.batch_size)
        if step == 0 and pending is not None:
            s.update(pending, fb)
            twin.update(pending, fb)
            continue
        b1, b2 = s.next_batch(), twin.next_batch()
        assert b1.tolist() == b2.tolist()
        s.update(b1, fb)
        twin.update(b2, fb)
    assert {**s.state_dict(), "config": None} == {**twin.state_dict(), "config": None}  # all but the seed


# -- config and state ------------------------------------------------------------------------------------


def test_config_validates_every_frontier_knob():
    assert ADSSamplerConfig().cluster_weighting == "success"
    assert frontier(inter_cluster_weighting="learnability").cluster_weighting == "learnability"
    for bad in (
        {"inter_cluster_weighting": "frontier"},  # needs the band centres
        {"window": "sideways"},
        {"window": "frontier", "frontier_target": 0.0},
        {"window": "frontier", "frontier_target": 1.0},
        {"window": "frontier", "frontier_gain": 0.0},
        {"window": "frontier", "frontier_gain": 2.5},
        {"window": "frontier", "frontier_band": 1.5},
        {"window": "frontier", "frontier_weight_floor": -0.1},
        {"window": "frontier", "frontier_gain": True},
    ):
        with pytest.raises(ValueError, match=next(iter(k for k in bad if k != "window"), "window")):
            ADSSamplerConfig(**bad)


def test_a_state_names_its_window_and_refuses_the_other():
    cid, rank = dataset(3, [40, 60, 25])
    ref = ADSSampler(cid, rank, ADSSamplerConfig(mini_cluster_size=8, active_clusters=2))
    front = ADSSampler(cid, rank, frontier(mini_cluster_size=8, active_clusters=2))
    for source, into, message in (
        (ref, front, "state['window']: state was saved with window 'reference', this sampler uses 'frontier'"),
        (front, ref, "state['window']: state was saved with window 'frontier', this sampler uses 'reference'"),
    ):
        before = json.dumps(into.state_dict())
        with pytest.raises(SamplerStateError) as info:
            into.load_state_dict(source.state_dict())
        assert str(info.value) == message and json.dumps(into.state_dict()) == before


def test_version_1_state_loads_as_reference_and_continues_like_the_old_code():
    """ads_state_v1.json was saved by the code of commit 7c1d165 (see data/record_ads_state_v1.py) after 15
    steps of a recorded scenario; loaded here, the sampler must produce that scenario's remaining batches."""
    saved = json.loads((DATA / "ads_state_v1.json").read_text())
    rec = json.loads((DATA / "ads_reference_batches.json").read_text())["scenarios"][saved["scenario"]]
    state = saved["state"]
    assert state["version"] == 1 and "window" not in state and "window" not in state["config"]
    s = ADSSampler(np.array(rec["cluster_ids"]), np.array(rec["rank_in_cluster"]), ADSSamplerConfig(**rec["config"]))
    s.load_state_dict(state)
    todo = list(zip(rec["batches"], rec["success"], strict=True))[saved["after_steps"] :]
    for batch, success in todo:
        assert s.next_batch().tolist() == batch
        s.update(np.array(batch), np.array(success))
    assert s.state_dict()["windows"] == rec["final"]["windows"] and s.state_dict()["p"] == rec["final"]["p"]
    into_frontier = ADSSampler(s.cluster_of_rows(np.arange(s.n_rows)), np.array(rec["rank_in_cluster"]), frontier())
    with pytest.raises(SamplerStateError, match=r"state\['window'\]: missing: a version-1 state"):
        into_frontier.load_state_dict(state)
    changed = {**state, "config": {**state["config"], "alpha": 0.9}}
    with pytest.raises(SamplerStateError, match=r"state\['config'\]\['alpha'\]"):
        s.load_state_dict(changed)


def test_metrics_show_band_and_centre():
    cid, rank = dataset(1, [200, 80])
    s = ADSSampler(cid, rank, frontier(active_clusters=1, mini_cluster_size=8, frontier_band=0.1))
    rows = s.next_batch()
    s.update(rows, np.ones(len(rows)))
    m = s.metrics()
    lo, hi, centers = s.window_extent()
    for i, c in enumerate(s.cluster_ids.tolist()):
        assert m[f"ads/window_frac/{c}"] == centers[i]
        assert (m[f"ads/window_lo/{c}"], m[f"ads/window_hi/{c}"]) == (lo[i], hi[i])
        assert s.window(c).tolist() == list(range(lo[i], hi[i] + 1))
    assert m["ads/classified"] == 8 and m["ads/frac_harder"] == 1.0
