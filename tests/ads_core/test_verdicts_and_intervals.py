"""Issue 53, "no verdict the data cannot carry": `ads compare` names a winner by the one paired rule
(`ads_core.evaluation.paired`: at least 5 paired seeds and a t-interval excluding 0), its ratio intervals need as
many seeds, and `ads eval` gives an interval only where the number of problems allows one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ads_core.evaluation import metrics
from ads_core.evaluation.compare import load_groups
from ads_core.evaluation.compare_report import write_comparison


def write_run(folder: Path, final: float, seed: int, sampler: str) -> str:
    """A run of 2 steps validated at steps 0 and 2 on math500 (0.2, then FINAL), with its seed in run.json."""
    folder.mkdir(parents=True)
    steps = [{"step": s, "rollout_prompts": 8, "informative_groups": 4, "seconds": 1.0} for s in (1, 2)]
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    evals = [
        {"step": s, "set": "math500", "mean_at_k": a, "pass_at_k": a, "maj_at_k": a, "k": 2, "n": 50}
        | {"ci_low": None, "ci_high": None, "prompts_rolled_out": 8 * s}
        for s, a in ((0, 0.2), (2, final))
    ]
    (folder / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    about = {"sampler": sampler, "trainer": "trl", "model": "m", "seed": seed}
    (folder / "run.json").write_text(json.dumps({"about": about, "trajectory": {}}))
    return str(folder)


def groups_of(tmp_path: Path, seeds: int, gain: float) -> list[str]:
    """uniform and ads groups over SEEDS seeds; ads ends GAIN higher in every seed (seed-to-seed spread 0.01)."""
    refs = []
    for sampler, extra in (("uniform", 0.0), ("ads", gain)):
        folders = [
            write_run(
                tmp_path / f"{sampler}-{seed}",
                0.3 + 0.01 * (seed % 3) + extra + 0.002 * seed * (extra > 0),
                seed,
                sampler,
            )
            for seed in reversed(range(seeds))  # given out of order: paired by the seed run.json records
        ]
        refs.append(f"{sampler}={','.join(folders)}")
    return refs


def test_compare_of_two_seeds_names_no_winner_however_large_the_gap(tmp_path: Path):
    """Regression: two seeds on one side of zero were called a win (a bootstrap over two values is their range)."""
    groups = load_groups(groups_of(tmp_path, 2, 0.05))
    assert [r.about["seed"] for r in groups["ads"]] == [0, 1]
    result = write_comparison(groups, tmp_path / "out")
    verdict = result["verdicts"]["ads"]
    assert verdict["winner"] is None and verdict["n"] == 2
    assert verdict["text"] == (
        "no verdict at 2 seed(s): ads - uniform = +0.051; a verdict needs at least 5 paired seeds "
        "(rerun with more seeds)"
    )
    assert f"- {verdict['text']}" in result["markdown"] and "ended higher" not in result["markdown"]
    row = result["reach"]["math500"][1]
    assert row["step_ratio_interval"] is None  # no interval from two seeds either
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["verdicts"]["ads"]["winner"] is None


def test_compare_of_five_paired_seeds_names_the_winner_by_the_t_interval(tmp_path: Path):
    result = write_comparison(load_groups(groups_of(tmp_path, 5, 0.05)), tmp_path / "out")
    verdict = result["verdicts"]["ads"]
    assert verdict["winner"] == "ads"
    assert verdict["text"].startswith("ads ended higher: ads - uniform = +0.054, 95% t-interval [+0.")
    assert result["reach"]["math500"][1]["step_ratio_interval"] == (1.0, 1.0)  # five seeds: an interval


def test_ads_compare_with_single_runs_says_a_verdict_needs_paired_seeds(tmp_path: Path, monkeypatch):
    from ads_cli.main import app

    a = write_run(tmp_path / "a", 0.3, 0, "uniform")
    b = write_run(tmp_path / "b", 0.9, 0, "ads")
    result = CliRunner().invoke(app, ["compare", a, b, "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert "- no verdict at 1 seed(s): b - a = +0.600; a verdict needs at least 5 paired seeds" in result.stdout
    unequal = CliRunner().invoke(app, ["compare", f"u={a}", f"x={b},{a}", "--out", str(tmp_path / "c2")])
    assert unequal.exit_code == 0, unequal.output
    assert "no verdict: x has 2 run(s) and u 1; a verdict pairs one run per seed in each" in unequal.stdout
    bad = CliRunner().invoke(app, ["compare", "u=", b])
    assert bad.exit_code == 2 and "u=: a group is NAME=RUN,RUN,... (one run per seed)" in bad.output


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.0, 0.0], None),  # regression: `ads eval --limit 2` printed "95 % CI [0.0, 0.0]"
        ([0.5, 1.0, 0.0, 0.25] * 2, None),  # 8 problems: still too few
        ([0.0] * 10, (0.0, 1 - 0.025**0.1)),  # none solved: the exact bound, not [0, 0]
        ([1.0] * 20, (0.025**0.05, 1.0)),
    ],
)
def test_eval_intervals_only_where_the_number_of_problems_allows(scores, expected):
    got = metrics.problem_interval(scores)
    assert got == (pytest.approx(expected) if expected else None)


def test_an_eval_interval_from_enough_mixed_problems_is_the_seeded_bootstrap():
    scores = [0.0, 0.5, 1.0, 0.25] * 3
    low, high = metrics.problem_interval(scores)
    assert (low, high) == metrics.mean_interval(scores) and 0.0 < low < 0.4375 < high < 1.0
    flags = [([True, False], ["1", "2"]), ([False, False], [None, None])]
    summary = metrics.summarize_problems(flags, 2)
    assert (summary["ci_low"], summary["ci_high"]) == (None, None)


def test_the_eval_table_shows_no_interval_for_two_problems():
    from ads_core.evaluation.report import markdown_table

    two = {"mean_at_k": 0.0, "pass_at_k": 0.0, "maj_at_k": 0.0, "n": 2, "k": 2, "ci_low": None, "ci_high": None}
    summary = {"k": 2, "sets": {"amc23": two}, "overall": two, "template": {"name": "ads_think"}}
    text = markdown_table({"p": summary})
    assert "p amc23 none (fewer than 10 problems) (n=2)" in text and "[0.0, 0.0]" not in text
