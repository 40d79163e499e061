"""`ads compare` and `eval.jsonl` on runs written by the test (literal steps, rollouts and accuracies), so every
ratio is known: steps and prompts to the baseline's final accuracy, ">=" / "not reached" / "n/a", the average over
the shared sets, resume-safe eval.jsonl writes, and the command's outputs and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ads_core.common.errors import InputError
from ads_core.evaluation.compare import AVERAGE, bootstrap_interval, load_run, ratio_text, summarize
from ads_core.evaluation.compare_report import write_comparison
from ads_core.evaluation.evallog import append_evals, eval_records, keep_evals_up_to, read_evals


def write_run(folder: Path, per_step: list[int], curve: dict[str, dict[int, float]], informative: int = 4) -> Path:
    """A run folder: steps.jsonl with each step's prompts rolled out, eval.jsonl with the accuracies given."""
    folder.mkdir(parents=True)
    with open(folder / "steps.jsonl", "w") as f:
        for i, prompts in enumerate(per_step, start=1):
            record = {"step": i, "rollout_prompts": prompts, "informative_groups": informative, "seconds": 1.5}
            f.write(json.dumps(record) + "\n")
    cumulative = {0: 0}
    for i, prompts in enumerate(per_step, start=1):
        cumulative[i] = cumulative[i - 1] + prompts
    for name, points in curve.items():
        for step, acc in points.items():
            metrics = {"mean_at_k": acc, "pass_at_k": acc, "maj_at_k": acc, "k": 2, "n": 8, "ci_low": acc - 0.1}
            append_evals(
                folder / "eval.jsonl", eval_records(step, {name: metrics | {"ci_high": acc + 0.1}}, cumulative[step])
            )
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    return {
        # the baseline: 0.2 -> 0.5 on math500 at step 4 (32 prompts); 0.1 -> 0.3 on aime24
        "uniform": write_run(
            tmp_path / "uniform", [8] * 4, {"math500": {0: 0.2, 2: 0.3, 4: 0.5}, "aime24": {0: 0.1, 2: 0.1, 4: 0.3}}
        ),
        # reaches 0.5 at step 2 (16 prompts): steps 0.5, prompts 0.5
        "ads": write_run(
            tmp_path / "ads", [8] * 4, {"math500": {0: 0.2, 2: 0.5, 4: 0.6}, "aime24": {0: 0.1, 2: 0.3, 4: 0.3}}
        ),
        # dynamic sampling: 16 prompts a step; reaches at step 2 with 32 prompts: steps 0.5, prompts 1.0
        "dynamic": write_run(
            tmp_path / "dynamic", [16] * 4, {"math500": {0: 0.2, 2: 0.55, 4: 0.5}, "aime24": {0: 0.1, 2: 0.4, 4: 0.2}}
        ),
        # never reaches the baseline's 0.5
        "stuck": write_run(
            tmp_path / "stuck", [8] * 4, {"math500": {0: 0.2, 2: 0.3, 4: 0.4}, "aime24": {0: 0.1, 2: 0.1, 4: 0.1}}
        ),
    }


def test_steps_and_prompts_to_the_first_runs_final_accuracy(runs):
    groups = {name: [load_run(str(path))] for name, path in runs.items()}
    rows = {r["name"]: r for r in summarize(groups, "math500")}
    assert rows["uniform"]["target"] == 0.5 and rows["uniform"]["step_ratio"] == 1.0
    assert (rows["ads"]["step_ratio"], rows["ads"]["rollout_ratio"], rows["ads"]["steps_mean"]) == (0.5, 0.5, 2)
    assert (rows["dynamic"]["step_ratio"], rows["dynamic"]["rollout_ratio"]) == (0.5, 1.0)
    assert rows["dynamic"]["final_mean"] == 0.5 and rows["dynamic"]["prompts_per_step"] == 16.0
    assert rows["stuck"]["reached"] == 0 and ratio_text(rows["stuck"], "step_ratio") == "not reached"
    assert (rows["ads"]["ci_low"], rows["ads"]["ci_high"]) == pytest.approx((0.5, 0.7))  # the final record's
    assert rows["ads"]["informative_share"] == 16 / 32 and rows["ads"]["seconds"] == 6.0
    assert rows["ads"]["time_ratio"] == 0.5  # 3.0 s to the target against uniform's 6.0 s
    # the average of the two sets: uniform 0.15 -> 0.2 -> 0.4; ads reaches 0.4 at step 2, dynamic too (0.475)
    avg = {r["name"]: r for r in summarize(groups, AVERAGE)}
    assert avg["uniform"]["target"] == pytest.approx(0.4)
    assert avg["ads"]["step_ratio"] == 0.5 and avg["dynamic"]["rollout_ratio"] == 1.0
    assert avg["dynamic"]["final_mean"] == pytest.approx(0.35) and avg["ads"]["ci_low"] is None


