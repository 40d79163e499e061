"""Pre-rollout skipping (issue 37): the skip probability, the batch size, revisits, exact resume, the knobs,
and the simulator's report of steps and rollouts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.base import GroupFilter
from ads_core.sampler.skip import STREAK_CAP, SkipRule, record_outcomes, skip_moves, skip_probability
from ads_core.sampler.state import SamplerStateError
from ads_lab.config.simulate import SimulationConfig
from ads_lab.simulator.run import run_simulation, summary_rows

WINDOWS = ("reference", "frontier")


def dataset(sizes: list[int], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cid = np.repeat(np.arange(10, 10 + len(sizes)), sizes)
    rank = np.concatenate([rng.permutation(s) for s in sizes])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm]


CID, RANK = dataset([3, 40, 120, 7, 300, 55])


def skipper(window: str, **fields: object) -> ADSSampler:
    cfg = ADSSamplerConfig(window=window, skip=True, active_clusters=3, mini_cluster_size=8, seed=3, **fields)
    return ADSSampler(CID, RANK, cfg)


def agreeing(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mostly zero-variance feedback (all solved or all failed), some informative."""
    return rng.choice([0.0, 0.0, 1.0, 1.0, 1.0, 0.5], len(rows))


def test_skip_probability_grows_with_the_evidence_and_never_reaches_one():
    streaks = np.arange(-2 * STREAK_CAP, 2 * STREAK_CAP + 1).clip(-STREAK_CAP, STREAK_CAP).astype(np.int16)
    p = skip_probability(streaks, solved_rate=0.3, failed_rate=0.1, skip_max=0.95)
    solved, failed = p[streaks > 0], p[streaks < 0][::-1]  # both by growing evidence
    assert p[streaks == 0].max() == 0.0
    assert np.all(np.diff(solved) >= 0) and np.all(np.diff(failed) >= 0)
    assert solved[0] == pytest.approx(0.3) and failed[0] == pytest.approx(0.1)  # separate rates
    assert solved[1] == pytest.approx(0.6) and failed[1] == pytest.approx(0.2)
    assert p.max() == 0.95  # the exploration floor: at least 5 % of offers go through
    with pytest.raises(ValueError, match="skip_max"):
        ADSSamplerConfig(skip_max=1.0)
    # the coin: a row at the cap is skipped about skip_max of the time, never always
    rng = np.random.default_rng(0)
    capped = np.full(20_000, STREAK_CAP, dtype=np.int16)
    share = SkipRule(0.5, 0.5, 0.9).draw(capped, rng).mean()
    assert 0.88 < share < 0.92


def test_streaks_count_consecutive_agreeing_groups_and_reset_on_a_disagreeing_one():
    streaks = np.zeros(4, dtype=np.int16)
    for success in ([1, 0, 0.5, 1], [1, 0, 1, 0], [1, 0.25, 0, 0]):
        record_outcomes(streaks, np.arange(4), np.asarray(success, dtype=np.float64))
    assert streaks.tolist() == [3, 0, -1, -2]
    streaks[:] = STREAK_CAP
    record_outcomes(streaks, np.arange(4), np.ones(4))
    assert streaks.tolist() == [STREAK_CAP] * 4


def test_reference_skip_moves_past_the_window_in_the_outcomes_direction():
    # solved rows move harder, failed ones easier, never onto a row the window held
    assert skip_moves([3, 4, 5, 6], solved=[5, 6], failed=[], size=20) == [3, 4, 7, 8]
    assert skip_moves([3, 4, 5, 6], solved=[], failed=[3], size=20) == [2, 4, 5, 6]
    assert skip_moves([0, 1, 2], solved=[], failed=[0], size=10) == [1, 2, 3]  # no easier row: the other way
    assert skip_moves([0, 1, 2], solved=[1], failed=[], size=3) == [0, 1, 2]  # nowhere to go: it stays


@pytest.mark.parametrize("window", WINDOWS)
def test_batch_keeps_its_size_and_each_slot_its_drawn_cluster(window):
    s, rng = skipper(window), np.random.default_rng(1)
    for _ in range(60):
        batch = s.next_batch()
        assert batch.shape == (s.batch_size,)
        blocks = s.cluster_of_rows(batch).reshape(s.cfg.active_clusters, s.cfg.mini_cluster_size)
        assert np.all(blocks == blocks[:, :1])  # every row of a slot comes from that slot's cluster
        s.update(batch, agreeing(batch, rng))
    m = s.metrics()
    assert m["ads/skipped_total"] > 0 and m["ads/zero_variance_rows"] > 0
    assert not isinstance(s, GroupFilter)  # under TRL: one generation batch per step, nothing drawn again


