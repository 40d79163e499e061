"""`bench/grader.py --smoke`: the grader bench runs end to end and reports p99 and max per context (main thread,
thread pool, a forked and a spawned child's first grade, a fresh process's first grade), the verdicts that
differ from the main thread's, and the target line. No timing figure is checked here; the verdict counts are."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grader.py"


def test_the_grader_bench_smoke_reports_every_context_and_the_target():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    contexts = [
        "ordinary, main thread",
        "adversarial, main thread",
        "ordinary, thread pool",
        "adversarial, thread pool",
        "child (fork), first grade",
        "adversarial, child (fork)",
        "child (spawn), first grade",
        "adversarial, child (spawn)",
        "fresh process, first grade",
    ]
    for context in contexts:
        [row] = [line for line in lines if line.startswith(context)]
        assert " p99 " in row and " max " in row and "over limit+0.5 s:" in row
    assert sum("slowest:" in line for line in lines) == len(contexts)
    assert out.stdout.count("label (timeouts aside): 0") == 5  # right answers right, wrong ones wrong
    # the smoke's adversarial answers: 5 refused by the pre-check and junk, 1 cut by its CPU budget, twice each
    assert out.stdout.count("reasons: timeout 2, too_complex 10") == 4
    assert len(re.findall(r"differ from the main thread's \(.*\): 0", out.stdout)) == 3
    assert any(line.startswith("target: every completion <= 0.8 s") for line in lines)
    assert lines[-1].startswith("ratio baseline / grader")
