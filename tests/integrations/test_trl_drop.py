"""The ADS reference trainer's all-wrong drop (`TrainConfig.drop_all_wrong`) in TRL's loop: all-wrong groups leave
the gradient batch, none when every group is all wrong, the sampler still sees every group, and `steps.jsonl`
counts what each step dropped. Real 2-step runs with the tiny policy (8 prompts x 2 completions of 8 tokens)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ads_core.train.groups import drops_all_wrong, groups_to_keep

pytest.importorskip("trl")

from ads_core.train.errors import TrainOptionError  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trl.trainer import ADSGRPOTrainer  # noqa: E402


def test_the_reference_rule_keeps_groups_with_any_success_and_everything_when_all_are_wrong():
    assert groups_to_keep([0.0, 0.5, 1.0, 0.0]).tolist() == [False, True, True, False]
    assert groups_to_keep([0.0, 0.0, 0.0]).tolist() == [True, True, True]  # every group all wrong: none dropped
    assert groups_to_keep([1.0, 1.0]).tolist() == [True, True]  # all-correct groups stay
    assert groups_to_keep([0.25, 0.0]).tolist() == [True, False]


def test_auto_means_on_for_ads_as_published_and_off_for_the_baselines():
    assert drops_all_wrong(TrainConfig())  # --sampler ads, as published
    assert drops_all_wrong(TrainConfig(sampler={"kind": "ads", "ads": {"window": "frontier"}}))
    assert not drops_all_wrong(TrainConfig(drop_all_wrong="off"))
    assert not drops_all_wrong(TrainConfig(sampler={"kind": "uniform"}))
    assert drops_all_wrong(TrainConfig(sampler={"kind": "uniform"}, drop_all_wrong="on"))
    assert not drops_all_wrong(TrainConfig(sampler={"kind": "dynamic"}))


@pytest.fixture
def trained_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of completions each optimizer step's loss saw."""
    seen: list[int] = []
    original = ADSGRPOTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        seen.append(int(inputs["completion_ids"].shape[0]))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(ADSGRPOTrainer, "compute_loss", spy)
    return seen


def _run(artifact: Path, tmp_path: Path, trl_helpers, score, **options) -> list[dict]:
    cfg = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path), **trl_helpers.sizes, **options)
    return train(str(artifact), cfg, score=score).steps


def test_uniform_with_the_drop_on_trains_only_groups_with_a_success(
    final_artifact: Path, trl_helpers, tmp_path: Path, trained_rows: list[int]
):
    uniform = {"sampler": {"kind": "uniform"}, "drop_all_wrong": "on"}
    steps = _run(final_artifact, tmp_path, trl_helpers, trl_helpers.score, **uniform)
    for step, rows in zip(steps, trained_rows, strict=True):
        wrong = sum(v == 0.0 for v in step["success"])  # uniform draws distinct rows: one group per row
        assert step["dropped_groups"] == (wrong if wrong < 8 else 0)
        assert rows == 2 * (8 - step["dropped_groups"])  # the loss saw only the kept groups' completions
        assert len(step["success"]) == 8  # the sampler got every group, the dropped ones too
    assert sum(s["dropped_groups"] for s in steps) > 0  # the parity score leaves some groups all wrong


def test_nothing_is_dropped_when_every_group_is_all_wrong(
    final_artifact: Path, trl_helpers, tmp_path: Path, trained_rows: list[int]
):
    uniform = {"sampler": {"kind": "uniform"}, "drop_all_wrong": "on"}
    steps = _run(final_artifact, tmp_path, trl_helpers, lambda text, truth: 0.0, **uniform)
    assert [s["dropped_groups"] for s in steps] == [0, 0]
    assert trained_rows == [16, 16]


def test_ads_as_published_drops_in_training_and_off_is_planned_without_it(
    final_artifact: Path, trl_helpers, tmp_path: Path, trained_rows: list[int]
):
    from ads_core.train.plan import plan_training
    from ads_core.train.trl.plan import plan_trl

    steps = _run(final_artifact, tmp_path / "on", trl_helpers, trl_helpers.score)  # --sampler ads, the defaults
    dropped = [s["dropped_groups"] for s in steps]
    assert trained_rows == [2 * (8 - d) for d in dropped] and sum(dropped) > 0
    for step in steps:  # four clusters x two distinct rows: one group per row
        wrong = sum(v == 0.0 for v in step["success"])
        assert step["dropped_groups"] == (wrong if wrong < 8 else 0)
    off = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path / "off"), drop_all_wrong="off", **trl_helpers.sizes)
    assert plan_trl(plan_training(str(final_artifact), off, materialize=False)).drop_all_wrong is False


def test_where_trl_would_split_or_refill_the_batch_on_is_refused_and_auto_trains_without_saying_so(
    final_artifact: Path, trl_helpers, tmp_path: Path
):
    from ads_core.train.plan import plan_training
    from ads_core.train.trl.plan import plan_trl

    for trl, words in (
        ({"gradient_accumulation_steps": 2}, "gradient_accumulation_steps 1"),
        ({"replay": True}, "replay"),
    ):
        sizes = {**trl_helpers.sizes, "trl": {**trl_helpers.sizes["trl"], **trl}}
        on = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path), drop_all_wrong="on", **sizes)
        with pytest.raises(TrainOptionError, match=words):
            plan_trl(plan_training(str(final_artifact), on, materialize=False))
        auto = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path), sampler={"kind": "ads"}, **sizes)
        plan = plan_training(str(final_artifact), auto, materialize=False)
        assert plan_trl(plan).drop_all_wrong is False
        assert any("this run trains without it (drop_all_wrong auto)" in w for w in plan.warnings), plan.warnings


def test_group_order_is_kept_for_the_groups_that_stay():
    keep = groups_to_keep(np.array([0.0, 0.5, 0.0, 1.0]))
    assert np.flatnonzero(keep).tolist() == [1, 3]
