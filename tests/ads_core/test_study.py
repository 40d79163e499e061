"""The study's parts that need no training (docs/study.md): its task, its declared seeds and passes, the start
regime's shares, the paired analysis (verdict, power, decision rule) on hand-made runs, and the window traces.
The whole chain at --smoke size runs in tests/bench/test_study.py."""

from __future__ import annotations

import math

from ads_core.evaluation.compare import RunData
from ads_lab.config.demo import DemoTaskConfig
from ads_lab.config.study import PILOT_SEEDS, REPORTED_SEEDS, StudyConfig
from ads_lab.demo.task import Problem, make_task
from ads_lab.studies.start import start_shares
from ads_lab.studies.study import safe, with_seed
from ads_lab.studies.study_analysis import analyse, decide, paired_verdict, results_table, seeds_needed
from ads_lab.studies.study_plots import window_trace, write_window_traces


def test_the_demo_task_is_unchanged_and_the_study_task_adds_two_families():
    earlier = DemoTaskConfig(families=("max", "min", "sum"), train_per_cell=60, test_per_cell=25)
    demo = make_task(earlier)  # the demo's earlier task: the same problems as before the study's families
    assert demo.train[0].question == "What is the largest of 2, 6, 7, 8?" and len(demo.warmup) == 2718
    cfg = StudyConfig()
    task = make_task(cfg.task)
    assert (len(task.train), len(task.test)) == (320, 300)
    assert {p.family for p in task.train} == {"max", "min", "sum", "range", "product"}
    products = [p for p in task.train if p.family == "product"]
    assert products[0].question == "What is 5 * 5 * 2?" and products[0].answer == 50
    assert all(math.prod(int(x) for x in p.question[8:-1].split(" * ")) == p.answer for p in products)
    ranges = [p for p in task.train if p.family == "range"]
    assert (ranges[0].question, ranges[0].answer) == ("What is the largest minus the smallest of 4, 6, 8?", 4)


def test_the_declared_size_is_two_passes_and_the_seeds_are_disjoint():
    cfg = StudyConfig()
    assert cfg.steps * 8 == 2 * 320  # 8 prompts per step (4 clusters x 2 rows on a CPU)
    assert cfg.seeds == tuple(range(1000, 1016)) and not set(REPORTED_SEEDS) & set(PILOT_SEEDS)
    assert cfg.pilot().seeds == (900, 901, 902, 903) and cfg.pilot().samplers == ("uniform", "ads", "ads-frontier")
    assert cfg.smoke().steps == 2 and cfg.smoke().seeds == (1000, 1001)
    assert with_seed({"kind": "ads", "ads": {"window": "frontier"}}, 7) == {
        "kind": "ads",
        "ads": {"window": "frontier", "seed": 7},
    }
    assert safe("dots+rr") == "dots-rr"


def test_start_shares_count_never_always_and_informative():
    problems = [Problem(f, 1, f"q{i}", 1) for i, f in enumerate(["max", "max", "max", "sum", "sum"])]
    found = start_shares(problems, [0, 8, 3, 0, 0], samples=8)
    assert found["all"] == {"n": 5, "never": 0.6, "always": 0.2, "informative": 0.2, "mean": 11 / 40}
    assert found["family"]["max"]["never"] == 1 / 3 and found["family"]["sum"]["never"] == 1.0
    assert found["cell"]["sum-L1"]["n"] == 2


