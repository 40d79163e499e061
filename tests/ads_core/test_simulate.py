"""The synthetic learner, the comparison it reports, and the `ads simulate` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from ads_core.sampler.plots import WindowTrace, save_plot, save_window_plot
from ads_lab.cli.simulate_cmd import register
from ads_lab.config.simulate import SimulationConfig
from ads_lab.simulator.learners import CoupledLearner, ability_gain, group_signal, make_world
from ads_lab.simulator.run import SAMPLER_FACTORIES, format_report, run_simulation, summary_rows, train

SMALL = SimulationConfig(
    num_clusters=8,
    median_cluster_size=120,
    steps=60,
    eval_every=10,
    seeds=(0, 1),
    samplers=("uniform", "ads", "dots-lite"),
)


class FixedRows:
    """A sampler that always emits the same rows, to probe the learner."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.batch_size = len(rows)

    def next_batch(self) -> np.ndarray:
        return self.rows

    def update(self, idx, success) -> None:
        pass


def test_group_signal_is_zero_for_uniform_groups_and_peaks_at_half():
    rho = np.arange(9) / 8
    g = group_signal(rho)
    assert g[0] == g[-1] == 0.0 and g.argmax() == 4
    assert np.allclose(group_signal(rho, "std"), np.sqrt(g))


@pytest.mark.parametrize("transfer", [0.0, 0.3, 1.0])
def test_ability_gain_transfer(transfer):
    cfg = SMALL.replaced(transfer=transfer, learning_rate=1.0)
    k = 4
    only_zero = ability_gain(np.zeros(8, dtype=np.int64), np.full(8, 0.25), k, cfg)
    if transfer == 0.0:
        assert only_zero[0] > 0 and np.all(only_zero[1:] == 0)  # no transfer: other clusters don't move
    elif transfer == 1.0:
        assert np.allclose(only_zero, only_zero[0])  # one shared skill
    else:
        assert only_zero[0] > only_zero[1] > 0 and np.allclose(only_zero[1:], only_zero[1])
    spread = ability_gain(np.arange(8) % k, np.full(8, 0.25), k, cfg)
    assert np.allclose(spread, 0.25)  # an even spread lifts all equally, whatever the transfer
    assert np.all(ability_gain(np.arange(8) % k, np.zeros(8), k, cfg) == 0)


def test_world_ranks_follow_noisy_difficulty():
    world = make_world(SMALL.replaced(rank_noise_sd=0.0), seed=3)
    for k in range(world.n_clusters):
        rows = np.flatnonzero(world.cluster_of == k)
        assert sorted(world.rank_in_cluster[rows].tolist()) == list(range(len(rows)))
        by_rank = rows[np.argsort(world.rank_in_cluster[rows])]
        assert np.all(np.diff(world.difficulty[by_rank]) >= 0)  # no noise: ranks sort by true difficulty
    noisy = make_world(SMALL.replaced(rank_noise_sd=1.0), seed=3)
    corr = [
        np.corrcoef(noisy.rank_in_cluster[m], noisy.difficulty[m])[0, 1]
        for m in (noisy.cluster_of == k for k in range(noisy.n_clusters))
    ]
    assert 0.3 < np.mean(corr) < 0.99
    assert np.array_equal(make_world(SMALL, 5).difficulty, make_world(SMALL, 5).difficulty)


def test_learner_gains_only_from_informative_groups():
    cfg = SMALL.replaced(steps=30, eval_every=10)
    world = make_world(cfg, 0)
    rows = np.arange(16)
    world.difficulty[rows] = -50.0  # always solved: zero reward variance
    curve = train(world, FixedRows(rows), cfg, 0).accuracy
    assert np.all(curve == curve[0])
    world.difficulty[rows] = cfg.initial_ability  # success probability 0.5: maximal variance
    curve = train(world, FixedRows(rows), cfg, 0).accuracy
    assert np.all(np.diff(curve) > 0)


