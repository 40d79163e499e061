"""One build per OUT, whoever starts it (issue 51): a local OUT's lock lives with the OUT, so two builds with
different ADS cache folders meet there, and `ads format` takes the same lock. (Before, the lock lived in
`<ADS cache dir>/locks`: two builds with different `ADS_CACHE_DIR` both ran, and `ads format` took none.) The end
to end case, a flow run waiting on a build started elsewhere, is in tests/flows/test_reliability.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.locks.manager import LockWaitTimeout, out_lock_key, owning
from ads_core.locks.store import HEARTBEAT_ENV, LEASE_ENV, LOCK_DIR_ENV, WAIT_ENV, DirLockStore

HOLD_OUT = """
import sys, time
from pathlib import Path
from ads_core.locks.manager import owning
with owning(sys.argv[1], "flow-run:elsewhere"):
    Path(sys.argv[2]).write_text("held")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.05)
"""


@pytest.fixture
def no_lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ADS_LOCK_DIR, a one-second wait, and this process's own cache folder."""
    for name in (LOCK_DIR_ENV, LEASE_ENV, HEARTBEAT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(WAIT_ENV, "1")
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache-here"))
    return tmp_path / "cache-here"


@contextmanager
def held_elsewhere(out: Path, cache: Path) -> Iterator[None]:
    """OUT held by another process that uses cache folder CACHE (and no ADS_LOCK_DIR) for the block."""
    held, done = out.parent / "held", out.parent / "done"
    env = {k: v for k, v in os.environ.items() if k != LOCK_DIR_ENV} | {"ADS_CACHE_DIR": str(cache)}
    child = subprocess.Popen([sys.executable, "-c", HOLD_OUT, str(out), str(held), str(done)], env=env)
    try:
        deadline = time.monotonic() + 60  # a bound, not a timing claim
        while not held.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the holder died or never held OUT"
            time.sleep(0.02)
        yield
    finally:
        done.write_text("")
        assert child.wait(30) == 0


def test_builds_with_different_cache_folders_take_turns_on_one_out(no_lock_dir: Path, tmp_path: Path):
    out = tmp_path / "out"
    key = out_lock_key(str(out))
    with held_elsewhere(out, tmp_path / "cache-there"):
        newest = DirLockStore(out / ".lock").newest(key)  # OUT's lock, beside what it guards
        assert newest is not None and newest.record["holder"] == "flow-run:elsewhere"
        with pytest.raises(LockWaitTimeout, match=r"held by \S+ \(holder flow-run:elsewhere\)"):
            with owning(f"file://{out}/", "flow-run:here"):  # any spelling of OUT
                pass
    with owning(str(out), "flow-run:here") as mine:  # once the other is done
        assert mine.fence.store == str(out / ".lock") and mine.fence.token == 2
    assert not (tmp_path / "cache-there" / "locks").exists() and not (no_lock_dir / "locks").exists()


def test_ads_format_takes_outs_lock(no_lock_dir: Path, tmp_path: Path):
    """A build elsewhere holds OUT: `ads format` waits for it, gives up after ADS_LOCK_WAIT_S in one line and
    writes nothing; once OUT is free it formats, under the lock."""
    source = tmp_path / "rows.jsonl"
    rows = [{"question": f"What is {i}+1?", "answer": str(i + 1)} for i in range(8)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    with held_elsewhere(out, tmp_path / "cache-there"):
        refused = CliRunner().invoke(app, ["format", str(source), "--out", str(out)])
    assert refused.exit_code == 2, refused.output
    [line] = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert f"gave up waiting for the build lock {out} held by" in line and "flow-run:elsewhere" in line, line
    assert not (out / "formatted").exists()
    done = CliRunner().invoke(app, ["format", str(source), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / "formatted" / "train.parquet").is_file()
    newest = DirLockStore(out / ".lock").newest(out_lock_key(str(out)))
    assert newest is not None and newest.number == 2 and newest.record["released"]
    assert newest.record["holder"] == f"format:{os.getpid()}"
