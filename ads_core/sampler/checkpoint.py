"""One sampler checkpoint file for every trainer: ``ads_sampler.json`` in the trainer's checkpoint folder.

It holds the sampler kind, the optimizer step it was saved at, the sampler's own state (``state_dict``), the
batches drawn but not yet rewarded (TRL's dataloader draws one ahead; verl draws lazily, so none), the
trainer's own counters, and a SHA-256 of its own bytes:

    {"sha256":"<hex of BODY>","checkpoint":BODY}
    BODY = {"format":"ads-sampler-checkpoint","version":1,"kind":"ads","step":4,"sampler":{...},
            "pending":[{"index":5,"rows":[...],"after_updates":4}],"trainer":{...}}

The file is plain JSON, never pickle. `write_checkpoint` writes it atomically (a temporary file, fsync, rename,
fsync of the folder), so a killed save leaves the previous file or none. `read_checkpoint` is the one reader:
it checks the checksum before it parses, then every field, then (``check``) the trainer's fit to this run, all
before anything is restored; every failure is a `CheckpointStateError` whose one line names the file, the field
and what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ads_core.sampler.state import SamplerStateError, refuse, state_int, state_mapping

FILE = "ads_sampler.json"
FORMAT = "ads-sampler-checkpoint"
VERSION = 1
KEYS = ("format", "version", "kind", "step", "sampler", "pending", "trainer")
_LAYOUT = re.compile(rb'\{"sha256":"([0-9a-f]{64})","checkpoint":(.*)\}\n?', re.DOTALL)
T = TypeVar("T")


class CheckpointStateError(ValueError):
    """A checkpoint's sampler state can't be resumed from; the one-line message names the file, the field and
    what to do. The only error a sampler checkpoint is refused with, for every trainer."""


@dataclass
class SamplerCheckpoint:
    kind: str  # the sampler kind (ads, uniform, dots, ...)
    step: int  # optimizer steps trained when it was saved
    sampler: dict[str, Any]  # the sampler's own state_dict
    pending: list[Any] = field(default_factory=list)  # drawn, not yet rewarded batches (oldest first)
    trainer: dict[str, Any] = field(default_factory=dict)  # the trainer's own counters (e.g. TRL's draws)

    def body(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "kind": self.kind, "step": int(self.step)} | {
            "sampler": self.sampler,
            "pending": self.pending,
            "trainer": self.trainer,
        }


def encode(checkpoint: SamplerCheckpoint) -> bytes:
    """The file's bytes: the body, and the SHA-256 of exactly those body bytes in front of it."""
    body = json.dumps(checkpoint.body(), separators=(",", ":")).encode()
    return b'{"sha256":"' + hashlib.sha256(body).hexdigest().encode() + b'","checkpoint":' + body + b"}\n"


def write_checkpoint(folder: str | Path, checkpoint: SamplerCheckpoint) -> Path:
    """``FOLDER/ads_sampler.json``, atomically and durably (temporary file, fsync, rename, fsync of FOLDER)."""
    path = Path(folder) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(encode(checkpoint))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power cut
    finally:
        os.close(fd)
    return path


def decode(data: bytes, step: int | None = None) -> SamplerCheckpoint:
    """Check and parse a file's bytes; raises SamplerStateError (field ``""`` for the file as a whole)."""
    m = _LAYOUT.fullmatch(data)
    if m is None:
        raise SamplerStateError("", "not a sampler checkpoint file (no sha256 header; truncated, or another format)")
    if hashlib.sha256(m.group(2)).hexdigest() != m.group(1).decode():
        raise SamplerStateError("", "checksum mismatch: the file was changed or cut after it was written")
    try:
        doc = json.loads(m.group(2))
    except (ValueError, RecursionError) as exc:  # RecursionError: deeply nested JSON
        raise SamplerStateError("", f"unreadable JSON ({exc})") from None
    state_mapping(doc, "", KEYS)
    if doc["format"] != FORMAT:
        refuse("['format']", repr(FORMAT), doc["format"])
    if not (isinstance(doc["version"], int) and not isinstance(doc["version"], bool) and doc["version"] == VERSION):
        refuse("['version']", f"version {VERSION}", doc["version"])
    if not (isinstance(doc["kind"], str) and doc["kind"]):
        refuse("['kind']", "a sampler kind", doc["kind"])
    saved = state_int(doc["step"], "['step']")
    if step is not None and saved != step:
        raise SamplerStateError("['step']", f"saved at step {saved}, but its folder is step {step}")
    for key, kind in (("sampler", Mapping), ("pending", list), ("trainer", Mapping)):
        if not isinstance(doc[key], kind):
            refuse(f"[{key!r}]", "a list" if kind is list else "a dict", doc[key])
    return SamplerCheckpoint(doc["kind"], saved, dict(doc["sampler"]), list(doc["pending"]), dict(doc["trainer"]))


def read_checkpoint(
    folder: str | Path,
    step: int | None = None,
    check: Callable[[SamplerCheckpoint], T] | None = None,
    fix: str | None = None,
) -> tuple[SamplerCheckpoint, T | None]:
    """The checkpoint in ``FOLDER/ads_sampler.json``, checked all or nothing: its bytes (checksum), every field,
    the step (``step``: the folder's), then ``check(checkpoint)`` (the trainer's fit to this run, e.g. loading the
    sampler state into a fresh sampler), whose result is returned with it. Any failure: CheckpointStateError."""
    path = Path(folder) / FILE
    fix = fix or f"delete {Path(folder)} to resume from the checkpoint before it, or start under a new name"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointStateError(f"{path}: unreadable sampler checkpoint ({exc.strerror or exc}); {fix}") from None
    try:
        checkpoint = decode(data, step)
        checked = check(checkpoint) if check is not None else None
    except SamplerStateError as exc:
        where = f" at {exc.field}" if exc.field else ""
        raise CheckpointStateError(f"{path}: bad sampler checkpoint{where}: {exc.problem}; {fix}") from None
    return checkpoint, checked


def has_checkpoint(folder: str | Path) -> bool:
    return (Path(folder) / FILE).is_file()
