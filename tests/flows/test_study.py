"""`bench/study.py --smoke` end to end, as a user runs it (its own process, reporting to the session's Prefect
server): the study's task and policy, the real build, uniform and ADS on two seeds through TRL with validation on
the five per-family held-out sets, a progress line per run, `ads compare`'s files, the window traces, results.md
with the paired row and study.json; then a rerun that reuses every run and prints the same table. The analysis
itself is tested on hand-made runs in tests/ads_core/test_study.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "study.py"


def _study(out: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--samplers", "ads", "--jobs", "1", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow  # the smoke study: tokenizer, warm-up, build, 4 x 2 TRL steps, 5 held-out sets each
def test_the_smoke_study_runs_every_pair_and_writes_the_paired_table(
    prefect_api: Any, ads_env: dict[str, str], tmp_path: Path
):
    pytest.importorskip("trl")
    out = tmp_path / "study"
    env = prefect_api.env(**ads_env)
    printed = _study(out, env)
    lines = printed.splitlines()
    assert sum(line.startswith(("[1/4] ", "[2/4] ", "[3/4] ", "[4/4] ")) for line in lines) == 4
    for name in ("compare.png", "compare.md", "compare.json", "results.md", "study.json", "window_traces.png"):
        assert (out / name).is_file(), name
    for run in ("uniform-seed1000", "uniform-seed1001", "ads-seed1000", "ads-seed1001"):
        records = [json.loads(x) for x in (out / "runs" / run / "eval.jsonl").read_text().splitlines()]
        assert sorted({r["step"] for r in records}) == [0, 2]
        assert sorted({r["set"] for r in records}) == [
            "heldout-max",
            "heldout-min",
            "heldout-product",
            "heldout-range",
            "heldout-sum",
        ]
    result = json.loads((out / "study.json").read_text())
    rows = {r["name"]: r for r in result["analysis"]["rows"]}
    assert set(rows) == {"uniform", "ads"} and len(rows["ads"]["diffs"]) == 2
    assert rows["ads"]["paired"]["level"] == 0.975  # a primary comparison
    assert result["start"]["samples"] == 2 and result["counts"] == {"train": 40, "heldout": 20, "warmup": 79}
    table = (out / "results.md").read_text()
    assert table in printed and "| ads | 2 | " in table and "Decision (docs/study.md's rule): " in table
    assert "Training reward is not compared across samplers" in table

    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("eval.jsonl")}
    again = _study(out, env)  # everything reused: no run trained again, the same table
    assert "[4/4] runs finished earlier, reused" in again
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert (out / "results.md").read_text() == table
