"""`bench/grader.py --smoke`: the grader bench runs end to end and its report has its parts (no figure is checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grader.py"


def test_the_grader_bench_smoke_reports_percentiles_and_the_slowest_case():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    for context in (
        "ordinary, main thread",
        "adversarial, main thread",
        "ordinary, thread pool",
        "adversarial, thread",
    ):
        [row] = [line for line in lines if line.startswith(context)]
        assert " p50 " in row and " p99 " in row and "over limit+0.5 s:" in row
    assert sum("slowest:" in line for line in lines) == 4
    assert "label (timeouts aside): 0" in out.stdout  # right answers right, wrong ones wrong
    assert lines[-1].startswith("ratio baseline / grader")
