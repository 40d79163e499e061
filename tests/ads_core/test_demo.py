"""`ads demo`'s parts that need no training: the task generator (seeded, disjoint, correct), its limits, the
smoke preset, and the run settings (ADS and uniform differ only in the sampler). The whole chain runs in
tests/flows/test_ads_demo.py."""

from __future__ import annotations

import math
import re

import pytest
from pydantic import ValidationError

from ads_lab.config.demo import STUDY_FAMILIES, DemoConfig, DemoTaskConfig
from ads_lab.demo import runs
from ads_lab.demo.task import FAMILIES, LEVELS, make_task


def _answer(question: str) -> int:
    numbers = [int(x) for x in re.findall(r"\d+", question)]
    if "minus" in question:
        return max(numbers) - min(numbers)
    if "*" in question:
        return math.prod(numbers)
    if "largest" in question:
        return max(numbers)
    if "smallest" in question:
        return min(numbers)
    return sum(numbers)


def test_the_task_is_seeded_disjoint_and_correct():
    spec = DemoTaskConfig(seed=3, train_per_cell=20, test_per_cell=10, warmup_per_cell=5)
    a, b = make_task(spec), make_task(spec)
    assert a == b  # everything from the seed
    questions = [{p.question for p in split} for split in (a.train, a.test, a.warmup)]
    assert not (questions[0] & questions[1]) and not (questions[2] & (questions[0] | questions[1]))
    assert len(a.train) == 20 * 12 and len(questions[0]) == len(a.train) and len(a.test) == 10 * 12
    for family in spec.families:
        for level in LEVELS:
            assert sum(p.family == family and p.level == level for p in a.train) == 20
    every = make_task(spec.replaced(families=STUDY_FAMILIES))  # the study's five families
    assert {p.family for p in every.train} == set(STUDY_FAMILIES) == {"max", "min", "sum", "range", "product"}
    assert set(STUDY_FAMILIES) < set(FAMILIES)  # Experiment 2's families come on top
    for p in a.train + a.test + a.warmup + every.train + every.test:
        assert p.answer == _answer(p.question) and p.solution == f"\\boxed{{{p.answer}}}"
    assert make_task(DemoTaskConfig(seed=4, train_per_cell=20, test_per_cell=10)).test != a.test
    # the held-out set is drawn first: it does not depend on the train set's size
    assert make_task(spec.replaced(train_per_cell=5)).test == a.test


def test_too_many_problems_for_a_level_is_an_error():
    with pytest.raises(ValueError, match="level 1: fewer than"):
        make_task(DemoTaskConfig(train_per_cell=80, test_per_cell=30))  # 110 > the 100 two-operand questions
    with pytest.raises(ValidationError, match="train_per_cell"):
        DemoTaskConfig(train_per_cell=0)


def test_smoke_shrinks_everything_and_the_defaults_stay():
    cfg = DemoConfig(out="x", seeds=3, smoke=True)
    small = cfg.effective()
    assert (small.seeds, small.steps, small.out) == (1, 4, "x")
    assert small.task.train_per_cell < cfg.task.train_per_cell and small.policy.warmup_steps < cfg.policy.warmup_steps
    assert DemoConfig().effective() == DemoConfig()


def test_ads_and_uniform_runs_differ_only_in_the_sampler(tmp_path):
    cfg = DemoConfig(out=str(tmp_path))
    a = runs.train_config(cfg, "ads", 1, "policy", "heldout.parquet").model_dump()
    u = runs.train_config(cfg, "uniform", 1, "policy", "heldout.parquet").model_dump()
    assert a["sampler"]["kind"] == "ads" and u["sampler"]["kind"] == "uniform"
    assert a["sampler"]["ads"]["seed"] == 1 and u["sampler"]["uniform"]["seed"] == 1
    for key in ("sampler", "run_dir"):
        a.pop(key), u.pop(key)
    assert a == u and a["trl"]["seed"] == 1 and a["steps"] == cfg.steps
    assert a["validation"] == {"steps": cfg.eval_every, "limit": 0, "k": cfg.eval_k, "before_train": True}


def test_demo_help_shows_the_defaults_that_run_not_the_nested_sections_own():
    """Regression: `ads demo --help` said --train-per-cell defaulted to 60 (DemoTaskConfig's) while the demo ran 12
    (DemoConfig.task's)."""
    from typer.testing import CliRunner

    from ads_cli.main import app

    result = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "--train-per-cell" in x)
    assert f"(default: {DemoConfig().task.train_per_cell})" in line and "(default: 60)" not in line
