"""`bench/grpo_curriculum.py`: its task generator (fast), and a smoke run of the whole benchmark at `--smoke` sizes
(the real pipeline builds the artifact, then 4 GRPO steps per sampler through TRL, validated on the held-out set
with `ads eval`'s code and reported with `ads compare`'s; no figure is checked, only that everything runs and the
report has its parts)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _answer(question: str) -> int:
    numbers = [int(x) for x in re.findall(r"\d+", question)]
    if "largest" in question:
        return max(numbers)
    if "smallest" in question:
        return min(numbers)
    return sum(numbers)


def test_the_task_is_seeded_disjoint_and_correct():
    task = _load("grpo_task")
    spec = task.TaskSpec(seed=3, train_per_cell=20, test_per_cell=10, warmup_per_cell=5)
    a, b = task.make_task(spec), task.make_task(spec)
    assert a == b  # everything from the seed
    questions = [{p.question for p in split} for split in (a.train, a.test, a.warmup)]
    assert not (questions[0] & questions[1]) and not (questions[2] & (questions[0] | questions[1]))
    assert len(a.train) == 20 * 12 and len(questions[0]) == len(a.train) and len(a.test) == 10 * 12
    for family in task.FAMILIES:
        for level in task.LEVELS:
            assert sum(p.family == family and p.level == level for p in a.train) == 20
    for p in a.train + a.test + a.warmup:
        assert p.answer == _answer(p.question) and p.solution == f"\\boxed{{{p.answer}}}"
    assert task.make_task(task.TaskSpec(seed=4, train_per_cell=20, test_per_cell=10)).test != a.test


def test_too_many_problems_for_a_level_is_an_error():
    task = _load("grpo_task")
    with pytest.raises(ValueError, match="level 1: fewer than"):
        task.make_task(task.TaskSpec(train_per_cell=80, test_per_cell=30))  # 110 > the 100 two-operand questions


@pytest.mark.slow  # the real build (tokenizer, warm-up, score, K-Means, report), 3 x 4 TRL steps: ~1 min on 2 cores
def test_a_quick_run_builds_trains_every_sampler_and_reports(tmp_path: Path, monkeypatch, capsys):
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    bench = _load("grpo_curriculum")
    out = tmp_path / "out"
    results = bench.main(["--smoke", "--out", str(out), "--samplers", "ads-frontier,dynamic", "--jobs", "1"])
    assert set(results["runs"]) == {"uniform", "ads-frontier", "dynamic"}  # uniform, the baseline, is always run
    for name, runs in results["runs"].items():
        (run,) = runs
        assert [p["step"] for p in run["curve"]] == [0, 2, 4]
        assert run["prompts_per_step"] == 8 and 0.0 <= run["curve"][-1]["accuracy"] <= 1.0
        rolled = run["rollout_prompts"]
        assert rolled == 4 * 8 if name != "dynamic" else 4 * 8 <= rolled <= 4 * 8 * 10
    assert (out / "build" / "final" / "train.parquet").is_file()  # built by the real pipeline
    assert (out / "grpo_curriculum.json").is_file() and (out / "compare.png").stat().st_size > 1000
    for name in results["runs"]:  # each run is a run folder `ads compare` reads, validated at 0, 2 and 4
        records = [
            json.loads(line) for line in (out / "runs" / f"{name}-seed0" / "eval.jsonl").read_text().splitlines()
        ]
        assert [(r["step"], r["set"], r["k"]) for r in records] == [(s, "heldout", 2) for s in (0, 2, 4)]
    printed = capsys.readouterr().out.strip().splitlines()
    assert any(
        line.startswith("Steps and prompts rolled out to reach uniform's final accuracy on heldout") for line in printed
    )
    assert json.loads((out / "compare.json").read_text())["baseline"] == "uniform"
    assert printed[-1].startswith("ads-frontier vs uniform: steps to uniform's final held-out accuracy = ")
    again = bench.main(["--smoke", "--out", str(out), "--samplers", "ads-frontier,dynamic", "--jobs", "1"])  # reused
    assert again["runs"] == results["runs"]