@pytest.mark.parametrize("window", WINDOWS)
def test_without_zero_variance_feedback_skipping_changes_nothing(window):
    on, off = skipper(window), ADSSampler(CID, RANK, skipper(window).cfg.replaced(skip=False))
    for _ in range(30):
        a, b = on.next_batch(), off.next_batch()
        assert a.tolist() == b.tolist()
        on.update(a, np.full(len(a), 0.5))
        off.update(b, np.full(len(b), 0.5))


def test_skipped_rows_are_offered_less_but_revisited():
    # one 200-row cluster, a band that is the whole cluster: rows 0-99 always all solved, the rest informative
    cid, rank = np.zeros(200, dtype=np.int64), np.arange(200)
    cfg = ADSSamplerConfig(window="frontier", frontier_band=1.0, active_clusters=1, mini_cluster_size=4, skip=True)
    s = ADSSampler(cid, rank, cfg)
    seen = np.zeros(200, dtype=np.int64)
    for _ in range(1000):
        batch = s.next_batch()
        seen[batch] += 1
        s.update(batch, np.where(batch < 100, 1.0, 0.5))
    easy, hard = seen[:100], seen[100:]
    assert easy.sum() < 0.25 * hard.sum()  # skipped most of the time ...
    assert easy.min() >= 1 and (easy >= 2).mean() >= 0.9  # ... but the solved rows come back after their first visit
    assert hard.min() >= 10  # the informative rows take the freed slots


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("mid_step", [False, True])
def test_state_round_trip_gives_the_same_future_batches(window, mid_step):
    s, rng = skipper(window, reset_every=25), np.random.default_rng(2)
    for _ in range(40):
        batch = s.next_batch()
        s.update(batch, agreeing(batch, rng))
    pending = s.next_batch() if mid_step else None  # saved between next_batch and update, as TRL does
    state = json.loads(json.dumps(s.state_dict()))
    twin = ADSSampler(CID, RANK, s.cfg.replaced(seed=999))  # the seed is free: the saved generator replaces it
    twin.load_state_dict(state)
    assert twin.state_dict()["solved_streaks"] == state["solved_streaks"] and state["failed_rows"]
    if pending is not None:
        succ = agreeing(pending, rng)
        s.update(pending, succ)
        twin.update(pending, succ)
    for _ in range(40):
        a, b = s.next_batch(), twin.next_batch()
        assert a.tolist() == b.tolist()
        succ = agreeing(a, rng)
        s.update(a, succ)
        twin.update(b, succ)
    assert {**s.state_dict(), "config": None} == {**twin.state_dict(), "config": None}
    assert s.metrics() == twin.metrics()


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda st: st["solved_streaks"].__setitem__(0, 0), "state['solved_streaks'][0]"),
        (lambda st: st["failed_streaks"].__setitem__(0, STREAK_CAP + 1), "state['failed_streaks'][0]"),
        (lambda st: st["solved_streaks"].pop(), "state['solved_streaks']"),
        (lambda st: st["failed_rows"].__setitem__(1, st["failed_rows"][0]), "state['failed_rows'][1]"),
        (lambda st: st["failed_rows"].__setitem__(0, st["solved_rows"][0]), "state['failed_rows'][0]"),
        (lambda st: st["skipped"].__setitem__(0, 10**6), "state['skipped'][0]"),
        (lambda st: st.pop("skipped"), "state['skipped']"),
        (lambda st: st["config"].__setitem__("skip", False), "state['config']['skip']"),
    ],
)
def test_a_bad_skip_state_is_refused_naming_the_field_and_changes_nothing(edit, field):
    s, rng = skipper("frontier"), np.random.default_rng(3)
    for _ in range(20):
        batch = s.next_batch()
        s.update(batch, agreeing(batch, rng))
    state = json.loads(json.dumps(s.state_dict()))
    edit(state)
    before = json.dumps(s.state_dict())
    with pytest.raises(SamplerStateError) as info:
        s.load_state_dict(state)
    assert info.value.field == field, str(info.value)
    assert json.dumps(s.state_dict()) == before


def test_a_version_2_state_loads_without_skipping_and_a_skipping_sampler_refuses_it():
    off = ADSSampler(CID, RANK, skipper("frontier").cfg.replaced(skip=False))
    off.update(off.next_batch(), np.full(off.batch_size, 1.0))
    old = json.loads(json.dumps(off.state_dict()))
    old["version"] = 2  # what the code before skipping wrote: no skip knobs in the config
    for knob in ("skip", "skip_solved_rate", "skip_failed_rate", "skip_max"):
        del old["config"][knob]
    fresh = ADSSampler(CID, RANK, off.cfg)
    fresh.load_state_dict(old)
    assert fresh.next_batch().tolist() == off.next_batch().tolist()
    with pytest.raises(SamplerStateError, match="skip"):
        skipper("frontier").load_state_dict(old)


