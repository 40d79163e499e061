"""Fencing and orphans, end to end (issue 20's attacks).

- A build stopped (SIGSTOP) mid-score for longer than its lease is taken over by a build of edited solutions into
  the same OUT, spelled differently; continued (SIGCONT), it publishes nothing, exits non-zero with one line
  that says so, and its flow run ends Failed with that line. OUT is exactly the other build's result.
- kill -9 of `ads build`, or of its whole process group, takes its temporary Prefect server (and the watchdog)
  along within seconds, also while that server is still starting; the same command then finishes the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ads_core import storage
from ads_core.ingest.sources import source_digest
from ads_core.locks.manager import held_locks
from ads_core.storage import manifest as mf

EDIT = "Read the problem twice. "  # prefixed to every solution of build B
ROWS = 16


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    return helpers


def ads_cli() -> str:
    return str(Path(sys.executable).with_name("ads"))


def wait_for(path: Path, proc: Any, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the build exited ({proc.returncode}) before reaching the pause point"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below OUT (hidden temp files included) and its content hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_consistent_build(out: Path, source: Path) -> None:
    """Every manifest in OUT is intact, and every input it names (inside OUT, and the source) still has the
    content it was built from: OUT is one build's result, not a mix."""
    manifests = sorted(out.rglob("manifest.json"))
    assert manifests
    for path in manifests:
        stage_dir = f"file://{path.parent}"  # as build B spelled OUT
        assert mf.verify(stage_dir) is not None, f"{path.parent} does not match its manifest"
        for name, entry in mf.read(stage_dir).inputs.items():
            uri = entry.get("uri") if isinstance(entry, dict) else None
            if uri and entry.get("sha256") and (str(out) in uri or uri == str(source)):
                # the source is keyed on the bytes the format stage read (names and hashes of its files)
                now = source_digest(uri) if name == "source" else storage.content_hash(uri)
                assert now == entry["sha256"], f"{path}: input {name} changed since"
    assert mf.read(str(out / "formatted")).inputs["source"]["uri"] == str(source)


def test_a_build_paused_past_its_lease_publishes_nothing_after_another_took_over(
    h: Any, prefect_api: Any, sample_source: Path, tiny_model: str, tmp_path: Path
):
    real = tmp_path / "out"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    source, edited = tmp_path / "source.jsonl", tmp_path / "edited.jsonl"
    rows = [json.loads(line) for line in sample_source.read_text().splitlines()[:ROWS]]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    edited.write_text("".join(json.dumps({**r, "answer": EDIT + r["answer"]}) + "\n" for r in rows))

    marker, log = tmp_path / "paused", tmp_path / "a.log"
    env = prefect_api.env(
        ADS_LOCK_DIR=os.environ["ADS_LOCK_DIR"],
        ADS_LOCK_LEASE_S="4",
        ADS_TEST_PAUSE_STAGE=f"score:{marker}:10",  # past the start-of-run fence check, before the work
    )
    args = ["build", str(source), "--out", f"{tmp_path}/link/", "--name", "fence-a", "-k", "2"]
    a = h.start_process([ads_cli(), *args, "--shards", "2", "--max-length", "256", "--no-score-cache"], log, env)
    try:
        wait_for(marker, a)
        os.killpg(a.pid, signal.SIGSTOP)  # a GC pause, a VM migration, an NFS stall: longer than the lease
        state, result = h.run_build(
            edited, f"file://{real}", dataset="fence-b", score__cache=False, cluster__num_clusters=2
        )
        assert state.is_completed(), state.message
        before = snapshot(real)
        os.killpg(a.pid, signal.SIGCONT)
        code = a.wait(180)
    finally:
        os.killpg(a.pid, signal.SIGCONT) if a.poll() is None else None
        h.stop_process(a)

    text = log.read_text()
    last = text.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: lost the build lock on"), text[-3000:]
    assert f"(holder flow-run:{state.state_details.flow_run_id}) took it over" in last  # B: one lock, two spellings
    assert "published nothing more" in last
    assert snapshot(real) == before  # A published nothing, and left no temp file

    assert_one_consistent_build(real, edited)  # B's own result, whole
    final = h.read_final(str(real / "final" / "train.parquet"))
    assert final.height == len(rows) and all(i["solution"].startswith(EDIT.strip()) for i in final["extra_info"])
    scores = h.read_final(str(real / "scores" / "scores.parquet"))
    assert dict(zip(final["sample_id"], final["difficulty"], strict=True)) == dict(
        zip(scores["sample_id"], scores["difficulty"], strict=True)
    )
    clusters = h.read_final(str(real / "clusters" / "assignments.parquet"))
    assert dict(zip(final["sample_id"], final["cluster_id"], strict=True)) == dict(
        zip(clusters["sample_id"], clusters["cluster_id"], strict=True)
    )
    assert result["out"] == f"file://{real}" and not held_locks()

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="build-fence-a")))
    assert len(runs) == 1 and runs[0].state.is_failed(), [(r.name, r.state) for r in runs]
    assert "lost the build lock" in runs[0].state.message, runs[0].state.message


