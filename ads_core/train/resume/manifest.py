"""Checked checkpoints: every ``checkpoint-N`` folder gets ``ads_manifest.json``, written last, after every file
of the checkpoint is fsynced: each file's size and sha256, the step, and the run's identity (``run_id``, from
``RUN_DIR/run.json``). A checkpoint counts only with its manifest, and a resume re-hashes the newest one: a
missing, truncated or changed file (flipped bytes in ``optimizer.pt``, an edited ``global_step`` in
``trainer_state.json``) fails it, with one warning naming the file, and the previous verified one is used.

Rotation is ours, not HF's ``save_total_limit``: it runs after a new checkpoint's manifest is written, and keeps
the newest ``keep`` checkpoints that have one, so the newest verified checkpoint is never deleted before the next
one is complete. A resume also refuses a checkpoint saved without its optimizer or RNG state (not exact).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.storage import fencing

MANIFEST = "ads_manifest.json"
FORMAT = "ads-checkpoint-manifest"
CHECKPOINT = re.compile(r"checkpoint-(\d+)")
REJECTED_PREFIX = "rejected-"
EXACT_STATE = (("optimizer", ("optimizer.pt", "optimizer.bin")), ("RNG", ("rng_state.pth", "rng_state_0.pth")))
_CHUNK = 8 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST and not p.name.startswith("."))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(folder: str | os.PathLike[str], step: int, run_id: str) -> Path:
    """Fsync every file of FOLDER, then write its manifest atomically (the checkpoint is complete once it lands);
    fenced: a run that lost its lock on the run folder publishes no checkpoint."""
    root = Path(folder)
    files: dict[str, dict[str, Any]] = {}
    for path in _files(root):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        files[path.relative_to(root).as_posix()] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    for sub in sorted({p.parent for p in _files(root)} | {root}):
        _fsync_dir(sub)
    doc = {"format": FORMAT, "version": 1, "step": int(step), "run_id": run_id, "files": files}
    target = root / MANIFEST
    tmp = root / f".{MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1, sort_keys=True))
        fh.flush()
        os.fsync(fh.fileno())
    fencing.check_publish(str(target))  # LockLost: the checkpoint stays without a manifest, never counted
    os.replace(tmp, target)
    _fsync_dir(root)
    return target


def _problem(root: Path, step: int, run_id: str | None) -> str | None:
    """Why FOLDER is not a verified checkpoint of STEP of run RUN_ID (None: it is), naming the file."""
    path = root / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{path}: missing (a save that did not finish, or a deleted manifest)"
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({exc})"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict):
        return f"{path}: not a checkpoint manifest"
    if doc.get("step") != step:
        return f"{path}: says step {doc.get('step')}, the folder step {step}"
    if run_id is not None and doc.get("run_id") != run_id:
        return f"{path}: belongs to another run ({doc.get('run_id')}, this run is {run_id})"
    for rel, entry in sorted(doc["files"].items()):
        file = root / rel
        try:
            size = file.stat().st_size
            if size != entry.get("size"):
                return f"{file}: truncated or changed ({size} bytes, its manifest says {entry.get('size')})"
            if _sha256(file) != entry.get("sha256"):
                return f"{file}: changed since it was saved (its sha256 differs from the manifest's)"
        except FileNotFoundError:
            return f"{file}: missing"
        except OSError as exc:
            return f"{file}: unreadable ({exc.strerror or exc})"
    return None


def manifest_run_id(folder: str | os.PathLike[str]) -> str | None:
    try:
        value = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def checkpoint_folders(root: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(step, folder) of every ``checkpoint-N`` folder, oldest first (complete or not)."""
    base = Path(root)
    found = []
    for child in base.iterdir() if base.is_dir() else ():
        m = CHECKPOINT.fullmatch(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child))
    return sorted(found)


def has_manifest(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def missing_exact_state(folder: str | os.PathLike[str]) -> str | None:
    """The state a checkpoint lacks for an exact resume (its optimizer's, its RNG's), or None."""
    base = Path(folder)
    for what, names in EXACT_STATE:
        if not any((base / n).is_file() for n in names):
            return f"{what} state ({' or '.join(names)})"
    return None


@dataclass
class Choice:
    """What a resume found: the newest verified checkpoint, why newer ones were skipped, and what to set aside."""

    chosen: tuple[int, Path] | None = None
    warnings: list[str] = field(default_factory=list)
    rejected: list[Path] = field(default_factory=list)  # newer than the chosen one and failed: moved aside, kept
    incomplete: list[Path] = field(default_factory=list)  # of those, the ones without a manifest


def newest_verified(root: str | os.PathLike[str], run_id: str | None) -> Choice:
    """Verify checkpoints newest first until one passes (see the module). A folder without its manifest (a save
    killed by an earlier process, or a manifest deleted by hand) fails like any other: it is never deleted."""
    choice = Choice()
    for step, folder in reversed(checkpoint_folders(root)):
        if not has_manifest(folder):
            choice.incomplete.append(folder)
        problem = _problem(folder, step, run_id)
        if problem is None:
            choice.chosen = (step, folder)
            break
        choice.rejected.append(folder)
        choice.warnings.append(f"{folder.name} skipped: {problem}")
    return choice


def aside_name(folder: Path) -> Path:
    """``rejected-checkpoint-N`` beside FOLDER, or ``rejected-checkpoint-N.2``, ``.3``... when that one is taken
    (an earlier resume set another aside): nothing set aside is ever overwritten."""
    target, n = folder.with_name(REJECTED_PREFIX + folder.name), 2
    while target.exists():
        target, n = folder.with_name(f"{REJECTED_PREFIX}{folder.name}.{n}"), n + 1
    return target


def set_aside(choice: Choice) -> list[str]:
    """After a resume point is chosen: move every rejected checkpoint (a failed check, or no manifest) to
    ``rejected-checkpoint-N``, kept for a look; returns one line per folder moved: why, and where it went."""
    lines = []
    for folder, warning in zip(choice.rejected, choice.warnings, strict=True):
        if not folder.exists():
            continue
        target = aside_name(folder)
        os.replace(folder, target)
        lines.append(f"{warning}; moved to {target} (nothing deleted)")
    return lines


def rotate(root: str | os.PathLike[str], keep: int) -> list[Path]:
    """Delete the checkpoints older than the newest KEEP with a manifest (called right after a manifest is
    written, so the newest verified checkpoint is one of those kept); returns what was deleted."""
    folders = checkpoint_folders(root)
    kept = [f for _, f in folders if has_manifest(f)][-keep:]
    if len(kept) < keep:
        return []
    oldest_kept = int(CHECKPOINT.fullmatch(kept[0].name).group(1))  # type: ignore[union-attr]
    deleted = []
    for step, folder in folders:
        if step < oldest_kept:
            shutil.rmtree(folder, ignore_errors=True)
            deleted.append(folder)
    return deleted
