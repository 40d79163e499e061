"""The ADS sampler's window strategies on their own (one cluster, literal positions), and the sampler that holds one
without ever asking which: tests/ads_core/test_sampler*.py hold both windows' behaviour through ``ADSSampler``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler import ads
from ads_core.sampler.ads_windows import WINDOWS, ClusterLayout, FrontierWindow, ReferenceWindow


def one_cluster(rows: int) -> ClusterLayout:
    """ROWS rows of one cluster, already in easy-to-hard order."""
    zero = np.zeros(rows, dtype=np.int64)
    return ClusterLayout(np.array([rows]), np.array([0]), zero, np.arange(rows, dtype=np.int64))


def test_the_reference_window_moves_one_slot_after_a_solved_visit():
    w = ReferenceWindow(one_cluster(6), ADSSamplerConfig(active_clusters=1, mini_cluster_size=2), None)
    rng = np.random.default_rng(0)
    positions, solved, failed = w.draw(np.array([0]), rng, np.zeros(0, dtype=np.int16))
    assert positions.tolist() == [[0, 1]] and (solved, failed) == (0, 0)
    rows = np.array([0, 1])
    assert w.update(rows, rows, np.array([1.0, 1.0])).tolist() == [0, 0, 2]  # both too easy: harder
    assert w.positions(0).tolist() == [1, 2]
    lo, hi, place = w.extent()
    assert (lo.tolist(), hi.tolist(), place.tolist()) == ([1], [2], [0.3])  # mean position 1.5 over 5
    assert w.update(np.array([5]), np.array([5]), np.array([0.0])).tolist() == [0, 0, 0]  # outside: moves nothing
    w.reset()
    assert w.positions(0).tolist() == [0, 1]


def test_the_frontier_window_jumps_a_quarter_of_the_cluster_after_a_solved_band():
    cfg = ADSSamplerConfig(active_clusters=1, mini_cluster_size=2, window="frontier")
    w = FrontierWindow(one_cluster(20), cfg, None)
    rng = np.random.default_rng(0)
    assert [b.tolist() for b in w.bands()] == [[0], [4]]  # 0.2 of 20 rows, from the easiest
    positions, _, _ = w.draw(np.array([0]), rng, np.zeros(0, dtype=np.int16))
    assert positions.tolist() == [[0, 1]]
    rows = np.array([0, 1])
    assert w.update(rows, rows, np.array([1.0, 1.0])).tolist() == [0, 0, 2]
    assert w.place().tolist() == [0.25]  # gain 0.5 * (1.0 - target 0.5)
    assert w.positions(0).tolist() == [3, 4, 5, 6]  # centred on 0.25 * 19 = 4.75
    positions, _, _ = w.draw(np.array([0]), rng, np.zeros(0, dtype=np.int16))
    assert positions.tolist() == [[4, 5]]  # untrained rows, nearest the centre
    w.reset()  # the centre goes back, the rows' turns stay (the data's history)
    assert w.place().tolist() == [0.0] and w.saved()[2].tolist()[:3] == [1, 1, 0]


def test_the_sampler_chooses_its_window_once_and_never_branches_on_it():
    """``window`` picks a strategy from WINDOWS when the sampler is made; no test in ads.py reads the window kind."""
    cid, rank = np.zeros(10, dtype=np.int64), np.arange(10)
    for kind, strategy in (("reference", ReferenceWindow), ("frontier", FrontierWindow)):
        sampler = ads.ADSSampler(cid, rank, ADSSamplerConfig(active_clusters=1, mini_cluster_size=2, window=kind))
        assert WINDOWS[kind] is strategy and type(sampler._window) is strategy
    tree = ast.parse(Path(ads.__file__).read_text())
    tests = [n.test for n in ast.walk(tree) if isinstance(n, ast.If | ast.IfExp | ast.While | ast.Assert)]
    tests += [n.subject for n in ast.walk(tree) if isinstance(n, ast.Match)]
    named = [
        ast.unparse(t)
        for t in tests
        for node in ast.walk(t)
        if (isinstance(node, ast.Attribute) and node.attr in ("window", "_frontier"))
        or (isinstance(node, ast.Constant) and node.value in ("reference", "frontier"))
        or (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("isinstance", "type"))
    ]
    assert named == []
