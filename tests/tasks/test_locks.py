"""Build locks, fencing tokens, one lock per OUT and the lock settings (no Prefect server).

The end-to-end attack (a build paused past its lease, taken over, then continued) is in tests/flows/test_fencing.py;
these check each piece where it is cheap: tokens only go up, a stale token refuses every kind of publish (here and
in a process that does not hold the lock), every spelling of one folder is one lock, bad settings are one line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.locks.fence import Fence
from ads_core.locks.manager import BuildLockManager, LockWaitTimeout, out_lock_key, owning
from ads_core.locks.store import (
    HEARTBEAT_ENV,
    LEASE_ENV,
    LOCK_DIR_ENV,
    WAIT_ENV,
    DirLockStore,
    Generation,
    LockSettingsError,
    lock_settings,
    process_start,
)
from ads_core.storage import manifest as mf
from ads_core.storage.fencing import LockLost, canonical_location, guarded


@pytest.fixture
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    for name in (LEASE_ENV, HEARTBEAT_ENV, WAIT_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "locks"


def dead_pid() -> int:
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )


def files_under(folder: Path) -> list[str]:
    """Every file below a folder, hidden temp files included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_live_locks_are_respected_and_dead_holders_taken_over(lock_dir: Path):
    store = DirLockStore(lock_dir)
    locks = BuildLockManager()
    assert locks.acquire_lock("k1", "me")
    record = store.newest("k1").record
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname() and record["lease_until"]
    other = BuildLockManager()
    assert other.is_locked("k1") and not other.is_lock_holder("k1", "you")
    assert not other.wait_for_lock("k1", timeout=0.3)  # held by a live process: respected
    locks.release_lock("k1", "me")
    assert not other.is_locked("k1")
    assert other.acquire_lock("k1", "you") and other.fence("k1").token == 2  # the next generation
    assert "k1" not in other.taken_over  # released, not taken over

    stale = {
        "holder": "x",
        "nonce": "n",
        "host": socket.gethostname(),
        "pid": dead_pid(),
        "lease_until": time.time() + 600,
    }
    assert store.create("k2", 1, stale) and not store.create("k2", 1, stale)  # a generation is created once
    assert other.acquire_lock("k2", "you", acquire_timeout=2)  # its holder died: taken over at once
    assert other.taken_over["k2"]["holder"] == "x" and "is gone" in other.taken_over["k2"]["stale_reason"]
    store.create("k3", 7, {"holder": "uuid-only", "expiration": None})
    assert other.acquire_lock("k3", "you", acquire_timeout=2) and other.fence("k3").token == 8  # no holder to wait for
    other.release_all()


def test_another_hosts_lock_holds_until_its_lease_expires(lock_dir: Path):
    store = DirLockStore(lock_dir)
    remote = {"holder": "h", "nonce": "n", "host": "other-host", "pid": dead_pid(), "lease_until": time.time() + 600}
    store.create("k", 1, remote)
    locks = BuildLockManager()
    assert locks.is_locked("k")  # its pid means nothing here; only the lease counts
    store.rewrite("k", 1, {**remote, "lease_until": time.time() - 1})
    assert not locks.is_locked("k")