def test_the_verdict_names_a_winner_only_when_the_t_interval_excludes_zero_over_five_seeds():
    higher = paired_verdict("ads", "uniform", [0.02, 0.03, 0.04, 0.05, 0.06])
    assert higher["winner"] == "ads" and higher["text"].startswith("ads ended higher: ads - uniform = +0.040, 95% t")
    mixed = paired_verdict("ads", "uniform", [0.05, -0.04, 0.03, -0.02, 0.01])
    assert mixed["winner"] is None and mixed["text"].startswith("no resolved difference at this size: ")
    assert mixed["interval"][0] < 0 < mixed["interval"][1]
    lower = paired_verdict("ads", "uniform", [-0.02, -0.03, -0.01, -0.04, -0.03])
    assert lower["winner"] == "uniform"
    four = paired_verdict("ads", "uniform", [0.02, 0.03, 0.04, 0.05])  # regression: 2 seeds named a winner
    assert four["winner"] is None and "needs at least 5 paired seeds" in four["text"]
    assert paired_verdict("ads", "uniform", [0.1])["winner"] is None  # one seed: no interval, no winner


def test_seeds_needed_for_a_half_width_of_two_points():
    assert seeds_needed(0.03) == 12 and seeds_needed(0.05) == 32  # the numbers docs/study.md quotes
    assert seeds_needed(0.03, level=0.95) == 9


def _run(name: str, accuracies: list[float], window: list[float] | None = None) -> RunData:
    evals = [
        {"step": 10 * i, "set": s, "mean_at_k": a, "k": 4, "prompts_rolled_out": 80 * i}
        for i, a in enumerate(accuracies)
        for s in ("heldout-a", "heldout-b")
    ]
    steps = [
        {"step": i, "rollout_prompts": 8, "informative_groups": 4, "seconds": 1.0}
        | ({"metrics": {"ads/window_frac/0": w, "ads/window_frac/1": 1 - w}} if window else {})
        for i, w in enumerate(window or [0.0] * 20, start=1)
    ]
    return RunData(name, "/nowhere", steps, evals)


def test_analysis_pairs_by_seed_and_applies_the_decision_rule(tmp_path):
    uniform = [_run(f"u{s}", [0.2, 0.3, 0.4]) for s in range(5)]
    ads = [_run(f"a{s}", [0.2, 0.35, 0.4 + d]) for s, d in enumerate([0.02, 0.03, 0.04, 0.05, 0.035])]
    frontier = [_run(f"f{s}", [0.2, 0.3, 0.4 + d]) for s, d in enumerate([0.01, -0.01, 0.02, -0.02, 0.0])]
    result = analyse({"uniform": uniform, "ads": ads, "ads-frontier": frontier}, "average")
    rows = {r["name"]: r for r in result["rows"]}
    assert math.isclose(rows["ads"]["paired"]["mean"], 0.035) and rows["ads"]["paired"]["level"] == 0.975
    assert rows["ads"]["paired"]["winner"] == "ads" and rows["ads-frontier"]["paired"]["winner"] is None
    assert rows["ads"]["reach"]["step_ratio"] == 1.0  # ads reached 0.4 at step 20 as uniform did
    assert result["decision"] == "recommend ads: its paired interval against uniform lies above 0"
    assert decide([r for r in result["rows"] if r["name"] != "ads"]).startswith("no advantage of ADS")
    assert math.isclose(rows["uniform"]["auc_mean"], (0.25 * 80 + 0.35 * 80) / 160)
    assert result["uniform_learns"] and result["uniform_gain"].startswith("final ended higher: final - step 0 = +0.200")
    flat = [_run(f"u{s}", [0.3, 0.3, 0.3 + d]) for s, d in enumerate([0.01, -0.02, 0.0, -0.01, 0.02])]
    assert not analyse({"uniform": flat, "ads": ads}, "average")["uniform_learns"]  # the pilot's gate fails


def test_window_traces_are_read_from_steps_jsonl_and_drawn(tmp_path):
    run = _run("a0", [0.2, 0.3], window=[0.0, 0.25, 0.5])
    assert window_trace(run) == {"0": [(1, 0.0), (2, 0.25), (3, 0.5)], "1": [(1, 1.0), (2, 0.75), (3, 0.5)]}
    paths = write_window_traces({"uniform": [_run("u0", [0.2, 0.3])], "ads": [run]}, tmp_path)
    assert (tmp_path / "window_traces.png").stat().st_size > 1000
    lines = (tmp_path / "window_traces.csv").read_text().splitlines()
    assert lines[0] == "sampler,run,cluster,step,window_frac" and lines[1] == "ads,a0,0,1,0.0" and len(lines) == 7
    assert set(paths) == {"csv", "png"}


