"""Benches that cannot rot: every `bench/*.py` runs with `--smoke` (tiny sizes, seconds) in its own process with
this interpreter, or is listed below with the test that covers it. A new bench without a `--smoke` mode fails
here (argparse refuses the flag), and so does a refactor that breaks a bench's imports or calls."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# Benches whose smoke run another test owns: bench -> that test file (it must exist and name the bench).
COVERED_ELSEWHERE = {
    "grpo_curriculum.py": "tests/bench/test_grpo_curriculum.py",
    "eval.py": "tests/bench/test_eval_bench.py",
    "grader.py": "tests/bench/test_grader_bench.py",
    "study.py": "tests/flows/test_study.py",  # needs the session's Prefect server (its runs are a flow's tasks)
    "experiment2.py": "tests/flows/test_experiment2.py",  # the same
}
# Modules the benches import, not benches: module -> the bench whose smoke run exercises it (it must import it).
HELPERS = {
    "cpu_load.py": "embed_nll.py",
}
# What each smoke run must print (its ratio line, or the line that says what it skipped without a GPU / server).
EXPECTED = {
    "embed_nll.py": r"speed-up \(reference / fused\): [\d.]+x",
    "difficulty_validity.py": r"difficulty validity: 20 rows",
    "kmeans.py": r"speed-up \(reference / ours\): [\d.]+x",
    "format_scale.py": r"peak RSS / 2 GB target: [\d.]+",
    "refresh.py": r"whole build: refresh .* = [\d.]+",
    "sampler.py": r"ratio to the 1 ms target: [\d.]+",
    "rerun.py": r"smoke: skipped the timed runs",
    "scale_out.py": r"smoke: skipped the timed runs",
    "gpu_checks.py": r"smoke: skipped the GPU part",
    "vllm_check.py": r"smoke: skipped the vLLM part",
}
TIMEOUT_S = 600  # a smoke run takes seconds of CPU; the bound is for a busy shared machine


def benches() -> list[str]:
    return sorted(p.name for p in BENCH.glob("*.py"))


SMOKED = [b for b in benches() if b not in COVERED_ELSEWHERE and b not in HELPERS]


def test_every_bench_is_smoked_here_or_by_a_named_test():
    for name in benches():
        if name in COVERED_ELSEWHERE:
            test = REPO / COVERED_ELSEWHERE[name]
            assert test.is_file(), (
                f"bench/{name}: its smoke test {COVERED_ELSEWHERE[name]} does not exist (write it, or drop the bench "
                f"from COVERED_ELSEWHERE in {Path(__file__).name} so that its --smoke runs here)"
            )
            assert Path(name).stem in test.read_text(), f"{COVERED_ELSEWHERE[name]} does not mention bench/{name}"
        elif name in HELPERS:
            user = BENCH / HELPERS[name]
            assert re.search(rf"\b(from|import) {Path(name).stem}\b", user.read_text()), (
                f"bench/{name} is listed as a helper of bench/{HELPERS[name]}, which does not import it"
            )
        else:
            assert "--smoke" in (BENCH / name).read_text(), f"bench/{name} has no --smoke mode"


@pytest.fixture(scope="module")
def tiny_model() -> str:
    """The cached tiny model (built once per machine, as the other tests use it), so no smoke run builds one."""
    from ads_core.models import default_model_dir

    return str(default_model_dir("tiny"))


def smoke_args(name: str, model: str) -> list[str]:
    return {
        "embed_nll.py": ["--model", model, "--threads", "1"],
        "refresh.py": ["--model", model],
        "vllm_check.py": ["--model", model],
    }.get(name, [])


@pytest.mark.parametrize("name", SMOKED)
def test_bench_smoke(name: str, tiny_model: str, tmp_path: Path):
    cmd = [sys.executable, str(BENCH / name), "--smoke", *smoke_args(name, tiny_model)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-4000:]}"
    assert proc.stdout.strip(), f"bench/{name} --smoke printed nothing"
    if name in EXPECTED:
        assert re.search(EXPECTED[name], proc.stdout), f"bench/{name} --smoke did not print /{EXPECTED[name]}/:\n{out}"
