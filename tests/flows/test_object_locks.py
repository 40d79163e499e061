"""Build locks in the object store (issue 22): an s3:// OUT keeps its lock in its own bucket, so two machines
building it take turns and a Dask worker checks the fence with no shared lock dir (moto's S3 server, which
honours `If-None-Match: *` as AWS does)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ads_core.locks.fence import Fence
from ads_core.locks.manager import BuildLockManager, LockLost, LockWaitTimeout, out_lock_key
from ads_core.locks.objectstore import ObjectLockStore
from ads_core.locks.place import also_for, store_for
from ads_core.locks.store import LOCK_DIR_ENV, DirLockStore, LockSettingsError

BUCKET = "ads-object-locks"


@pytest.fixture(scope="module")
def bucket(moto_s3: Any) -> str:
    import boto3

    boto3.client("s3", endpoint_url=moto_s3.endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture
def no_lock_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOCK_DIR_ENV, raising=False)


def test_an_s3_out_keeps_its_lock_in_its_bucket(bucket: str, no_lock_dir: None, tmp_path: Path, monkeypatch: Any):
    store = store_for(f"s3://{bucket}/builds/x")
    assert isinstance(store, ObjectLockStore) and store.location == f"s3://{bucket}/.ads-locks"
    assert store_for(str(tmp_path / "out")).location == str(tmp_path / "out" / ".lock")  # a local OUT: in OUT
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    assert isinstance(store_for(f"s3://{bucket}/builds/x"), DirLockStore)  # an explicit ADS_LOCK_DIR wins
    monkeypatch.setenv(LOCK_DIR_ENV, f"s3://{bucket}/shared-locks")
    assert store_for(str(tmp_path / "out")).location == str(tmp_path / "out" / ".lock")  # still OUT's own,
    assert also_for(str(tmp_path / "out")).location == f"s3://{bucket}/shared-locks"  # and an s3:// lock dir's


def test_two_machines_building_one_s3_out_take_turns(bucket: str, no_lock_dir: None, tmp_path: Path, monkeypatch: Any):
    out = f"s3://{bucket}/builds/turns"
    key = out_lock_key(out)
    machine_a, machine_b = BuildLockManager(), BuildLockManager()  # they share nothing but the bucket
    try:
        assert machine_a.acquire_lock(key, "build-a", store=store_for(out), acquire_timeout=5)
        other_spelling = f"S3://{bucket}//builds/turns/"
        with pytest.raises(LockWaitTimeout, match="held by"):
            machine_b.acquire_lock(
                out_lock_key(other_spelling), "build-b", store=store_for(other_spelling), acquire_timeout=1
            )
        fence_a = machine_a.fence(key)
        assert fence_a is not None and fence_a.store == f"s3://{bucket}/.ads-locks"
        monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "a-worker's-own-lock-dir"))  # empty: not where the lock is
        Fence.from_dict(fence_a.to_dict()).check()  # a worker checks A's token against the bucket: still A's
        monkeypatch.delenv(LOCK_DIR_ENV)
        machine_a.release_lock(key, "build-a")
        assert machine_b.acquire_lock(key, "build-b", store=store_for(out), acquire_timeout=5)
        fence_b = machine_b.fence(key)
        assert fence_b is not None and fence_b.token == fence_a.token + 1
        with pytest.raises(LockLost, match=r"took it over \(token 2 > 1\)"):
            Fence.from_dict(fence_a.to_dict()).check()  # A's work still in flight somewhere publishes nothing
        Fence.from_dict(fence_b.to_dict()).check()
    finally:
        machine_a.release_all()
        machine_b.release_all()
    newest = ObjectLockStore(f"s3://{bucket}/.ads-locks").newest(key)
    assert newest is not None and newest.number == 2 and newest.record["released"]


def test_a_lock_whose_holder_on_another_machine_stopped_renewing_is_taken_over(bucket: str, no_lock_dir: None):
    out = f"s3://{bucket}/builds/stale"
    key, store = out_lock_key(out), store_for(out)
    dead = {"holder": "flow-run:x", "nonce": "n", "host": "node-7", "pid": 4242, "lease_until": time.time() - 1}
    assert store.create(key, 1, dead)
    assert not store.create(key, 1, {**dead, "nonce": "late"})  # If-None-Match: the generation exists
    taker = BuildLockManager()
    try:
        assert taker.acquire_lock(key, "build-b", store=store, acquire_timeout=5)
        assert taker.fence(key).token == 2 and taker.taken_over[key]["host"] == "node-7"
    finally:
        taker.release_all()


def test_a_store_that_ignores_conditional_writes_is_refused(bucket: str, monkeypatch: pytest.MonkeyPatch):
    from ads_core import storage

    location = f"s3://{bucket}/unconditional-locks"
    fs, _ = storage.get_fs(location)  # the process's client for this store
    original = fs.pipe_file

    def unconditional(path: str, data: bytes, mode: str = "overwrite", **kwargs: Any) -> Any:
        return original(path, data, **kwargs)  # as a store without If-None-Match would

    monkeypatch.setattr(fs, "pipe_file", unconditional)
    store = ObjectLockStore(location)
    with pytest.raises(LockSettingsError, match=f"ignores conditional writes .* set {LOCK_DIR_ENV}"):
        store.create("out-x", 1, {"nonce": "a"})
    assert store.newest("out-x") is None