def test_the_heartbeat_renews_the_lease_and_waiting_gives_up_with_one_line(
    lock_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(LEASE_ENV, "1")
    monkeypatch.setenv(WAIT_ENV, "1")
    store = DirLockStore(lock_dir)
    holder = BuildLockManager()
    assert holder.acquire_lock("k", "me")
    first = store.newest("k").record["lease_until"]
    deadline = time.monotonic() + 30  # a bound, not a timing claim
    while not time.time() > first:  # poll until the first lease has run out: without renewal the lock is free
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert store.newest("k").record["lease_until"] > time.time()  # renewed: it holds past its first lease
    assert holder.is_locked("k")
    with pytest.raises(LockWaitTimeout, match=f"held by .*:{os.getpid()}") as info:
        BuildLockManager().acquire_lock("k", "you")
    assert "\n" not in str(info.value) and WAIT_ENV in str(info.value)
    holder.release_all()
    assert store.newest("k").record["released"] and not holder.is_locked("k")


def paused_holder(store: DirLockStore, key: str, out: Path) -> Fence:
    """The lock of a build A as it is when A was stopped (SIGSTOP) longer than its lease: its lease ran out."""
    nonce = "a" * 32
    record = {"holder": "A", "nonce": nonce, "host": socket.gethostname(), "pid": os.getpid()}
    store.create(key, 1, {**record, "started": process_start(os.getpid()), "lease_until": time.time() - 1})
    return Fence(store.location, key, 1, nonce, str(out), lease_s=1.0, heartbeat_s=0.25)


def test_a_takeover_gets_a_larger_token_and_the_old_holder_publishes_nothing(lock_dir: Path, tmp_path: Path):
    store, out = DirLockStore(lock_dir), tmp_path / "out"
    key = out_lock_key(str(out))
    a = paused_holder(store, key, out)
    b_locks = BuildLockManager()
    assert b_locks.acquire_lock(key, "B", acquire_timeout=5, label=str(out))
    b = b_locks.fence(key)
    assert b.token > a.token and b_locks.taken_over[key]["holder"] == "A"

    stale_renewal = Generation(1, store.newest(key).record, 0.0)
    a.renew(store, stale_renewal)  # A's heartbeat, late: it rewrites only A's own generation
    assert store.newest(key).number == b.token
    table = pa.table({"x": [1, 2]})
    with guarded(str(out), a.check):  # every kind of publish of A is refused
        for publish in (
            lambda: storage.write_bytes(str(out / "scores" / "scores.parquet"), b"A's rows"),
            lambda: storage.write_parquet(str(out / "final" / "train.parquet"), table),
            lambda: mf.write(
                str(out / "final"), mf.Manifest(stage="sort", inputs={}, outputs={}, config={}, code_version="t")
            ),
        ):
            with pytest.raises(LockLost) as info:
                publish()
            message = str(info.value)
            assert "\n" not in message and "lost the build lock" in message and "holder B" in message
            assert f"{LEASE_ENV}=1" in message
        with pytest.raises(LockLost), storage.atomic_local_file(str(out / "clusters" / "centroids.npy")) as tmp:
            tmp.write_bytes(b"A's centroids")
    assert files_under(out) == []  # nothing published, no temp file left behind

    with guarded(f"file://{out}/", b.check):  # B (any spelling of OUT) publishes
        storage.write_parquet(str(out / "final" / "train.parquet"), table)
    assert files_under(out) == ["final/train.parquet"]
    with pytest.raises(LockLost):
        a.check()
    b_locks.release_all()


WORKER = """
import json, sys, time
from pathlib import Path
from ads_core import storage
from ads_core.storage.fencing import LockLost
from ads_core.locks.manager import fenced

fence, out, go = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with fenced(fence):
    storage.write_bytes(str(out / "shard-0.parquet"), b"before")
    (out / "ready").touch()
    while not go.exists():
        time.sleep(0.05)
    try:
        storage.write_bytes(str(out / "shard-1.parquet"), b"after")
    except LockLost as exc:
        print(exc)
        sys.exit(3)
"""


def test_the_fence_holds_in_a_process_that_does_not_hold_the_lock(lock_dir: Path, tmp_path: Path):
    """A Dask worker's view: it has the token only, and reads the lock record to check it."""
    store, out, go = DirLockStore(lock_dir), tmp_path / "out", tmp_path / "go"
    key = out_lock_key(str(out))
    a = paused_holder(store, key, out)
    out.mkdir()
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, json.dumps(a.to_dict()), str(out), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "ready").exists():
            assert worker.poll() is None, worker.stdout.read()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        b_locks = BuildLockManager()  # B takes over once A's lease (renewed by the worker's first check) lapses
        assert b_locks.acquire_lock(key, "B", acquire_timeout=10)
        go.touch()
        output, _ = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 3 and "lost the build lock" in output.strip().splitlines()[-1], output
    assert (out / "shard-0.parquet").exists() and not (out / "shard-1.parquet").exists()
    b_locks.release_all()


def test_every_spelling_of_a_folder_is_one_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path))
    spellings = [
        str(real),
        f"{real}/",
        f"{real}//",
        f"{tmp_path}/link",
        f"{tmp_path}/link/",
        f"file://{real}",
        f"file://localhost{real}",
        f"{real}/not-there/..",
        f"file://{tmp_path}/link/../real/",
        "~/link",
    ]
    monkeypatch.chdir(tmp_path)
    spellings += ["real", "./link/", "link/../real"]
    assert {canonical_location(s) for s in spellings} == {str(real.resolve())}
    assert len({out_lock_key(s) for s in spellings}) == 1
    assert out_lock_key(str(tmp_path / "other")) != out_lock_key(str(real))
    buckets = ["s3://bucket/a/b", "s3://bucket/a/b/", "s3://bucket//a//b", "S3://Bucket/a/b"]
    assert {canonical_location(s) for s in buckets} == {"s3://bucket/a/b"}
    assert len({out_lock_key(s) for s in ("s3://bucket/a/b", "s3://bucket/a/c", "s3://other/a/b")}) == 3