def test_run_simulation_shapes_targets_and_report(tmp_path):
    result = run_simulation(SMALL)
    assert list(result.eval_steps) == [0, 10, 20, 30, 40, 50, 60]
    assert set(result.curves) == {"uniform", "ads", "dots-lite"}
    for curve in result.curves.values():
        assert curve.shape == (2, 7) and np.all((curve > 0) & (curve < 1))
    for i in range(2):  # same world and starting policy for every sampler of a seed
        assert len({round(c[i, 0], 12) for c in result.curves.values()}) == 1
    assert np.array_equal(result.targets, result.curves["uniform"][:, -1])
    base = result.steps_to_target["uniform"]
    assert all(s is not None and s <= 60 for s in base)
    for name, steps in result.steps_to_target.items():
        for i, s in enumerate(steps):
            curve = result.curves[name][i]
            if s is None:
                assert np.all(curve < result.targets[i])
            else:
                j = list(result.eval_steps).index(s)
                assert curve[j] >= result.targets[i] and np.all(curve[:j] < result.targets[i])
    assert result.ratio("uniform") == (1.0, 0)
    rows = {r["sampler"]: r for r in summary_rows(result)}
    assert rows["ads"]["ratio"] == pytest.approx(
        np.mean([(s or 60) / b for s, b in zip(result.steps_to_target["ads"], base, strict=True)])
    )
    report = format_report(result)
    for name in ("uniform", "ads", "dots-lite", "ratio", "not evidence"):
        assert name in report
    json.dumps(result.to_dict())
    save_plot(result, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulation_is_deterministic():
    cfg = SMALL.replaced(samplers=("uniform", "ads-learnability"), seeds=(4,), steps=20)
    a, b = run_simulation(cfg), run_simulation(cfg)
    assert all(np.array_equal(a.curves[n], b.curves[n]) for n in a.curves)


def test_every_registered_sampler_runs_with_a_fixed_batch():
    cfg = SMALL.replaced(steps=5, seeds=(0,), samplers=tuple(SAMPLER_FACTORIES))
    world = make_world(cfg, 0)
    for name, factory in SAMPLER_FACTORIES.items():
        sampler = factory(world, cfg, 0)
        for _ in range(3):
            batch = sampler.next_batch()
            assert len(batch) == cfg.ads.batch_size, name
            sampler.update(batch, np.full(len(batch), 0.5))


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="samplers"):
        SimulationConfig(samplers=("uniform", "magic"))
    with pytest.raises(ValueError, match="transfer"):
        SimulationConfig(transfer=1.5)


def test_cli_simulate_writes_table_json_and_png(tmp_path):
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register(app)
    out = tmp_path / "sim"
    args = ["simulate", "--seeds", "2", "--steps", "30", "--eval-every", "10", "--clusters", "6"]
    args += ["--cluster-size", "80", "--samplers", "uniform,ads-inverse", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        "to reach uniform's final accuracy" in result.output
        and "rollout ratio (min-max)" in result.output
        and "ads-inverse" in result.output
    )
    assert (out / "simulation.png").exists() and (out / "simulation_windows.png").exists()  # ads-inverse is ADS
    data = json.loads((out / "simulation.json").read_text())
    assert data["config"]["steps"] == 30 and set(data["curves"]) == {"uniform", "ads-inverse"}
    bad = CliRunner().invoke(app, ["simulate", "--samplers", "uniform,nope", "--out", str(out)])
    assert bad.exit_code == 2 and "samplers" in bad.output and "nope" in bad.output
    assert "--transfer" in CliRunner().invoke(app, ["simulate", "--help"]).output


# -- the second learner ("coupled") ----------------------------------------------------------------------

COUPLED = SMALL.replaced(learner="coupled")


def test_coupled_world_shares_the_simple_world_but_ranks_worse():
    simple, coupled = make_world(SMALL, 2), make_world(COUPLED, 2)
    for name in ("cluster_of", "difficulty", "test_cluster", "test_difficulty"):
        assert np.array_equal(getattr(simple, name), getattr(coupled, name)), name
    assert coupled.broken is not None and 0 < coupled.broken.mean() < 0.15
    assert coupled.skill_pos is not None and coupled.skill_pos.shape == (SMALL.num_clusters, 2)

    def rank_corr(world):
        return np.mean(
            [
                np.corrcoef(world.rank_in_cluster[m], world.difficulty[m])[0, 1]
                for m in (world.cluster_of == k for k in range(world.n_clusters))
            ]
        )

    assert rank_corr(coupled) < rank_corr(simple) - 0.05  # outliers and uneven noise
    with pytest.raises(ValueError, match="coupled"):
        CoupledLearner(simple, COUPLED, 0)


