"""Experiment 2's pieces that need no training (docs/experiment2.md): the worked-solution task, the oracle's
columns, the gates' rules, the pilot's rules, the analysis and the decision rule, with literal values."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from ads_core.evaluation.compare import RunData
from ads_lab.config import experiment2 as e2
from ads_lab.demo.task import make_problem, make_task
from ads_lab.studies import experiment2 as x2
from ads_lab.studies import experiment2_analysis as xa


def test_worked_solutions_are_one_step_per_operand_then_the_box():
    rng = random.Random(5)
    p = make_problem(rng, "sum", 3, worked=True)
    numbers = [int(t) for t in p.question.removeprefix("What is ").removesuffix("?").split(" + ")]
    assert len(numbers) == 4 and p.answer == sum(numbers)
    assert p.solution.count("=") == 3 and p.solution.endswith(f"\\boxed{{{p.answer}}}")
    assert make_problem(random.Random(1), "min", 1, worked=True).solution == "min(27,82)=27 \\boxed{27}"
    assert make_problem(random.Random(1), "lastdigit", 1, worked=True).solution == "2+9->1 \\boxed{1}"
    assert make_problem(random.Random(1), "sum", 1).solution == "\\boxed{11}"  # the first study's bare answer


def test_the_experiment_task_is_fresh_disjoint_and_worked():
    task = make_task(e2.task().replaced(train_per_cell=3, test_per_cell=2, warmup_per_cell=2))
    assert e2.TASK_SEED not in e2.USED_TASK_SEEDS
    assert len(task.train) == 3 * 4 * 5 and {p.family for p in task.train} == set(e2.FAMILIES)
    assert all(p.steps for p in task.train + task.test)
    assert not {p.question for p in task.train} & {p.question for p in task.test}


def test_oracle_columns_cluster_by_family_and_rank_by_level_then_task_order():
    families = ["sum", "max", "sum", "sum", "max"]
    levels = np.array([2, 1, 1, 2, 1])
    order = np.array([0, 4, 2, 1, 3])
    cluster, rank = x2.oracle_columns(families, levels, order)
    assert cluster.tolist() == [1, 0, 1, 1, 0]  # sorted family names: max 0, sum 1
    assert rank.tolist() == [1, 1, 0, 2, 0]  # sum: level 1 first, then level 2 by task order (row 3 before row 0)


def test_the_pass_gate_at_the_declared_size_and_at_a_smaller_one():
    cfg = e2.experiment2()
    gate = x2.pass_gate(cfg, 240)
    assert gate["reset_every"] == 30 and gate["passes"] == 2.0  # 60 steps x 8 prompts over 240 problems
    assert gate["build"] == {"clusters": 8, "visits_per_reset": 15.0, "positions_to_middle": 15.0}
    assert gate["oracle"] == {"clusters": 5, "visits_per_reset": 24.0, "positions_to_middle": 24.0}
    assert gate["ok"]
    assert not x2.pass_gate(cfg.replaced(steps=50), 240)["ok"]  # under two passes


def _problems(cells: dict[tuple[str, int], int]) -> list:
    return [
        SimpleNamespace(family=f, level=lv, solution="1+1=2 \\boxed{2}")
        for (f, lv), n in cells.items()
        for _ in range(n)
    ]


def test_gates_pass_and_fail_on_literal_start_regimes(tmp_path, monkeypatch):
    monkeypatch.setattr(x2, "validity", lambda uri, solved: {})
    cfg = e2.experiment2().replaced(task=e2.task().replaced(families=("sum", "bigproduct")))
    problems = _problems({("sum", 1): 2, ("sum", 4): 2, ("bigproduct", 1): 2})
    start = {"samples": 4, "per_problem": {"solved": [4, 3, 1, 0, 0, 0], "boxed": [4, 4, 4, 3, 4, 4]}}
    checked = x2.gates(cfg, start, "unused", problems)
    by = {g["gate"]: g for g in checked["gates"]}
    assert by["format"]["measured"] == {"sum": 15 / 16} and by["format"]["passed"]
    assert by["level"]["measured"]["sum"]["level1_minus_level4"] == 0.75 and by["level"]["passed"]
    assert by["out of reach"]["measured"] == {"bigproduct": 0.0} and by["out of reach"]["passed"]
    flat = {"samples": 4, "per_problem": {"solved": [2, 2, 2, 2, 0, 0], "boxed": [1, 1, 1, 1, 4, 4]}}
    failed = {g["gate"] for g in x2.gates(cfg, flat, "unused", problems)["gates"] if not g["passed"]}
    assert {"format", "level"} <= failed
    bare = [SimpleNamespace(family=p.family, level=p.level, solution="\\boxed{2}") for p in problems]
    assert not {g["gate"]: g for g in x2.gates(cfg, start, "unused", bare)["gates"]}["worked solutions"]["passed"]


def _run(name: str, accuracies: list[float], prompts: int = 8, seed: int = 0) -> RunData:
    evals = [
        {
            "step": 10 * i,
            "set": s,
            "mean_at_k": a if s != "heldout-c" else 0.0,
            "k": 4,
            "prompts_rolled_out": 10 * prompts * i,
        }
        for i, a in enumerate(accuracies)
        for s in ("heldout-a", "heldout-b", "heldout-c")  # c: the out-of-reach family
    ]
    steps = [
        {"step": i, "rows": [i % 4, (i + 1) % 4], "rollout_prompts": prompts, "cpu_seconds": 1.0, "dropped_groups": 1}
        for i in range(1, 10 * (len(accuracies) - 1) + 1)
    ]
    return RunData(name, "/nowhere", steps, evals, {"seed": seed, "code": {"commit": "abc", "dirty": False}})


def _groups(deltas: dict[str, list[float]]) -> dict[str, list[RunData]]:
    base = [0.3, 0.35, 0.4, 0.45, 0.5]
    groups = {"uniform": [_run(f"u{s}", [0.2, b]) for s, b in enumerate(base)]}
    for name, ds in deltas.items():
        groups[name] = [_run(f"{name}{s}", [0.2, b + d]) for s, (b, d) in enumerate(zip(base, ds, strict=True))]
    return groups


ROWS = {name: ["a", "a", "b", "c"] for name in ("uniform", "ads", "ads-oracle", "uniform+drop")}


def test_the_analysis_pairs_by_seed_and_the_decision_names_the_case():
    up, flat = [0.05, 0.06, 0.04, 0.05, 0.07], [0.01, -0.01, 0.02, -0.02, 0.0]
    result = xa.analyse(_groups({"ads": up, "ads-oracle": up}), ["a", "b", "c"], ["c"], 0.25, ROWS)
    primary = {c["candidate"]: c for c in result["comparisons"] if c["role"] == "primary"}
    assert primary["ads"]["winner"] == "ads" and primary["ads"]["level"] == 0.975
    assert result["decision"]["case"] == "ads wins" and result["decision"]["default"] == "ads"
    seeds = result["arms"]["uniform"]["seeds"]
    assert seeds[0]["final"] == pytest.approx(0.3) and seeds[0]["reach"] == {
        "reached": True,
        "step": 10,
        "prompts": 80,
        "cpu_seconds": 10.0,
    }
    assert seeds[0]["unreachable_share"] == 0.25 and seeds[0]["distinct_problems"] == 4
    front = xa.analyse(_groups({"ads": flat, "ads-oracle": up}), ["a", "b", "c"], ["c"], None, ROWS)
    assert front["decision"]["case"] == "front end" and front["decision"]["default"] == "uniform"
    neither = xa.analyse(_groups({"ads": flat, "ads-oracle": flat}), ["a", "b", "c"], ["c"], None, ROWS)
    assert neither["decision"]["case"] == "neither"
    drop = xa.analyse(_groups({"ads": up, "uniform+drop": up}), ["a", "b", "c"], ["c"], None, ROWS)
    assert drop["decision"]["case"] == "drop" and drop["decision"]["default"] == "uniform"


def test_the_per_seed_file_has_one_line_per_run_with_its_code_version():
    result = xa.analyse(_groups({"ads": [0.0] * 5}), ["a", "b", "c"], ["c"], None, ROWS)
    lines = xa.per_seed_csv(result).splitlines()
    assert lines[0].startswith("arm,seed,run,final_learnable,") and lines[0].endswith("heldout-a,heldout-b,heldout-c")
    assert len(lines) == 1 + 10 and lines[1].split(",")[:4] == ["uniform", "0", "u0", "0.300000"]
    assert ",abc,False," in lines[1]


def test_auc_is_over_the_common_span_whatever_each_run_rolled_out():
    short, long = _run("s", [0.2, 0.4], prompts=8), _run("l", [0.2, 0.4], prompts=16)  # 80 vs 160 prompts
    assert xa.auc(short, ["heldout-a"], 80) == pytest.approx(0.3)
    assert xa.auc(long, ["heldout-a"], 80) == pytest.approx(0.25)  # at 80 prompts it is halfway to 0.4


def test_pilot_rules_apply_the_declared_formulas():
    deltas = [0.02, -0.02, 0.04, 0.0, 0.01]
    groups = _groups({"ads": deltas, "ads-oracle": [0.0] * 5})
    rules = x2.pilot_rules(groups, ["heldout-a", "heldout-b"], 4, [100.0] * 15)
    sd = float(np.std(deltas, ddof=1)) * 1.3
    assert rules["seeds_needed"] == int(np.ceil((2.241403 * sd / 0.03) ** 2))
    assert rules["seeds_budget"] == (108 - 15 - len(e2.SWEEP) * len(e2.SWEEP_SEEDS)) // len(e2.ARMS)
    assert rules["seeds"] == max(10, min(rules["seeds_needed"], rules["seeds_budget"]))
    assert rules["easiest_share"] == 1.0  # the fake runs drew every row
    assert rules["accuracy_target"] == pytest.approx(0.2 + 0.5 * (0.4 - 0.2))