def test_invalid_knobs_are_refused_naming_the_field():
    for bad, name in [
        ({"skip": "yes"}, "skip"),
        ({"skip_max": 1.0}, "skip_max"),
        ({"skip_solved_rate": -0.1}, "skip_solved_rate"),
        ({"skip_failed_rate": True}, "skip_failed_rate"),
        ({"skip_failed_rate": 1.5}, "skip_failed_rate"),
    ]:
        with pytest.raises(ValueError, match=name):
            ADSSamplerConfig(**bad)
    from ads_lab.cli.simulate_cmd import register

    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    result = CliRunner().invoke(app, ["simulate", "--skip-max", "1.5", "--out", "unused"])
    assert result.exit_code == 2 and "skip_max" in result.output.replace("-", "_"), result.output


def test_the_simulator_reports_steps_and_rollouts_with_their_spread():
    cfg = SimulationConfig(
        num_clusters=6,
        median_cluster_size=80,
        steps=60,
        eval_every=10,
        seeds=(0, 1),
        samplers=("dynamic", "ads-frontier-skip", "ads-skip"),
    )
    result = run_simulation(cfg)
    rows = {r["sampler"]: r for r in summary_rows(result)}
    assert set(rows) == {"uniform", "dynamic", "ads-frontier-skip", "ads-skip"}
    for name, row in rows.items():
        assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
        assert row["rollout_ratio_min"] <= row["rollout_ratio"] <= row["rollout_ratio_max"]
        per_seed = [result.prompts_to_target(name, i) for i in range(2)]
        if row["reached"] == 2:
            assert row["prompts_mean"] == pytest.approx(np.mean(per_seed))
    # skipping rolls out exactly one batch per step; dynamic sampling pays for the groups it drops
    assert rows["ads-frontier-skip"]["prompts_per_step"] == cfg.ads.batch_size
    assert rows["dynamic"]["prompts_per_step"] > cfg.ads.batch_size
    for i, (steps, base) in enumerate(
        zip(result.steps_to_target["ads-skip"], result.steps_to_target["uniform"], strict=True)
    ):
        if steps is not None and base is not None:  # one batch per step: the two ratios agree
            assert result.seed_rollout_ratios("ads-skip")[i] == pytest.approx(steps / base)


def test_under_trl_the_skip_state_resumes_exactly_from_the_checkpoint_file(tmp_path):
    """TRL's prefetch leaves one drawn batch pending; the checkpoint file restores streaks, generator and
    pending batch, so the resumed run draws what the uninterrupted one draws, one generation batch per step."""
    pytest.importorskip("torch")
    from ads_core.sampler import checkpoint as ck
    from ads_core.sampler.kinds import build_sampler
    from ads_core.train.options import TrainConfig
    from ads_core.train.trl.feed import FeedbackSampler

    section = TrainConfig().sampler
    section = section.replaced(ads=section.ads.replaced(skip=True, window="frontier", mini_cluster_size=8))
    batch = section.ads.batch_size

    def feed() -> FeedbackSampler:
        return FeedbackSampler(build_sampler("ads", CID, RANK, section, batch), "ads", 2, 1, len(CID), 50)

    rng = np.random.default_rng(5)
    a = feed()
    it = iter(a)
    for _ in range(30):  # draw, then feed back, one generation batch per step
        rows = [next(it) for _ in range(batch * 2)]
        a.feedback(rows, agreeing(np.asarray(rows), rng), np.zeros(len(rows)))
    assert a.draws == a.updates == 30 and a.extra_draws == 0 and a.sampler.metrics()["ads/skipped_total"] > 0
    prefetched = [next(it) for _ in range(batch * 2)]  # the dataloader's look-ahead: drawn, not yet rewarded
    assert len(a.pending) == 1
    ck.write_checkpoint(tmp_path, a.checkpoint(30))
    back, _ = ck.read_checkpoint(tmp_path, 30)
    b = feed()
    b.load_state_dict(FeedbackSampler.state_of(back), build_sampler("ads", CID, RANK, section, batch))
    it_b = iter(b)
    assert [next(it_b) for _ in range(batch * 2)] == prefetched  # the pending batch comes first
    state, runs = rng.bit_generator.state, []
    for f, stream in ((a, it), (b, it_b)):
        rng.bit_generator.state = state
        rows, out = prefetched, []
        for _ in range(20):
            f.feedback(rows, agreeing(np.asarray(rows), rng), np.zeros(len(rows)))
            rows = [next(stream) for _ in range(batch * 2)]
            out.append(rows)
        runs.append(out)
    assert runs[0] == runs[1]
    assert a.sampler.state_dict() == b.sampler.state_dict()
    assert a.draws == b.draws and a.extra_draws == b.extra_draws == 0  # one generation batch per step