def test_coupled_broken_rows_never_succeed_and_memorising_is_not_generalising():
    world = make_world(COUPLED, 0)
    learner = CoupledLearner(world, COUPLED, 0)
    broken = np.flatnonzero(world.broken)[:32]
    world.difficulty[broken] = -50.0  # trivially easy, but the reference answer is wrong
    assert np.all(learner.rollout(broken) == 0.0)
    row = np.flatnonzero(~world.broken)[:1]
    world.difficulty[row] = COUPLED.initial_ability + 2.0  # hard for the start policy: success ~ 0.12
    trained = {}
    for memorize in (0.0, 5.0):
        cfg = COUPLED.replaced(coupled=COUPLED.coupled.replaced(memorize=memorize))
        learner = CoupledLearner(world, cfg, 0)
        learner.learn(np.repeat(row, 4), np.full(4, 0.5))
        assert np.count_nonzero(learner.offset) == (memorize > 0)
        trained[memorize] = (learner.accuracy(), learner.rollout(np.repeat(row, 4000)).mean())
    assert trained[0.0][0] == trained[5.0][0]  # held-out accuracy: memorising does not generalise
    assert trained[5.0][1] > trained[0.0][1] + 0.3  # but the trained row itself looks much easier


def test_coupled_transfer_follows_skill_distance_and_repeats_teach_less():
    cfg = COUPLED.replaced(transfer=0.0, coupled=COUPLED.coupled.replaced(forget_rate=0.0))
    world = make_world(cfg, 1)
    learner = CoupledLearner(world, cfg, 1)
    rows = np.flatnonzero(world.cluster_of == 0)[:8]
    start = learner.theta.copy()
    learner.learn(rows, np.full(8, 0.5))
    first = learner.theta - start
    distance = np.linalg.norm(world.skill_pos - world.skill_pos[0], axis=1)
    near, far = np.argsort(distance)[1], np.argsort(distance)[-1]
    assert first[0] > first[near] > first[far] >= 0
    assert first.sum() == pytest.approx(cfg.coupled.learning_rate * cfg.num_clusters * 0.25)  # signal is conserved
    again = learner.theta.copy()
    learner.learn(rows, np.full(8, 0.5))  # the same rows, trained once before: 1 / (1 + 1/4) as much
    assert (learner.theta - again)[0] == pytest.approx(first[0] / (1 + 1 / cfg.coupled.repeat_scale))


def test_coupled_forgetting_decays_towards_the_start():
    world = make_world(COUPLED, 0)
    learner = CoupledLearner(world, COUPLED, 0)
    learner.theta = learner.theta + 1.0
    solved = np.flatnonzero(world.cluster_of == 0)[:4]
    learner.learn(solved, np.ones(4))  # all-correct groups: no signal, only forgetting
    assert np.allclose(learner.theta - world.initial_ability, 1.0 - COUPLED.coupled.forget_rate)


def test_coupled_learner_runs_every_sampler():
    result = run_simulation(COUPLED.replaced(steps=40, seeds=(0,), samplers=("uniform", "ads", "dots-lite")))
    assert "'coupled'" in format_report(result)
    for curve in result.curves.values():
        assert np.all((curve > 0) & (curve < 1)) and curve[0, -1] != curve[0, 0]


# -- what the window does, drawn ----------------------------------------------------------------------------


def test_window_traces_follow_the_ads_windows_and_plot(tmp_path):
    result = run_simulation(SMALL.replaced(samplers=("uniform", "ads", "ads-frontier"), steps=80))
    assert set(result.window_traces) == {"ads", "ads-frontier"}  # ADS samplers only, first seed
    for trace in result.window_traces.values():
        position, success = np.asarray(trace.position), np.asarray(trace.success)
        assert trace.steps == result.eval_steps.tolist() and position.shape == success.shape == (9, SMALL.num_clusters)
        assert np.all((position >= 0) & (position <= 1)) and np.all((success >= 0) & (success <= 1))
    frontier = np.asarray(result.window_traces["ads-frontier"].position)
    assert np.all(frontier[0] == 0) and frontier[-1].max() > 0.1  # starts on the easiest rows, then moves in
    save_window_plot(result.window_traces, str(tmp_path / "w.png"), "title")
    assert (tmp_path / "w.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no window trace"):
        save_window_plot({}, str(tmp_path / "none.png"))
    json.dumps(result.to_dict())


