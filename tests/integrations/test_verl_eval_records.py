"""verl's validation metrics become eval.jsonl records. The sample lines are verl 0.9's own output: the keys and
values ``RayPPOTrainer._val_metrics_update`` returned for two sets of two problems with 4 samples each (math500:
1 and 2 correct of 4; aime24: 0 and 1) under our reward (acc, score, has_boxed), as the file logger writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ads_core.evaluation.evallog import read_evals
from ads_core.train.verl.valmetrics import copy_val_metrics, val_records

VALIDATION = {
    "val-aux/math500/score/mean@4": 0.375,
    "val-aux/math500/score/best@4/mean": 0.81,
    "val-core/math500/acc/mean@4": 0.375,
    "val-aux/math500/acc/std@4": 0.46650635094610965,
    "val-aux/math500/acc/best@2/mean": 0.606,
    "val-core/math500/acc/best@4/mean": 0.81,
    "val-core/math500/acc/best@4/std": 0.35686817538084087,
    "val-aux/math500/acc/worst@4/mean": 0.035500000000000004,
    "val-aux/math500/has_boxed/mean@4": 1.0,
    "val-aux/aime24/score/mean@4": 0.125,
    "val-core/aime24/acc/mean@4": 0.125,
    "val-aux/aime24/acc/std@4": 0.21650635094610965,
    "val-core/aime24/acc/best@4/mean": 0.3425,
    "val-core/aime24/acc/best@4/std": 0.23225793850803034,
    "val-aux/aime24/has_boxed/best@4/mean": 1.0,
}
TRAINING = {"critic/score/mean": 0.25, "ads/success_rate_mean": 0.3, "timing_s/step": 12.5, "training/global_step": 1}


def lines() -> list[dict]:
    return [
        {"step": 0, "data": VALIDATION},  # trainer.val_before_train
        {"step": 1, "data": TRAINING},
        {"step": 2, "data": {**TRAINING, **{k: v / 2 for k, v in VALIDATION.items()}}},
    ]


def test_verl_validation_lines_become_one_record_per_step_and_set():
    records = val_records(lines(), prompts_per_step=128, sizes={"math500": 2, "aime24": 2})
    assert [(r["step"], r["set"]) for r in records] == [(0, "math500"), (0, "aime24"), (2, "math500"), (2, "aime24")]
    first = records[0]
    assert first == {
        "step": 0,
        "set": "math500",
        "mean_at_k": 0.375,
        "pass_at_k": 0.81,  # verl's bootstrap best@4
        "maj_at_k": None,  # no `pred` from our reward: verl computes no majority vote
        "ci_low": None,
        "ci_high": None,
        "k": 4,
        "n": 2,
        "prompts_rolled_out": 0,
    }
    assert records[3]["mean_at_k"] == 0.0625 and records[3]["prompts_rolled_out"] == 256


def test_a_reward_without_acc_is_read_from_reward_and_training_lines_give_nothing():
    line = {"step": 3, "data": {"val-core/gsm8k/reward/mean@1": 0.5, "val-aux/gsm8k/reward/std@1": 0.0}}
    (record,) = val_records([line, {"step": 4, "data": TRAINING}, {"oops": 1}], prompts_per_step=8)
    assert (record["set"], record["mean_at_k"], record["pass_at_k"], record["k"], record["n"]) == (
        "gsm8k",
        0.5,
        0.5,
        1,
        0,
    )


def test_copying_twice_keeps_one_record_per_step_and_set(tmp_path: Path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines()) + '{"step": 4, "da')  # a torn last line
    eval_file = tmp_path / "eval.jsonl"
    assert copy_val_metrics(metrics, eval_file, prompts_per_step=8) == 4
    assert copy_val_metrics(metrics, eval_file, prompts_per_step=8) == 4  # verl's file again (a resumed run)
    assert [(r["step"], r["set"]) for r in read_evals(eval_file)] == [
        (0, "math500"),
        (0, "aime24"),
        (2, "math500"),
        (2, "aime24"),
    ]
    assert read_evals(eval_file)[2]["mean_at_k"] == pytest.approx(0.1875)


def test_verl_validates_the_same_sets_with_k_and_ads_evals_sampling(final_artifact: Path, tmp_path: Path):
    """The plan's overrides: val_kwargs.n = k (16 by default: verl runs on GPUs), ads eval's temperature and
    top-p, test_freq and val_before_train from the validation section; --eval-limit N validates on a copy of
    each set's first N rows."""
    import pyarrow.parquet as pq

    from ads_core.train.options import TrainConfig
    from ads_core.train.plan import plan_training
    from ads_core.train.verl.plan import plan_verl

    def overrides(validation: dict, materialize: bool = False) -> tuple[list[str], list[str]]:
        cfg = TrainConfig(
            trainer="verl", steps=10, run_dir=str(tmp_path / "run"), eval_sets=["aime24"], validation=validation
        )
        plan = plan_training(str(final_artifact), cfg, materialize=materialize)
        part = plan_verl(plan, materialize=materialize, resolve_config=False)
        return part.overrides, part.val_files

    plain, val_files = overrides({})
    assert "actor_rollout_ref.rollout.val_kwargs.n=16" in plain and "trainer.test_freq=25" in plain
    assert "actor_rollout_ref.rollout.val_kwargs.temperature=0.6" in plain
    assert "actor_rollout_ref.rollout.val_kwargs.top_p=0.95" in plain and "trainer.val_before_train=true" in plain
    assert val_files[0].endswith("aime24.parquet") and "first" not in val_files[0]
    quick, val_files = overrides({"steps": 0, "k": 4, "limit": 3, "before_train": False}, materialize=True)
    assert "actor_rollout_ref.rollout.val_kwargs.n=4" in quick and "trainer.test_freq=10" in quick  # the last only
    assert "trainer.val_before_train=false" in quick
    assert pq.read_table(val_files[0]).num_rows == 3 and Path(val_files[0]).parent.name == "first3"
