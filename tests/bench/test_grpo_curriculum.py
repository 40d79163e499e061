"""`bench/grpo_curriculum.py`: a smoke run of the whole benchmark at `--smoke` sizes (the real pipeline builds the
artifact, then 4 GRPO steps per sampler through TRL, validated on the held-out set with `ads eval`'s code and
reported with `ads compare`'s; no figure is checked, only that everything runs and the report has its parts).
Its task generator and warm-up, shared with `ads demo`, are tested in tests/ads_core/test_demo.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.slow  # the real build, the DOTS predictor (3 tiny warm-ups), 4 x 4 TRL steps: 194 s on 2 cores at load ~20
def test_a_quick_run_builds_trains_every_sampler_and_reports(tmp_path: Path, monkeypatch, capsys, bench_module):
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    bench = bench_module("grpo_curriculum")
    out = tmp_path / "out"
    samplers = ["--samplers", "ads-frontier,dynamic,dots+rr"]
    results = bench.main(["--smoke", "--out", str(out), *samplers, "--jobs", "1"])
    assert set(results["runs"]) == {"uniform", "ads-frontier", "dynamic", "dots+rr"}  # uniform is always run
    for name, runs in results["runs"].items():
        (run,) = runs
        assert [p["step"] for p in run["curve"]] == [0, 2, 4]
        fresh = 4 if name == "dots+rr" else 8  # replay rolls out half the step's prompts fresh
        assert run["prompts_per_step"] == fresh and 0.0 <= run["curve"][-1]["accuracy"] <= 1.0
        rolled = run["rollout_prompts"]
        assert rolled == 4 * fresh if name != "dynamic" else 4 * 8 <= rolled <= 4 * 8 * 10
    assert (out / "dots-predictor" / "manifest.json").is_file()  # trained once, from other policies
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
    assert printed[-2].startswith("ads-frontier vs uniform: steps to uniform's final held-out accuracy = ")
    assert printed[-1].startswith("dots+rr vs uniform: steps ") and "wall time" in printed[-1]
    again = bench.main(["--smoke", "--out", str(out), *samplers, "--jobs", "1"])  # reused
    assert again["runs"] == results["runs"]