def test_window_trace_from_logged_metrics_matches_the_live_sampler():
    """What a training run logs (ADSSampler.metrics, per-cluster series on some steps) rebuilds the trace."""
    world = make_world(SMALL, 0)
    sampler = SAMPLER_FACTORIES["ads-frontier"](world, SMALL, 0)
    live = WindowTrace.start(sampler)
    records = [{**sampler.metrics(), "ads/step": 0.0}]
    rng = np.random.default_rng(0)
    for step in range(1, 31):
        batch = sampler.next_batch()
        sampler.update(batch, rng.choice(np.arange(9) / 8, len(batch)))
        metrics = sampler.metrics()
        if step % 10 == 0:
            live.record(step, sampler)
            records.append(metrics)
        else:  # steps without per-cluster series, as the adapters log them between snapshots
            records.append({k: v for k, v in metrics.items() if k.count("/") == 1})
    rebuilt = WindowTrace.from_metrics(records)
    assert rebuilt.steps == live.steps == [0, 10, 20, 30]
    assert rebuilt.cluster_ids == live.cluster_ids
    assert np.allclose(rebuilt.position, live.position) and np.allclose(rebuilt.success, live.success)
    partial = WindowTrace.from_metrics([{"step": 5, "ads/r/3": 0.5}, {"ads/window_frac/7": 0.2, "step": 9}])
    assert partial.cluster_ids == [3, 7] and partial.steps == [5, 9]
    assert np.isnan(partial.position[0][0]) and partial.position[1][1] == 0.2
    with pytest.raises(ValueError, match="no numeric"):
        WindowTrace.from_metrics([{"ads/r/1": 0.5}])


@pytest.mark.slow  # many seeded simulations at the documented sizes: ~30 s on 2 busy cores
def test_defaults_reproduce_the_simple_learner_claims_of_docs_sampler_md():
    """docs/sampler.md, simple learner, 5 seeds x 800 steps: the reference ADS needs fewer steps than uniform;
    ads-frontier reaches uniform's final accuracy in <= 0.55 of its steps, ahead of DOTS-style and dynamic
    sampling, in steps and in rollouts; ads-frontier-skip (pre-rollout skipping) in <= 0.45, with fewer rollouts
    than every other sampler."""
    names = ("uniform", "dots-lite", "dynamic", "ads", "ads-frontier", "ads-frontier-skip")
    simple = run_simulation(SimulationConfig(samplers=names))
    assert simple.ratio("ads")[1] == 0 and simple.ratio("ads")[0] < 1.0
    ratio, missed = simple.ratio("ads-frontier")
    assert missed == 0 and ratio <= 0.55
    for other in ("dots-lite", "dynamic"):
        assert (
            ratio < simple.ratio(other)[0] and simple.rollout_ratio("ads-frontier")[0] < simple.rollout_ratio(other)[0]
        )
    skip, missed = simple.rollout_ratio("ads-frontier-skip")
    assert missed == 0 and simple.ratio("ads-frontier-skip")[0] <= 0.45
    assert all(skip < simple.rollout_ratio(other)[0] for other in names if other != "ads-frontier-skip")


@pytest.mark.slow  # many seeded simulations at the documented sizes: ~35 s on 2 busy cores
def test_defaults_reproduce_the_coupled_learner_claims_of_docs_sampler_md():
    """docs/sampler.md, coupled learner, 5 seeds x 800 steps: ads-frontier beats uniform and the reference rule
    (steps to uniform's final accuracy, and final accuracy); ads-frontier-skip needs fewer steps than
    ads-frontier and rolls out fewer prompts than DOTS-style and dynamic sampling, but more steps than 0.45."""
    names = ("uniform", "dots-lite", "dynamic", "ads", "ads-frontier", "ads-frontier-skip")
    coupled = run_simulation(SimulationConfig(learner="coupled", samplers=names))
    ratio, missed = coupled.ratio("ads-frontier")
    assert missed == 0 and ratio < 1.0 and ratio < coupled.ratio("ads")[0]
    finals = {name: curve[:, -1].mean() for name, curve in coupled.curves.items()}
    assert finals["ads-frontier"] > finals["uniform"] > finals["ads"]
    skip = coupled.ratio("ads-frontier-skip")
    assert skip[1] == 0 and 0.45 < skip[0] < ratio
    rollouts = coupled.rollout_ratio("ads-frontier-skip")[0]
    assert rollouts < coupled.rollout_ratio("dots-lite")[0] and rollouts < coupled.rollout_ratio("dynamic")[0]
