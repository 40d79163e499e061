"""`bench/experiment2.py --smoke` end to end, as a user runs it (its own process, reporting to the session's Prefect
server): the gates (reported, not enforced, at smoke sizes), the pilot and its rules, every arm on two seeds (the
oracle artifact and the nll_sum build included), the sweep's smoke cells, and every file the design names. The
analysis is tested on hand-made runs in tests/ads_core/test_experiment2.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "experiment2.py"


@pytest.mark.slow  # warm-up, three builds, 6 + 8 + 2 tiny TRL runs in one worker process
def test_the_smoke_experiment_runs_every_arm_and_writes_every_file(
    prefect_api: Any, ads_env: dict[str, str], tmp_path: Path
):
    pytest.importorskip("trl")
    out = tmp_path / "e2"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--jobs", "1", "--out", str(out)],
        env=prefect_api.env(**ads_env),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(Smoke sizes: this measures nothing.)" in proc.stdout
    gates = json.loads((out / "gates-4.json").read_text())
    assert [g["gate"] for g in gates["gates"]] == [
        "format",
        "level",
        "worked solutions",
        "out of reach",
        "passes",
        "fresh task seed",
    ]
    rules = json.loads((out / "pilot" / "rules.json").read_text())
    assert {"seeds", "easiest_share", "accuracy_target", "uniform_learns"} <= set(rules)
    with open(out / "per_seed.csv") as f:
        rows = list(csv.DictReader(f))
    arms = {r["arm"] for r in rows}
    assert arms == {"uniform", "uniform+drop", "ads", "ads-nodrop", "ads-oracle", "ads-nllsum", "easiest", "dynamic"}
    assert len(rows) == 8 and all(r["commit"] for r in rows)  # one seed per arm at smoke sizes
    for folder in (out, out / "pilot", out / "sweep"):
        for name in ("results.md", "per_seed.csv", "experiment2.json", "accuracy.png", "compare.png"):
            assert (folder / name).is_file(), folder / name
    result = json.loads((out / "experiment2.json").read_text())
    assert set(result["artifacts"]) == {"build", "oracle", "nll_sum"}
    assert {c["role"] for c in result["analysis"]["comparisons"]} == {"primary", "secondary"}
    assert "no verdict (< 5 seeds)" in (out / "pilot" / "results.md").read_text()
    assert "none chosen" in (out / "sweep" / "results.md").read_text()


def test_flows_run_one_after_another_share_the_open_worker_pool(monkeypatch: pytest.MonkeyPatch):
    """bench/experiment2.py opens one pool for its pilot, main runs and sweep; each flow's `worker_pool` uses it
    instead of starting workers again (seconds of imports each)."""
    from ads_lab.demo import runs
    from ads_lab.flows import workers

    started: list[int] = []

    @contextmanager
    def fake_workers(jobs: int) -> Iterator[Any]:
        started.append(jobs)
        yield f"pool-{len(started)}"

    monkeypatch.setattr(runs, "workers", fake_workers)
    with workers.worker_pool(1):
        outer = workers._pool
        for _ in range(3):
            with workers.worker_pool(2):
                assert workers._pool == outer
        assert workers._pool == outer
    assert workers._pool is None and started == [1]
    with workers.worker_pool(2):  # none open: this block starts its own
        assert workers._pool == "pool-2"
    assert started == [1, 2]
