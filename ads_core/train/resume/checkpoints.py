"""Which checkpoint a resume uses, and the checkpoints folder kept tidy. Each ``checkpoint-N`` folder counts only
with its manifest (``ads_manifest.json``, written last: `ads_core.storage.manifest.write_checkpoint`, the one
manifest module), and a resume re-hashes the newest one: a missing, truncated or changed file (flipped bytes in
``optimizer.pt``, an edited ``global_step`` in ``trainer_state.json``) fails it, with one warning naming the file,
and the previous verified one is used.

Rotation is ours, not HF's ``save_total_limit``: it runs after a new checkpoint's manifest is written, and keeps
the newest ``keep`` checkpoints that have one, so the newest verified checkpoint is never deleted before the next
one is complete. A resume also refuses a checkpoint saved without its optimizer or RNG state (not exact).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ads_core.storage import manifest as mf

CHECKPOINT = re.compile(r"checkpoint-(\d+)")
REJECTED_PREFIX = "rejected-"
EXACT_STATE = (("optimizer", ("optimizer.pt", "optimizer.bin")), ("RNG", ("rng_state.pth", "rng_state_0.pth")))


def checkpoint_folders(root: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(step, folder) of every ``checkpoint-N`` folder, oldest first (complete or not)."""
    base = Path(root)
    found = []
    for child in base.iterdir() if base.is_dir() else ():
        m = CHECKPOINT.fullmatch(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child))
    return sorted(found)


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
        if not mf.has_checkpoint_manifest(folder):
            choice.incomplete.append(folder)
        problem = mf.checkpoint_problem(folder, step, run_id)
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
    kept = [f for _, f in folders if mf.has_checkpoint_manifest(f)][-keep:]
    if len(kept) < keep:
        return []
    oldest_kept = int(CHECKPOINT.fullmatch(kept[0].name).group(1))  # type: ignore[union-attr]
    deleted = []
    for step, folder in folders:
        if step < oldest_kept:
            shutil.rmtree(folder, ignore_errors=True)
            deleted.append(folder)
    return deleted
