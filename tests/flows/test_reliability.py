"""Crashes and contention: kill -9 inside a stage, then the same command finishes with the same artifact and
nothing to clean by hand; two builds with different sources into one OUT each describe their own artifact;
SIGTERM stops a build within seconds and leaves no lock or Running flow run behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ads_core.locks.manager import held_locks
from ads_core.storage import manifest as mf

BUILD_SCRIPT = (
    "import json, sys\n"
    "from ads_prefect.flows.ads_build import ads_build\n"
    "r = ads_build(source=sys.argv[1], out=sys.argv[2], **json.loads(sys.argv[3]))\n"
    "print('RESULT ' + json.dumps({'rows': r['refresh']['rows'], 'final': r['final_uri'],"
    " 'stages': r['stages']}))\n"
)


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    return helpers


def start_build(h: Any, server: Any, source: Path, out: Path, log: Path, **env: str) -> subprocess.Popen[Any]:
    params = json.dumps(h.build_params())
    env = server.env(ADS_LOCK_DIR=os.environ["ADS_LOCK_DIR"], PREFECT_LOGGING_LEVEL="WARNING", **env)
    return h.start_process([sys.executable, "-c", BUILD_SCRIPT, str(source), str(out), params], log, env)


def wait_for(path: Path, proc: subprocess.Popen[Any], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the build exited ({proc.returncode}) before reaching the pause point"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def result_of(log: Path) -> dict[str, Any]:
    lines = [line for line in log.read_text().splitlines() if line.startswith("RESULT ")]
    assert lines, log.read_text()[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def reference(clean_build: dict[str, Any]) -> str:
    """The final artifact's hash of an uninterrupted build of the same source and settings (the session's cold
    build, into its own OUT)."""
    return mf.read(str(Path(clean_build["out"]) / "final")).output_hash("train")


KILL_STAGES = ["format", "score", "cluster", "sort"]


@pytest.mark.slow  # five build processes
def test_kill_9_in_each_stage_in_turn_then_the_same_command_finishes_with_the_same_artifact(
    h: Any, prefect_api: Any, sample_source: Path, reference: str, tmp_path: Path
):
    """One OUT, one command: it is killed -9 in format, run again and killed in score, again in cluster, again in
    sort (each time holding the OUT lock and the stage's lock), and run once more. Every run after a kill takes
    over the lock of the run killed before it, marks that run Crashed, and gets past the stage where that run
    died; the last one finishes with the uninterrupted build's artifact and leaves no lock behind."""
    from prefect.client.orchestration import get_client

    out = tmp_path / "out"
    logs = [tmp_path / f"run-{i}.log" for i in range(len(KILL_STAGES) + 1)]
    for stage, log in zip(KILL_STAGES, logs, strict=False):
        marker = tmp_path / f"paused-in-{stage}"
        proc = start_build(h, prefect_api, sample_source, out, log, ADS_TEST_PAUSE_STAGE=f"{stage}:{marker}")
        try:
            wait_for(marker, proc)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            h.stop_process(proc)
    rerun = start_build(h, prefect_api, sample_source, out, logs[-1])
    try:
        assert rerun.wait(240) == 0, logs[-1].read_text()[-3000:]
    finally:
        h.stop_process(rerun)
    assert mf.read(str(out / "final")).output_hash("train") == reference
    killed_runs = set()
    for killed_stage, log in zip(KILL_STAGES, logs[1:], strict=True):
        text = log.read_text()
        taken = re.search(r"taking over the build lock \S+ from \S+ \(holder flow-run:([0-9a-f-]{36})\)", text)
        assert taken, f"after the kill in {killed_stage}:\n{text[-3000:]}"
        with get_client(sync_client=True) as client:  # the killed build's run was marked Crashed by the next
            killed = client.read_flow_run(taken.group(1))
        assert killed.state.is_crashed(), (killed_stage, killed.name, killed.state)
        killed_runs.add(killed.id)
    assert len(killed_runs) == len(KILL_STAGES)  # each run took over from the one killed just before it
    assert not held_locks()  # nothing left to clean by hand


@pytest.mark.slow  # two build processes
def test_two_builds_of_different_sources_into_one_out_describe_their_own_artifacts(
    h: Any, prefect_api: Any, sample_source: Path, tmp_path: Path
):
    lines = sample_source.read_text().splitlines()
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(lines[:50]) + "\n")
    out = tmp_path / "out"
    procs = {
        name: start_build(h, prefect_api, src, out, tmp_path / f"{name}.log")
        for name, src in (("a", sample_source), ("b", other))
    }
    try:
        for proc in procs.values():
            assert proc.wait(300) == 0
    finally:
        for proc in procs.values():
            h.stop_process(proc)
    results = {name: result_of(tmp_path / f"{name}.log") for name in procs}
    assert results["a"]["rows"] == 60 and results["b"]["rows"] == 50  # each build's own data
    last = max(procs, key=lambda n: (tmp_path / f"{n}.log").stat().st_mtime)
    assert h.read_final(str(out / "final" / "train.parquet")).height == results[last]["rows"]


def test_sigterm_stops_a_build_within_seconds_and_leaves_no_lock(
    h: Any, prefect_api: Any, sample_source: Path, tmp_path: Path, ads_env: dict[str, str]
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    marker = tmp_path / "paused"
    env = prefect_api.env(ADS_LOCK_DIR=os.environ["ADS_LOCK_DIR"], ADS_TEST_PAUSE_STAGE=f"score:{marker}")
    cmd = [
        str(Path(sys.executable).with_name("ads")),
        "build",
        str(sample_source),
        "--out",
        str(tmp_path / "out"),
        "--name",
        "sigterm60",
        "-k",
        "4",
        "--max-length",
        "256",
    ]
    proc = h.start_process(cmd, tmp_path / "cli.log", env)
    try:
        wait_for(marker, proc)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(30)  # a generous bound, not a timing claim: it must stop, not finish the shard
        except subprocess.TimeoutExpired:
            pytest.fail("the build was still running 30 s after SIGTERM")
    finally:
        h.stop_process(proc)
    log = (tmp_path / "cli.log").read_text()
    assert code == 130 and "interrupted" in log, log[-3000:]
    assert not held_locks()
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="build-sigterm60")))
    assert runs and all(r.state.is_final() for r in runs), [(r.name, r.state) for r in runs]


def test_a_dataset_name_cannot_write_outside_the_output_root(
    h: Any, prefect_api: Any, sample_source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ADS_OUT_DIR", str(tmp_path / "root" / "builds"))
    state, _ = h.run_build(sample_source, "", dataset="../../../x")
    assert state.is_failed() and "path separators" in state.message
    assert not (tmp_path / "x").exists() and not (tmp_path / "root" / "x").exists()
