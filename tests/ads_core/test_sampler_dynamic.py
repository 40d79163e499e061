"""DAPO-style dynamic sampling (issue 19): the sampler, the drop-and-draw-again step loop and what it costs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads_core.config.sampler import DynamicSamplingConfig, UniformSamplerConfig
from ads_core.sampler.base import GroupFilter, Sampler
from ads_core.sampler.baselines import UniformSampler
from ads_core.sampler.dynamic import DynamicSamplingSampler, fill_step, informative
from ads_core.sampler.state import SamplerStateError
from ads_lab.config.simulate import SimulationConfig
from ads_lab.simulator.run import run_simulation, summary_rows

N = 200
CID, RANK = np.repeat(np.arange(4), N // 4), np.tile(np.arange(N // 4), 4)


class Oracle:
    """A rollout whose outcome is fixed per row: informative only where ``good`` is set; counts its calls."""

    def __init__(self, good: np.ndarray) -> None:
        self.good, self.calls, self.rolled = good, 0, 0

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.rolled += len(rows)
        return np.where(self.good[rows], 0.375, np.where(rows % 2 == 0, 0.0, 1.0))


def test_informative_means_rewards_that_disagree():
    assert informative(np.array([0.0, 1.0, 0.125, 0.875, 0.5])).tolist() == [False, False, True, True, True]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 60), st.integers(1, 6), st.floats(0.0, 1.0), st.integers(0, 2**31))
def test_a_step_keeps_the_first_informative_groups_and_draws_no_more_than_needed(batch, max_draws, share, seed):
    cfg = DynamicSamplingConfig(batch_size=batch, max_draws=max_draws, seed=seed % 1000)
    draw = batch
    s = DynamicSamplingSampler(CID, RANK, cfg)
    oracle = Oracle(np.random.default_rng(seed).random(N) < share)
    step = fill_step(s, oracle)
    # the same stream, replayed independently: the generation batches the step must have drawn
    stream = UniformSampler(CID, RANK, UniformSamplerConfig(batch_size=draw, seed=cfg.seed))
    draws = [stream.next_batch() for _ in range(max_draws)]
    found = np.cumsum([int(oracle.good[d].sum()) for d in draws])
    needed = int(np.searchsorted(found, batch)) + 1 if found[-1] >= batch else max_draws  # first draw that fills
    drawn = np.concatenate(draws[:needed])
    expected = np.concatenate([drawn[oracle.good[drawn]], drawn[~oracle.good[drawn]]])[:batch]
    assert step.draws == needed == s.draws and step.prompts == needed * draw
    assert step.rows.tolist() == expected.tolist() and step.rows.dtype == np.int64
    assert step.informative == int(oracle.good[drawn].sum())
    assert np.array_equal(step.success, oracle(step.rows))  # each row carries its own group's reward
    kept = min(batch, step.informative)
    assert informative(step.success[:kept]).all() and not informative(step.success[kept:]).any()


def test_any_other_sampler_is_one_draw_and_counts_its_prompts():
    s = UniformSampler(CID, RANK, UniformSamplerConfig(batch_size=12))
    assert not isinstance(s, GroupFilter)
    oracle = Oracle(np.zeros(N, dtype=bool))
    step = fill_step(s, oracle)
    assert (step.draws, step.prompts, step.informative, oracle.calls) == (1, 12, 0, 1)
    assert s.steps == 1  # fed back once


def test_state_round_trips_and_bad_fields_are_named():
    cfg = DynamicSamplingConfig(batch_size=7, max_draws=3, seed=5)
    s = DynamicSamplingSampler(CID, RANK, cfg)
    assert isinstance(s, Sampler) and isinstance(s, GroupFilter)
    oracle = Oracle(np.arange(N) % 3 == 0)
    for _ in range(40):  # past an epoch boundary (200 rows, up to 21 per step)
        fill_step(s, oracle)
    state = json.loads(json.dumps(s.state_dict()))
    twin = DynamicSamplingSampler(CID, RANK, cfg)
    twin.load_state_dict(state)
    assert twin.state_dict() == state
    for _ in range(5):
        a, b = fill_step(s, oracle), fill_step(twin, oracle)
        assert a.rows.tolist() == b.rows.tolist() and a.prompts == b.prompts
    for key, value, field in (
        ("informative", 10**9, "state['informative']"),
        ("cursor", N + 1, "state['cursor']"),
        ("config", {**state["config"], "max_draws": 4}, "state['config']['max_draws']"),
        ("kind", "UniformSampler", "state['kind']"),
    ):
        fresh = DynamicSamplingSampler(CID, RANK, cfg)
        before = fresh.state_dict()
        with pytest.raises(SamplerStateError) as info:
            fresh.load_state_dict({**state, key: value})
        assert info.value.field == field and fresh.state_dict() == before


def test_the_simulator_charges_dynamic_sampling_for_its_extra_rollouts():
    cfg = SimulationConfig(
        num_clusters=8, median_cluster_size=120, steps=60, eval_every=10, seeds=(0, 1), samplers=("uniform", "dynamic")
    )
    result = run_simulation(cfg)
    batch = cfg.ads.batch_size
    assert np.array_equal(result.prompts["uniform"][0], np.arange(0, 61, 10) * batch)
    spent = np.diff(result.prompts["dynamic"], axis=1)
    assert np.all(spent >= 10 * batch) and np.all(spent % batch == 0)  # whole generation batches, at least one
    assert spent.max() > 10 * batch  # at ~14 % accuracy most groups are all-wrong: it draws again
    rows = {r["sampler"]: r for r in summary_rows(result)}
    assert rows["dynamic"]["prompts_per_step"] > batch == rows["uniform"]["prompts_per_step"]
    base, mine = result.steps_to_target["uniform"], result.steps_to_target["dynamic"]
    steps = list(result.eval_steps)
    expected = np.mean(
        [
            (result.prompts["dynamic"][i, steps.index(m)] if m is not None else result.prompts["dynamic"][i, -1])
            / result.prompts["uniform"][i, steps.index(b)]
            for i, (m, b) in enumerate(zip(mine, base, strict=True))
        ]
    )
    assert rows["dynamic"]["rollout_ratio"] == pytest.approx(expected)
    assert rows["uniform"]["rollout_ratio"] == 1.0