def test_seeds_mean_ratios_and_a_seed_that_never_reaches_counts_as_its_whole_run(runs, tmp_path: Path):
    base = [load_run(str(runs["uniform"])), load_run(str(runs["uniform"]))]
    mixed = [load_run(str(runs["ads"])), load_run(str(runs["stuck"]))]  # seed 0 at step 2, seed 1 never (4 steps)
    (row,) = [r for r in summarize({"uniform": base, "mixed": mixed}, "math500") if r["name"] == "mixed"]
    assert row["reached"] == 1 and row["step_ratio"] == (0.5 + 1.0) / 2 and row["rollout_ratio"] == 0.75
    assert ratio_text(row, "step_ratio") == ">= 0.75" and row["final_sd"] == pytest.approx(0.1)
    # each seed's ratio is kept; two seeds give no interval (issue 53: a bootstrap over two is their range)
    assert row["step_ratio_per_seed"] == [0.5, 1.0] and row["rollout_ratio_per_seed"] == [0.5, 1.0]
    assert row["step_ratio_interval"] is None
    assert ratio_text(row, "step_ratio", interval=True) == ">= 0.75"


def test_the_bootstrap_interval_is_seeded_and_narrows_with_more_seeds():
    assert bootstrap_interval([0.7]) is None  # one seed: no spread to resample
    assert bootstrap_interval([0.4, 0.4, 0.4]) == pytest.approx((0.4, 0.4))
    few, many = bootstrap_interval([0.2, 0.6, 1.0]), bootstrap_interval([0.2, 0.6, 1.0] * 10)
    assert few == bootstrap_interval([0.2, 0.6, 1.0])  # the same seeds give the same interval
    assert 0.2 <= few[0] < 0.6 < few[1] <= 1.0
    assert few[0] < many[0] < 0.6 < many[1] < few[1]


def test_nothing_to_reach_when_the_baseline_ends_where_it_started(tmp_path: Path):
    flat = write_run(tmp_path / "flat", [8, 8], {"math500": {0: 0.3, 2: 0.3}})
    other = write_run(tmp_path / "other", [8, 8], {"math500": {0: 0.3, 2: 0.5}})
    rows = summarize({"flat": [load_run(str(flat))], "other": [load_run(str(other))]}, "math500")
    assert [ratio_text(r, "step_ratio") for r in rows] == ["n/a", "n/a"]


def test_eval_log_replaces_a_step_and_set_and_cuts_back_on_resume(tmp_path: Path):
    path = tmp_path / "eval.jsonl"
    m = {"mean_at_k": 0.25, "pass_at_k": 0.5, "maj_at_k": 0.25, "k": 2, "n": 8, "ci_low": 0.0, "ci_high": 0.5}
    append_evals(path, eval_records(0, {"a": m, "b": m}, 0))
    append_evals(path, eval_records(2, {"a": m, "b": m}, 16))
    append_evals(path, eval_records(2, {"a": m | {"mean_at_k": 0.75}}, 16))  # the same step again: replaced
    records = read_evals(path)
    assert [(r["step"], r["set"]) for r in records] == [(0, "a"), (0, "b"), (2, "b"), (2, "a")]
    assert records[-1]["mean_at_k"] == 0.75 and records[-1]["prompts_rolled_out"] == 16
    assert keep_evals_up_to(path, 1) == 2 and [r["step"] for r in read_evals(path)] == [0, 0]
    with open(path, "a") as f:
        f.write('{"step": 4, "set"')  # a torn line is no record
    assert len(read_evals(path)) == 2


