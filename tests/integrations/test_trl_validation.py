"""Validation during a real TRL run (tiny policy, 8 prompts x 2 completions of 8 tokens per step): eval.jsonl gets
one record per due step (0, every validation.steps, the last) for the packaged MATH-500 (8 problems, k 2), with the
prompts rolled out so far; a resumed run keeps the records up to its checkpoint, drops those after it (a killed
run's) and evaluates the rest; the `ads train` flags reach the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("trl")

from ads_core.evaluation.evallog import append_evals, eval_records, read_evals  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402


def test_validation_records_at_the_due_steps_and_a_resume_keeps_exactly_them(
    final_artifact: Path, trl_helpers, tmp_path: Path
):
    run_dir = tmp_path / "run"
    cfg = TrainConfig(
        trainer="trl",
        steps=2,
        run_dir=str(run_dir),
        eval_sets=["math500"],  # packaged: written into the run folder with the training template
        validation={"steps": 2, "limit": 8, "k": 2},
        trl={"num_generations": 2, "max_completion_length": 8, "save_steps": 1},
    )
    first = train(str(final_artifact), cfg, score=trl_helpers.score)
    assert (run_dir / "data" / "eval" / "math500.parquet").is_file()
    records = read_evals(run_dir / "eval.jsonl")
    assert [(r["step"], r["set"]) for r in records] == [(0, "math500"), (2, "math500")]
    for r in records:
        assert r["k"] == 2 and r["n"] == 8 and r["ci_low"] is None is r["ci_high"]  # 8 problems: no interval
        assert 0.0 <= r["mean_at_k"] <= r["pass_at_k"] <= 1.0
        assert r["prompts_rolled_out"] == sum(s["rollout_prompts"] for s in first.steps if s["step"] <= r["step"])
    assert records[1]["prompts_rolled_out"] == 16  # 8 prompts per step

    # a killed run had evaluated step 3 after its last complete checkpoint (2): the resumed run drops that record
    path = run_dir / "eval.jsonl"
    stale = {"mean_at_k": 0.5, "pass_at_k": 0.5, "maj_at_k": 0.5, "k": 2, "n": 8, "ci_low": 0.0, "ci_high": 1.0}
    append_evals(path, eval_records(3, {"math500": stale}, 24))
    second = train(str(final_artifact), cfg.replaced(steps=4), score=trl_helpers.score)
    assert second.resumed_from == 2
    again = read_evals(path)
    assert [(r["step"], r["set"]) for r in again] == [(0, "math500"), (2, "math500"), (4, "math500")]
    assert again[:2] == records  # kept as they were, not evaluated twice
    assert again[2]["prompts_rolled_out"] == 32


def test_the_train_flags_set_the_validation_section(final_artifact: Path, tmp_path: Path):
    from ads_cli.main import app

    args = ["train", str(final_artifact), "--trainer", "trl", "--dry-run", "--run-dir", str(tmp_path / "r")]
    args += ["--steps", "4", "--eval-steps", "2", "--eval-set", "math500", "--eval-limit", "8", "--eval-k", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "does not evaluate" not in result.output
    import yaml

    resolved = yaml.safe_load(result.stdout.split("\n# ")[0])
    assert resolved["eval_sets"] == ["math500"]
    assert resolved["validation"] == {"steps": 2, "limit": 8, "k": 3, "before_train": True}
    assert not (tmp_path / "r").exists()  # a dry run writes nothing (the packaged set went to a temporary folder)
    assert json.dumps(resolved)  # plain data