def test_two_spellings_of_one_out_wait_for_each_other(lock_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(WAIT_ENV, "1")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with owning(f"{tmp_path}/link/", "flow-run:a") as first:
        with pytest.raises(LockWaitTimeout), owning(f"file://{real}", "flow-run:b"):
            pass
    with owning(f"file://{real}", "flow-run:b") as second:  # once the first is done
        assert second.fence.token == first.fence.token + 1 and second.taken_over is None


def test_a_build_with_ads_lock_dir_and_one_without_take_turns(
    lock_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Issue 41: ADS_LOCK_DIR moved OUT's lock instead of adding one, so a build that saw it and one that did not
    both held OUT. The setting now adds a lock: the build under it also holds OUT's own (`OUT/.lock`, issue 51),
    which its token fences."""
    monkeypatch.setenv(WAIT_ENV, "1")
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    out = str(tmp_path / "out")
    own = DirLockStore(tmp_path / "out" / ".lock")
    with owning(out, "flow-run:with-the-setting") as first:
        assert first.fence.store == str(own.root)  # its fence: OUT's own lock
        in_lock_dir = DirLockStore(lock_dir).newest(out_lock_key(out))
        assert in_lock_dir is not None and in_lock_dir.record["holder"] == "flow-run:with-the-setting"
        monkeypatch.delenv(LOCK_DIR_ENV)
        with pytest.raises(LockWaitTimeout, match="flow-run:with-the-setting"), owning(out, "flow-run:without"):
            pass
        monkeypatch.setenv(LOCK_DIR_ENV, str(lock_dir))
    newest = own.newest(out_lock_key(out))
    assert newest is not None and newest.number == 1 and newest.record["released"]
    assert not (tmp_path / "cache" / "locks").exists()  # the cache folder holds no lock of OUT's
    # the other way round, the build without the setting in another process (one process holds each lock once)
    held, done = tmp_path / "held", tmp_path / "done"
    env = {k: v for k, v in os.environ.items() if k != LOCK_DIR_ENV}
    child = subprocess.Popen([sys.executable, "-c", HOLD_OUT, out, str(held), str(done)], env=env)
    try:
        while not held.exists():
            assert child.poll() is None, "the holder died"
            time.sleep(0.02)
        with pytest.raises(LockWaitTimeout, match="flow-run:without"), owning(out, "flow-run:with-the-setting"):
            pass
    finally:
        done.write_text("")
        child.wait(30)


HOLD_OUT = """
import sys, time
from pathlib import Path
from ads_core.locks.manager import owning
with owning(sys.argv[1], "flow-run:without"):
    Path(sys.argv[2]).write_text("held")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.05)
"""


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (LEASE_ENV, "0"),
        (LEASE_ENV, "-5"),
        (LEASE_ENV, "abc"),
        (LEASE_ENV, "nan"),
        (LEASE_ENV, "1e9"),
        (WAIT_ENV, "0"),
        (WAIT_ENV, "-1"),
        (WAIT_ENV, "soon"),
        (HEARTBEAT_ENV, "0"),
        (HEARTBEAT_ENV, "30"),  # the default lease (60 s) would not last three heartbeats
    ],
)
def test_bad_lock_settings_are_refused_in_one_line_naming_the_variable(
    lock_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
):
    monkeypatch.setenv(name, value)
    with pytest.raises(LockSettingsError) as info:
        lock_settings()
    assert str(info.value).startswith(f"{name}=") and "\n" not in str(info.value)
    with pytest.raises(LockSettingsError):  # a lock is never taken with them
        BuildLockManager().acquire_lock("k", "me")
    assert not lock_dir.exists()


def test_lock_settings_have_sane_defaults_and_follow_the_lease(monkeypatch: pytest.MonkeyPatch):
    for name in (LEASE_ENV, HEARTBEAT_ENV, WAIT_ENV):
        monkeypatch.delenv(name, raising=False)
    assert lock_settings().lease_s == 60 and lock_settings().heartbeat_s == 15 and lock_settings().wait_s == 6 * 3600
    monkeypatch.setenv(LEASE_ENV, "5")
    assert lock_settings().heartbeat_s == 1.25
    monkeypatch.setenv(HEARTBEAT_ENV, "1")
    assert lock_settings().heartbeat_s == 1


def test_ads_build_refuses_bad_lock_settings_before_starting(tmp_path: Path):
    env = {**os.environ, LEASE_ENV: "abc"}
    ads = str(Path(sys.executable).with_name("ads"))
    result = subprocess.run(
        [ads, "build", "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines[-1] == f"error: {LEASE_ENV}='abc' is not a number of seconds", result.stderr
    assert not (tmp_path / "out").exists()
