"""The one sampler checkpoint file (`ads_core.sampler.checkpoint`), for every trainer: it round-trips a real saved
sampler state; a truncated, bit-flipped, re-serialised or older file is refused by the one reader with the one error
type, in one line naming the file; the write is atomic and fsynced; the trainer's own check runs inside the reader."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ads_core.sampler import checkpoint as ck
from ads_core.sampler.kinds import build_sampler
from ads_core.sampler.state import SamplerStateError
from ads_core.train.options import TrainConfig

CID = np.repeat(np.arange(4), 10)
RANK = np.tile(np.arange(10), 4)


def saved(kind: str = "ads", step: int = 3) -> ck.SamplerCheckpoint:
    """A real sampler's state after STEP updates, one drawn batch pending (as TRL's prefetch leaves it)."""
    sampler = build_sampler(kind, CID, RANK, TrainConfig().sampler, 128 if kind == "ads" else 8)
    rng = np.random.default_rng(0)
    for _ in range(step):
        rows = sampler.next_batch()
        sampler.update(rows, rng.random(len(rows)))
    pending = [{"index": step + 1, "rows": sampler.next_batch().tolist(), "after_updates": step}]
    return ck.SamplerCheckpoint(kind, step, sampler.state_dict(), pending, {"draws": step + 1, "updates": step})


def refused(folder: Path, *needles: str, step: int | None = 3) -> str:
    with pytest.raises(ck.CheckpointStateError) as info:
        ck.read_checkpoint(folder, step)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(folder / ck.FILE)), line
    for needle in needles:
        assert needle in line, line
    return line


@pytest.mark.parametrize("kind", ["ads", "uniform", "dots-lite"])
def test_a_checkpoint_round_trips_and_restores_the_sampler(kind: str, tmp_path: Path):
    original = saved(kind)
    path = ck.write_checkpoint(tmp_path, original)
    assert path == tmp_path / ck.FILE and ck.has_checkpoint(tmp_path)
    doc = json.loads(path.read_text())  # plain JSON: the header and the body
    assert list(doc) == ["sha256", "checkpoint"] and doc["checkpoint"]["format"] == ck.FORMAT
    back, _ = ck.read_checkpoint(tmp_path, 3)
    assert back == original
    fresh = build_sampler(kind, CID, RANK, TrainConfig().sampler, 128 if kind == "ads" else 8)
    fresh.load_state_dict(back.sampler)
    assert fresh.state_dict() == original.sampler


def test_a_truncated_file_is_refused_in_one_line(tmp_path: Path):
    path = ck.write_checkpoint(tmp_path, saved())
    data = path.read_bytes()
    for cut in (len(data) - 3, len(data) // 2, 10, 0):
        path.write_bytes(data[:cut])
        line = refused(tmp_path, "delete")
        assert "not a sampler checkpoint file" in line or "checksum mismatch" in line, line


def test_a_flipped_byte_is_refused_by_the_checksum(tmp_path: Path):
    path = ck.write_checkpoint(tmp_path, saved())
    data = bytearray(path.read_bytes())
    body = data.index(b'"checkpoint":') + 20
    for at in (body, body + 100, len(data) - 10):
        flipped = bytearray(data)
        flipped[at] ^= 0x01
        path.write_bytes(bytes(flipped))
        refused(tmp_path, "checksum mismatch")


def test_an_edited_body_with_its_own_header_recomputed_is_still_checked_field_by_field(tmp_path: Path):
    """The checksum is against damage, not a signature: a consistent file still passes every field check."""
    bad = saved()
    bad.step = 4  # a file moved into another step's folder
    ck.write_checkpoint(tmp_path, bad)
    refused(tmp_path, "at ['step']", "saved at step 4, but its folder is step 3")
    body = json.dumps({**saved().body(), "format": "something-else"}, separators=(",", ":")).encode()
    (tmp_path / ck.FILE).write_bytes(
        b'{"sha256":"' + hashlib.sha256(body).hexdigest().encode() + b'","checkpoint":' + body + b"}"
    )
    refused(tmp_path, "at ['format']")


@pytest.mark.parametrize(
    "old",
    [
        {"global_step": 3, "feed": {"updates": 3}},  # the former TRL file
        {"global_step": 3, "sampler": {"kind": "ADSSampler"}},  # the former verl file
    ],
)
def test_the_former_per_trainer_files_are_refused(old: dict, tmp_path: Path):
    (tmp_path / ck.FILE).write_text(json.dumps(old))
    refused(tmp_path, "not a sampler checkpoint file")


def test_a_missing_or_unreadable_file_is_the_same_error(tmp_path: Path):
    refused(tmp_path, "unreadable sampler checkpoint")
    (tmp_path / ck.FILE).mkdir()
    refused(tmp_path, "unreadable sampler checkpoint")


def test_the_trainers_check_runs_inside_the_reader(tmp_path: Path):
    ck.write_checkpoint(tmp_path, saved())

    def wrong_batch(checkpoint: ck.SamplerCheckpoint) -> None:
        raise SamplerStateError("state['prompts_per_step']", "saved with 8 prompts per step, this run has 16")

    with pytest.raises(ck.CheckpointStateError, match=r"at state\['prompts_per_step'\]: saved with 8 .*; resume"):
        ck.read_checkpoint(tmp_path, 3, check=wrong_batch, fix="resume with the options it was saved with")
    got, result = ck.read_checkpoint(tmp_path, 3, check=lambda c: len(c.pending))
    assert result == 1 and got.trainer == {"draws": 4, "updates": 3}


def test_the_write_is_atomic_and_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    ck.write_checkpoint(tmp_path, saved())
    assert len(synced) == 2  # the file, then its folder (the rename)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ck.FILE]  # no temporary file left

    def broken(*args: object) -> None:
        raise OSError(28, "No space left on device")

    before = (tmp_path / ck.FILE).read_bytes()
    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        ck.write_checkpoint(tmp_path, saved(step=4))
    assert (tmp_path / ck.FILE).read_bytes() == before  # the previous checkpoint is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == [ck.FILE]
