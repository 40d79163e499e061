"""Storage layer: round-trips on a local directory, file:// and memory://, and atomic writes under SIGKILL."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.ingest import sources
from ads_core.storage import errors as storage_errors
from ads_core.storage import manifest as mf

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["local", "file", "memory"])
def root(request, tmp_path) -> Iterator[str]:
    """A fresh storage root on each backend (memory:// is process-global, so it gets a unique name)."""
    if request.param == "local":
        yield str(tmp_path / "store")
    elif request.param == "file":
        yield f"file://{tmp_path}/store"
    else:
        uri = f"memory://ads-test-{uuid.uuid4().hex}"
        yield uri
        fs = fsspec.filesystem("memory")
        if fs.exists(uri):
            fs.rm(uri, recursive=True)


def small_table() -> pa.Table:
    return pa.table(
        {
            "sample_id": pa.array([3, 1, 2], pa.int64()),
            "question": ["What is 1+1?", "Ünïcødé ∑ question", None],
            "tags": [["a"], [], ["b", "c"]],
        }
    )


def test_bytes_round_trip(root):
    uri = storage.join(root, "deep", "dir", "blob.bin")
    data = bytes(range(256)) * 100
    storage.write_bytes(uri, data)
    assert storage.exists(uri)
    assert storage.read_bytes(uri) == data


def test_write_bytes_overwrites(root):
    uri = storage.join(root, "blob.bin")
    storage.write_bytes(uri, b"old")
    storage.write_bytes(uri, b"new content")
    assert storage.read_bytes(uri) == b"new content"


def test_json_round_trip(root):
    uri = storage.join(root, "obj.json")
    obj = {"rows_in": 3, "nested": {"list": [1, 2.5, None], "text": "∑ ünïcødé"}, "flag": True}
    storage.write_json(uri, obj)
    assert storage.read_json(uri) == obj


def test_parquet_round_trip(root):
    uri = storage.join(root, "t.parquet")
    table = small_table()
    storage.write_parquet(uri, table)
    assert storage.read_parquet(uri).equals(table)
    assert storage.read_parquet(uri, columns=["question"]).equals(table.select(["question"]))
    assert storage.parquet_num_rows(uri) == 3


def test_content_hash_is_sha256_of_the_bytes(root):
    uri = storage.join(root, "blob.bin")
    data = os.urandom(3 * (1 << 20) + 7)  # spans several hash chunks
    storage.write_bytes(uri, data)
    assert storage.content_hash(uri) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert storage.bytes_hash(data) == storage.content_hash(uri)


def test_tree_hash_follows_names_and_bytes(root):
    folder = storage.join(root, "data")
    storage.write_bytes(storage.join(folder, "a.jsonl"), b'{"q": 1}\n')
    storage.write_bytes(storage.join(folder, "sub", "b.jsonl"), b'{"q": 2}\n')
    before = storage.tree_hash(folder)
    assert storage.tree_hash(folder) == before

    storage.write_bytes(storage.join(folder, "sub", "b.jsonl"), b'{"q": 3}\n')
    changed = storage.tree_hash(folder)
    assert changed != before

    storage.write_bytes(storage.join(folder, "c.jsonl"), b"")
    assert storage.tree_hash(folder) != changed
    assert storage.tree_hash(storage.join(folder, "a.jsonl")) == storage.content_hash(storage.join(folder, "a.jsonl"))


def test_tree_hash_ignores_other_suffixes_when_asked(root):
    folder = storage.join(root, "data")
    storage.write_bytes(storage.join(folder, "a.jsonl"), b"{}\n")
    before = storage.tree_hash(folder, (".jsonl",))
    storage.write_bytes(storage.join(folder, "notes.txt"), b"not data")
    assert storage.tree_hash(folder, (".jsonl",)) == before
    assert storage.tree_hash(folder) != before


def test_atomic_local_file_publishes_on_clean_exit(root):
    uri = storage.join(root, "out", "result.parquet")
    with storage.atomic_local_file(uri, ".parquet") as tmp:
        assert not storage.exists(uri)
        tmp.write_bytes(b"complete")
    assert storage.read_bytes(uri) == b"complete"
    assert not tmp.exists()


def test_atomic_local_file_publishes_nothing_on_error(root):
    uri = storage.join(root, "result.bin")
    storage.write_bytes(uri, b"old")
    with pytest.raises(RuntimeError), storage.atomic_local_file(uri) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert storage.read_bytes(uri) == b"old"
    assert not tmp.exists()


def test_local_writes_leave_no_temp_files(tmp_path):
    storage.write_bytes(str(tmp_path / "a.bin"), b"a")
    storage.write_json(str(tmp_path / "b.json"), {"b": 1})
    with storage.atomic_local_file(str(tmp_path / "c.bin")) as tmp:
        tmp.write_bytes(b"c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.json", "c.bin"]


def test_local_path_and_is_local(tmp_path):
    assert storage.is_local(str(tmp_path))
    assert storage.local_path(f"file://{tmp_path}/x.json") == tmp_path / "x.json"
    assert not storage.is_local("memory://somewhere")
    with pytest.raises(ValueError, match="not on the local filesystem"):
        storage.local_path("memory://somewhere/x.json")


def test_join_keeps_the_scheme():
    assert storage.join("s3://bucket/run/", "formatted", "/train.parquet") == "s3://bucket/run/formatted/train.parquet"
    assert storage.join("memory://root", "a") == "memory://root/a"


def test_s3_endpoint_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ADS_S3_ENDPOINT_URL", "http://127.0.0.1:9999")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    opts = storage_errors.storage_options("s3://bucket/key")
    assert opts["endpoint_url"] == "http://127.0.0.1:9999"
    assert opts["client_kwargs"] == {"region_name": "eu-west-1"}
    assert storage_errors.storage_options("/local/path") == {}


# ---------------------------------------------------------------------------------------------
# A writer killed part-way never leaves a file that looks complete.

SLOW_STREAM_WRITER = """
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
from ads_core import storage

target = sys.argv[1]
chunk = pa.table({"x": pa.array(range(50_000), pa.int64())})
with storage.atomic_local_file(target, ".parquet") as tmp:
    with pq.ParquetWriter(tmp, chunk.schema) as writer:
        for i in range(100_000):
            writer.write_table(chunk)
            if i == 3:
                print(tmp, flush=True)
            time.sleep(0.005)
"""

SLOW_WRITE_BYTES = """
import os, sys, time
from ads_core import storage

def slow_fsync(fd):  # the bytes are in the temp file; hang before the rename
    print("fsync", flush=True)
    time.sleep(120)

os.fsync = slow_fsync
storage.write_bytes(sys.argv[1], b"new" * (4 << 20))
"""


def start_writer(script: str, target: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
    )


def kill_after_line(proc: subprocess.Popen[str]) -> str:
    """Wait for the writer's progress line, then SIGKILL it (no cleanup code can run)."""
    line = proc.stdout.readline().strip()
    assert line, "the writer exited before it started writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return line


def leftover_temp_files(folder: Path, target: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p != target]


def test_killed_streaming_writer_leaves_no_target(tmp_path):
    target = tmp_path / "train.parquet"
    proc = start_writer(SLOW_STREAM_WRITER, target)
    tmp = Path(kill_after_line(proc))

    assert not target.exists()
    partial = leftover_temp_files(tmp_path, target)
    assert partial == [tmp], "the writer was killed before it wrote anything"
    assert tmp.stat().st_size > 0
    # The partial file is hidden, so a later run that reads the directory never picks it up.
    assert tmp.name.startswith(".")
    with pytest.raises(InputError, match="holds no"):
        sources.list_source_files(str(tmp_path))


def test_killed_streaming_writer_keeps_the_old_artifact_and_its_manifest(tmp_path):
    stage = tmp_path / "formatted"
    target = stage / "train.parquet"
    old = pa.table({"x": pa.array([1, 2, 3], pa.int64())})
    storage.write_parquet(str(target), old)
    manifest = mf.Manifest(
        stage="format", inputs={}, outputs={"train": mf.output_entry(str(target), 3)}, config={}, code_version="test"
    )
    mf.write(str(stage), manifest)

    proc = start_writer(SLOW_STREAM_WRITER, target)
    kill_after_line(proc)

    assert storage.read_parquet(str(target)).equals(old)
    verified = mf.verify(str(stage))
    assert verified is not None and verified.to_dict() == manifest.to_dict()
    assert sorted(p.name for p in stage.iterdir() if not p.name.startswith(".")) == ["manifest.json", "train.parquet"]


def test_killed_write_bytes_keeps_the_old_content(tmp_path):
    target = tmp_path / "blob.bin"
    target.write_bytes(b"old content")
    proc = start_writer(SLOW_WRITE_BYTES, target)
    kill_after_line(proc)

    assert target.read_bytes() == b"old content"
    partial = leftover_temp_files(tmp_path, target)
    assert len(partial) == 1 and partial[0].name.startswith(".blob.bin.") and partial[0].suffix == ".tmp"
    assert partial[0].stat().st_size == 3 * (4 << 20)  # all bytes written, killed before the rename


def test_killed_write_bytes_leaves_no_target(tmp_path):
    target = tmp_path / "fresh.json"
    proc = start_writer(SLOW_WRITE_BYTES, target)
    kill_after_line(proc)

    assert not target.exists()
    [partial] = tmp_path.iterdir()
    assert partial.name.startswith(".fresh.json.") and partial.suffix == ".tmp"


# ---------------------------------------------------------------------------------------------
# Our leftover temp files are removed by the next run; others' files and live writers' temps survive.

WRITE_ONE = """
import sys
from ads_core import storage
storage.write_bytes(sys.argv[1], b"rerun")
"""


def run_writer(script: str, target: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", script, str(target)], check=True, env=env, cwd=REPO_ROOT, timeout=120)


@pytest.mark.parametrize("script", [SLOW_WRITE_BYTES, SLOW_STREAM_WRITER], ids=["write_bytes", "streaming"])
def test_the_next_run_removes_a_killed_writers_temp_file(tmp_path, script):
    target = tmp_path / "train.parquet"
    kill_after_line(start_writer(script, target))
    [partial] = leftover_temp_files(tmp_path, target)
    assert storage.is_our_temp(partial.name)

    run_writer(WRITE_ONE, tmp_path / "manifest.json")  # a later run writing anything into the stage folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_a_live_writers_temp_file_survives_cleanup(tmp_path):
    target = tmp_path / "train.parquet"
    proc = start_writer(SLOW_STREAM_WRITER, target)
    try:
        tmp = Path(proc.stdout.readline().strip())
        assert tmp.exists()
        assert storage.clean_stale_temps(str(tmp_path)) == []
        run_writer(WRITE_ONE, tmp_path / "manifest.json")
        assert tmp.exists() and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()


def test_clean_stale_temps_removes_only_our_old_or_orphaned_files(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    host = storage._temp_name("x").split("-")[-2]  # this host's tag, as our writers spell it
    uid = uuid.uuid4().hex
    names = {
        f".train.parquet.{uid}-{host}-{dead_pid}.tmp.parquet": "removed",  # writer gone
        f".manifest.json.{uid}-{host}-{os.getpid()}.tmp": "kept",  # a live writer (this process)
        f".manifest.json.{uid}-0badc0de-{dead_pid}.tmp": "kept",  # another host: age decides, and it is fresh
        f".stats.json.{uid}-0badc0de-1.tmp": "old",  # another host, past the grace period
        ".train.parquet.ab12cd34.tmp.parquet": "kept",  # an older writer's name, fresh
        ".manifest.json.k_3x9q0z.tmp": "old",  # mkstemp-style name from an older writer, past the grace period
        "train.parquet": "old",
        ".hidden": "old",
        ".notes.tmp": "old",
        "x.tmp": "old",
        f".mine.{uid}.tmp": "old",  # not our pattern (e.g. another tool's temp)
    }
    long_ago = time.time() - 7200
    for name, fate in names.items():
        (tmp_path / name).write_bytes(b"x")
        if fate == "old":
            os.utime(tmp_path / name, (long_ago, long_ago))
    os.mkdir(tmp_path / f".dir.{uid}-{host}-{dead_pid}.tmp")  # a folder is never ours to remove

    removed = storage.clean_stale_temps(str(tmp_path), older_than_s=3600)
    ours_old = {".stats.json." + f"{uid}-0badc0de-1.tmp", ".manifest.json.k_3x9q0z.tmp"}
    assert set(removed) == {n for n, f in names.items() if f == "removed"} | ours_old
    assert {p.name for p in tmp_path.iterdir()} == (set(names) - set(removed)) | {f".dir.{uid}-{host}-{dead_pid}.tmp"}
    assert storage.clean_stale_temps(str(tmp_path / "absent")) == []
    assert storage.clean_stale_temps("memory://somewhere") == []


# ---------------------------------------------------------------------------------------------
# Every artifact gets the mode a normal new file gets (0o666 & ~umask), whichever helper wrote it.


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_artifacts_follow_the_umask(tmp_path, umask):
    import numpy as np
    import pyarrow.parquet as pq

    old = os.umask(umask)
    try:
        with open(tmp_path / "plain.txt", "w") as fh:  # what any program's new file gets
            fh.write("x")
        storage.write_bytes(str(tmp_path / "a.bin"), b"a")
        storage.write_json(str(tmp_path / "stage" / "manifest.json"), {"a": 1})
        storage.write_parquet(str(tmp_path / "final" / "train.parquet"), small_table())
        with storage.atomic_local_file(str(tmp_path / "formatted" / "train.parquet"), ".parquet") as tmp:
            pq.write_table(small_table(), tmp)
        with storage.atomic_local_file(str(tmp_path / "pca.npy"), ".npy") as tmp:
            np.save(tmp, np.zeros(3))
            os.chmod(tmp, 0o600)  # a writer that picks its own mode
    finally:
        os.umask(old)
    expected = (tmp_path / "plain.txt").stat().st_mode & 0o777
    assert expected == 0o666 & ~umask
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 6
    assert {p.relative_to(tmp_path).as_posix(): p.stat().st_mode & 0o777 for p in files} == {
        p.relative_to(tmp_path).as_posix(): expected for p in files
    }
