"""`bench/eval.py --smoke`: the batched transformers backend against the per-problem `generate` loop runs end to
end on the tiny model and prints both rates and its ratio line (no figure is checked: the box is shared)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "eval.py"


def test_eval_bench_smoke(tmp_path: Path):
    from ads_core.models import default_model_dir

    model = str(default_model_dir("tiny"))
    cmd = [sys.executable, str(BENCH), "--smoke", "--model", model, "--threads", "1"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    out = proc.stdout
    assert re.search(r"\(a\) per-problem generate loop: [\d.]+ s, [\d.]+ problems/s, \d+ tokens", out), out
    assert re.search(r"\(b\) batched backend: +[\d.]+ s, [\d.]+ problems/s, \d+ tokens", out), out
    assert re.search(r"speed-up \(batched / loop problems/s\): [\d.]+x", out.strip().splitlines()[-1]), out