def test_a_lost_fence_refuses_s3_puts(moto_s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """On object storage the check runs right before the PUT (one-shot and multipart-from-file alike)."""
    import boto3

    from ads_core.locks.fence import Fence
    from ads_core.locks.manager import BuildLockManager, out_lock_key
    from ads_core.locks.store import LOCK_DIR_ENV, DirLockStore
    from ads_core.storage.fencing import LockLost, guarded

    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    client = boto3.client("s3", endpoint_url=moto_s3.endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="fenced")
    out = "s3://fenced/builds/x"
    store, key = DirLockStore(tmp_path / "locks"), out_lock_key(out)
    store.create(key, 1, {"holder": "A", "nonce": "a", "host": "other-host", "pid": 1, "lease_until": time.time() - 1})
    paused = Fence(store.location, key, 1, "a", out, lease_s=1.0, heartbeat_s=0.25)
    taker = BuildLockManager()
    assert taker.acquire_lock(out_lock_key("S3://fenced//builds/x/"), "B", acquire_timeout=5)  # same lock
    with guarded(out, paused.check):
        with pytest.raises(LockLost):
            storage.write_bytes(f"{out}/final/manifest.json", b"{}")
        with pytest.raises(LockLost), storage.atomic_local_file(f"{out}/final/train.parquet") as tmp:
            tmp.write_bytes(b"A's rows")
    assert client.list_objects_v2(Bucket="fenced").get("KeyCount") == 0
    with guarded(out, taker.fence(key).check):
        storage.write_bytes(f"{out}/final/manifest.json", b"{}")
    assert client.list_objects_v2(Bucket="fenced")["KeyCount"] == 1
    taker.release_all()


def descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid`, with its command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                found[child] = (Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
            except OSError:
                continue
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def kill_9_and_assert_all_gone(proc: Any, started: dict[int, str], whole_group: bool = False) -> None:
    """kill -9 the build (or its whole process group, as a scheduler or `kill -9 -PGID` does); every process it had
    started must be gone 15 seconds later."""
    os.killpg(proc.pid, signal.SIGKILL) if whole_group else os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 15  # a bound, not a timing claim: they go within a second or two
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: cmd for p, cmd in started.items() if alive(p)}
    assert not left, f"outlived the killed build: {left}"


@pytest.mark.slow  # two builds, each with its temporary server
def test_kill_9_of_ads_builds_process_group_mid_stage_leaves_nothing_running_and_a_rerun_finishes(
    h: Any, prefect_server: Any, prefect_home_copy: Any, sample_source: Path, clean_build: Any, tmp_path: Path
):
    """The build's whole process group killed -9 mid-score: its temporary Prefect server (in a session of its own,
    so that a terminal's Ctrl-C spares it) outlived it, since its watchdog shared the group (issue 51: four such
    servers, about 240 MB each, kept running). Nothing it started is left, and the same command then finishes
    with the uninterrupted build's artifact."""
    marker, log, out = tmp_path / "paused", tmp_path / "build.log", tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # no server: ephemeral mode
    env.update(
        PREFECT_HOME=str(prefect_home_copy(prefect_server.home, tmp_path / "prefect-home")),  # its own, migrated
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        ADS_LOCK_DIR=str(tmp_path / "locks"),
    )
    args = ["build", str(sample_source), "--out", str(out), "-k", "4", "--shards", "2", "--max-length", "256"]
    # paused as the score stage starts: it always runs into a new OUT, even when every row comes from the score cache
    proc = h.start_process([ads_cli(), *args], log, {**env, "ADS_TEST_PAUSE_STAGE": f"score:{marker}"})
    started: dict[int, str] = {}
    try:
        wait_for(marker, proc)
        started = descendants(proc.pid)
        servers = [p for p, cmd in started.items() if "prefect.server.api.server:create_app" in cmd]
        assert servers, (started, log.read_text()[-3000:])
        kill_9_and_assert_all_gone(proc, started, whole_group=True)
    finally:
        h.stop_process(proc)
        for pid in filter(alive, started):  # a failed run leaves nothing behind either
            os.kill(pid, signal.SIGKILL)
    rerun = h.start_process([ads_cli(), *args], tmp_path / "rerun.log", env)
    try:
        assert rerun.wait(300) == 0, (tmp_path / "rerun.log").read_text()[-3000:]
    finally:
        h.stop_process(rerun)
    reference = mf.read(str(Path(clean_build["out"]) / "final")).output_hash("train")
    assert mf.read(str(out / "final")).output_hash("train") == reference


@pytest.mark.slow
def test_ctrl_c_at_the_terminal_stops_ads_build_and_its_temporary_server(
    h: Any, prefect_server: Any, prefect_home_copy: Any, sample_source: Path, tiny_model: str, tmp_path: Path
):
    """A terminal's Ctrl-C signals the whole foreground process group. The temporary server died of it first,
    and the interrupted build then hung, retrying a server that was gone, its run left Running (regression): the
    server now has a session of its own, records the run Crashed, and the build exits with 130, taking it along."""
    marker, log = tmp_path / "paused", tmp_path / "build.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # no server: ephemeral mode
    env.update(
        PREFECT_HOME=str(prefect_home_copy(prefect_server.home, tmp_path / "prefect-home")),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        ADS_LOCK_DIR=str(tmp_path / "locks"),
        ADS_TEST_PAUSE_STAGE=f"format:{marker}",
    )
    args = ["build", str(sample_source), "--out", str(tmp_path / "out"), "-k", "4", "--max-length", "256"]
    database = tmp_path / "prefect-home" / "prefect.db"  # a copy of the session server's: it holds other runs
    with sqlite3.connect(database) as db:
        before = {row[0] for row in db.execute("SELECT id FROM flow_run")}
    proc = h.start_process([ads_cli(), *args], log, env)  # its own session: the group a terminal would signal
    try:
        wait_for(marker, proc)
        started = descendants(proc.pid)
        assert [p for p, cmd in started.items() if "prefect.server.api.server:create_app" in cmd], started
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(60)  # a bound, not a timing claim: it hung for minutes before the fix
        except subprocess.TimeoutExpired:
            pytest.fail("ads build was still running 60 s after Ctrl-C: " + log.read_text()[-2000:])
    finally:
        h.stop_process(proc)
    assert code == 130 and "interrupted: the build stopped" in log.read_text(), log.read_text()[-3000:]
    deadline = time.monotonic() + 20  # the server goes with the build (stopped, or by its watchdog)
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not {p: cmd for p, cmd in started.items() if alive(p)}
    with sqlite3.connect(database) as db:  # the server lived to record the run's end
        states = [state for run, state in db.execute("SELECT id, state_type FROM flow_run") if run not in before]
    assert states == ["CRASHED"], states


def answers(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def watched_server(started: dict[int, str]) -> int | None:
    """The pid of the temporary server among STARTED once its watchdog (`procs.reap_with_me`: `python -I -S -c
    SCRIPT PID START GRACE`) watches it, else None."""
    server = next((p for p, cmd in started.items() if "prefect.server.api.server:create_app" in cmd), None)
    watchdogs = [cmd.split() for cmd in started.values() if " -I -S -c " in f" {cmd} "]
    return server if server is not None and any(len(w) > 3 and w[-3] == str(server) for w in watchdogs) else None


def test_kill_9_while_the_temporary_prefect_server_starts_takes_it_along(
    h: Any, sample_source: Path, tiny_model: str, tmp_path: Path
):
    """The server needs seconds to import and migrate before it answers; a kill -9 of the build in that window
    must not leave it running (it did: its watchdog was attached only once it answered)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # no server: ephemeral mode
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    args = ["build", str(sample_source), "--out", str(tmp_path / "out"), "--max-length", "256"]
    proc, started = h.start_process([ads_cli(), *args], tmp_path / "build.log", env), {}
    try:
        deadline = time.monotonic() + 120  # a bound, not a timing claim
        while not watched_server(started):  # the event: the server was spawned and its watchdog attached to it
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "build.log").read_text()[-3000:]
            time.sleep(0.05)
            started = descendants(proc.pid)
        server_cmd = started[watched_server(started)].split()
        assert not answers(int(server_cmd[server_cmd.index("--port") + 1])), "the server was already up"
        kill_9_and_assert_all_gone(proc, started)
    finally:
        h.stop_process(proc)
        for pid in filter(alive, started):  # a failed run leaves nothing behind either
            os.kill(pid, signal.SIGKILL)