def test_ads_compare_prints_both_runs_and_writes_its_plot(runs, tmp_path: Path, monkeypatch):
    from ads_cli.main import app

    monkeypatch.chdir(tmp_path)  # `uniform` and `ads` are found as names under ./ads-runs
    (tmp_path / "ads-runs").mkdir()
    for name in ("uniform", "ads"):
        runs[name].rename(tmp_path / "ads-runs" / name)
    about = {"sampler": "uniform", "trainer": "trl", "model": "org/policy", "seed": 7}
    (tmp_path / "ads-runs" / "uniform" / "run.json").write_text(json.dumps({"about": about, "trajectory": {}}))
    older = {"model": "/m/p", "trl.seed": 42, "sampler.kind": "ads", "sampler.ads.alpha": 0.3}  # before "about"
    (tmp_path / "ads-runs" / "ads" / "run.json").write_text(json.dumps({"trajectory": older}))
    result = CliRunner().invoke(app, ["compare", "uniform", "ads"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "ads-compare" / "uniform-vs-ads"
    assert (out / "compare.png").stat().st_size > 1000 and (out / "compare.md").read_text() in result.stdout
    doc = json.loads((out / "compare.json").read_text())
    assert doc["baseline"] == "uniform" and doc["sets"] == ["math500", "aime24"] and doc["headline"] == AVERAGE
    assert [r["step_ratio"] for r in doc["reach"]["math500"]] == [1.0, 0.5]
    assert "| ads | ads | trl | /m/p | 42 | 0.600 [0.500, 0.700] | 0.300 [0.200, 0.400] | 0.450 | 4 | 4 | 32 |" in (
        result.stdout
    )
    assert "| uniform | uniform | trl | org/policy | 7 | 0.500 [0.400, 0.600] |" in result.stdout
    assert [(r["sampler"], r["seed"]) for r in doc["runs"]] == [("uniform", 7), ("ads", 42)]

    bad = CliRunner().invoke(app, ["compare", "uniform", "nope"])
    assert bad.exit_code == 2 and "run nope: no folder nope and no run ads-runs/nope" in bad.output
    assert "Traceback" not in bad.output


def test_runs_without_validation_records_or_shared_sets_are_refused(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no validation records"):
        load_run(str(tmp_path / "empty"))
    a = write_run(tmp_path / "a", [8], {"math500": {1: 0.1}})
    b = write_run(tmp_path / "b", [8], {"aime24": {1: 0.1}})
    with pytest.raises(InputError, match="share no eval set"):
        write_comparison({"a": [load_run(str(a))], "b": [load_run(str(b))]}, tmp_path / "out")


def test_the_train_flow_shows_a_runs_validation_table_and_curve(runs):
    from ads_core.evaluation.compare_report import validation_report
    from ads_core.train.step_plot import plot_steps
    from ads_core.train.trl.steps import read_steps

    text, png = validation_report(runs["ads"])
    assert "| step | prompts rolled out | math500 | aime24 |" in text
    assert "| 2 | 16 | 0.500 [0.400, 0.600] | 0.300 [0.200, 0.400] |" in text and png.startswith(b"\x89PNG")
    assert validation_report(runs["ads"].parent) is None  # no eval.jsonl there
    steps = [s | {"reward_mean": 0.5, "success_mean": 0.5} for s in read_steps(runs["ads"] / "steps.jsonl")]
    with_eval = plot_steps(steps, evals=read_evals(runs["ads"] / "eval.jsonl"))
    assert with_eval.startswith(b"\x89PNG") and with_eval != plot_steps(steps)  # the validation lines are drawn


def test_a_verl_run_without_steps_jsonl_compares_on_its_records_alone(runs, tmp_path: Path):
    from ads_core.train.verl.valmetrics import copy_val_metrics

    folder = tmp_path / "verl-run"
    folder.mkdir()
    lines = [{"step": s, "data": {"val-core/math500/acc/mean@16": a}} for s, a in ((0, 0.2), (1, 0.5), (2, 0.7))]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    copy_val_metrics(folder / "metrics.jsonl", folder / "eval.jsonl", prompts_per_step=128)
    groups = {"uniform": [load_run(str(runs["uniform"]))], "verl": [load_run(str(folder))]}
    row = summarize(groups, "math500")[1]
    assert (row["step_ratio"], row["rollout_ratio"], row["informative_share"]) == (0.25, 128 / 32, None)
    result = write_comparison(groups, tmp_path / "out")
    assert "| verl | 0.700 | 1/1 | 1 | 0.25 | 4.00 | n/a | 128.0 | - | 0 |" in result["markdown"]  # no seconds logged


def test_wall_time_to_the_target_reads_each_steps_logged_seconds(runs, tmp_path: Path):
    """A run as fast per step as the baseline in steps but with cheaper steps (``step_seconds``, e.g. replay)."""
    faster = write_run(tmp_path / "rr", [8] * 4, {"math500": {0: 0.2, 2: 0.3, 4: 0.5}})
    lines = [json.loads(x) for x in (faster / "steps.jsonl").read_text().splitlines()]
    (faster / "steps.jsonl").write_text("".join(json.dumps(r | {"step_seconds": 0.75}) + "\n" for r in lines))
    groups = {"uniform": [load_run(str(runs["uniform"]))], "rr": [load_run(str(faster))]}
    rows = {r["name"]: r for r in summarize(groups, "math500")}
    assert (rows["rr"]["step_ratio"], rows["rr"]["time_ratio"], rows["rr"]["seconds"]) == (1.0, 0.5, 3.0)
    markdown = write_comparison(groups, tmp_path / "out")["markdown"]
    assert "| rr | 0.500 | 1/1 | 4 | 1.00 | 1.00 | 0.50 | 8.0 |" in markdown


def test_a_bad_record_is_one_line_naming_file_and_line(runs, tmp_path: Path):
    from ads_cli.main import app

    log = runs["ads"] / "eval.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = lines[1].replace('"mean_at_k": 0.1', '"mean_at_k": "abc"')
    log.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["compare", str(runs["uniform"]), str(runs["ads"]), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.strip() == f'error: {log}:2: mean_at_k is "abc", not a number; fix or delete the line'


def test_nan_and_unfinished_runs_are_flagged_with_the_step_of_each_final_figure(runs, tmp_path: Path):
    log = runs["ads"] / "eval.jsonl"
    lines = log.read_text().splitlines()
    assert '"step": 4' in lines[-1] and '"set": "aime24"' in lines[-1]
    lines[-1] = lines[-1].replace('"mean_at_k": 0.3', '"mean_at_k": NaN')
    log.write_text("\n".join(lines) + "\n")
    short = write_run(tmp_path / "short", [8] * 4, {"math500": {0: 0.2, 1: 0.25}, "aime24": {0: 0.1, 1: 0.1}})
    groups = {name: [load_run(str(folder))] for name, folder in (("uniform", runs["uniform"]), ("ads", runs["ads"]))}
    groups["short"] = [load_run(str(short))]
    result = write_comparison(groups, tmp_path / "out")
    assert [r["final_step"] for r in result["runs"]] == [4, 4, 1]
    assert result["notes"] == [
        f"{log}:6: mean_at_k of aime24 at step 4 is nan: left out",
        "short: last evaluated at step 1 (step 4 reached elsewhere): unfinished? its final figures are those of step 1",
    ]
    text = result["markdown"]
    assert "| 0.250 [0.150, 0.350] | 0.100 [0.000, 0.200] | 0.175 | 1 | 4 | 32 |" in text  # short's row
    assert "note: short: last evaluated at step 1" in text
    assert "nan" not in text.split("note:")[0].lower()  # the NaN record is left out, the one before stands in