def test_a_section_trl_entry_goes_to_the_trainer_and_the_predictor_is_keyed_by_name(tmp_path):
    from ads_lab.studies.study import run_key, train_config

    cfg = StudyConfig(out=str(tmp_path))
    section = {"kind": "dots", "dots": {"predictor": "/a/dots-predictor"}, "trl": {"replay": True}}
    run = train_config(cfg, "dots+rr", section, 1000, "policy", {"heldout-max": "x.parquet"})
    assert run.sampler.kind == "dots" and run.trl.replay is True and run.trl.temperature == cfg.temperature
    plain = train_config(cfg, "dots", {"kind": "dots"}, 1000, "policy", {"heldout-max": "x.parquet"})
    assert plain.trl.replay is False
    moved = {**section, "dots": {"predictor": "/b/dots-predictor"}}
    assert run_key(cfg, "dots+rr", section, 1000, "/x/train.parquet") == run_key(
        cfg, "dots+rr", moved, 1000, "/y/train.parquet"
    )
    assert run_key(cfg, "dots+rr", section, 1000, "a") != run_key(cfg, "dots+rr", {"kind": "dots"}, 1000, "a")


def test_with_predictor_trains_once_and_sets_it_only_where_a_dots_section_has_none(tmp_path, monkeypatch):
    import ads_lab.studies.predictor as predictor
    from ads_lab.studies.study import with_predictor

    calls = []

    def fake_prepare(out, task, policy, artifact, embed, g, tokens, temperature, log=print):
        calls.append((artifact, embed, g, tokens, temperature))
        return out / predictor.PREDICTOR_DIR

    monkeypatch.setattr(predictor, "prepare_predictor", fake_prepare)
    cfg = StudyConfig(out=str(tmp_path))
    sections = {
        "uniform": {"kind": "uniform"},
        "dots": {"kind": "dots"},
        "dots+rr": {"kind": "dots", "trl": {"replay": True}},
        "given": {"kind": "dots", "dots": {"predictor": "/mine"}},
    }
    out = with_predictor(cfg, sections, "art.parquet", "policy")
    folder = str((tmp_path / "dots-predictor").resolve())
    assert calls == [("art.parquet", "policy", 8, 12, cfg.temperature)]  # once, with the study's G and temperature
    assert out["dots"]["dots"]["predictor"] == folder and out["dots+rr"]["dots"]["predictor"] == folder
    assert out["dots+rr"]["trl"] == {"replay": True} and out["given"]["dots"]["predictor"] == "/mine"
    assert out["uniform"] == {"kind": "uniform"} and sections["dots"] == {"kind": "dots"}  # the input is not changed
    assert with_predictor(cfg, {"uniform": {"kind": "uniform"}}, "a", "p") == {"uniform": {"kind": "uniform"}}
    assert len(calls) == 1  # no dots section: no predictor trained


def test_a_censored_wall_time_ratio_is_printed_as_a_lower_bound():
    """Regression (issue 50): the wall-time column printed a censored mean without ">="."""
    uniform = [_run(f"u{s}", [0.2, 0.3, 0.4]) for s in range(5)]
    never = [_run(f"a{s}", [0.2, 0.25, 0.3]) for s in range(5)]  # never reaches uniform's final 0.4
    result = analyse({"uniform": uniform, "ads": never}, "average")
    row = next(r for r in result["rows"] if r["name"] == "ads")
    assert row["wall_ratio"]["censored"] and row["wall_ratio"]["mean"] == 1.0
    assert "| >= 1.00 [1.00, 1.00] |" in results_table(result)
