"""Where a resume starts: the newest verified checkpoint (`checkpoints`), checked against the run's recorded
trajectory (`identity`), and the per-step log repaired to it. Nothing in the run folder changes until the
resume is accepted (`Resume.accept`), so a refused resume leaves the folder as it was."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.storage import manifest as mf
from ads_core.train.errors import RunStateError
from ads_core.train.resume import checkpoints, identity

log = logging.getLogger("ads.train")


@dataclass
class Resume:
    run_id: str
    point: tuple[int, Path] | None  # (step, checkpoint folder); None: from step 0
    choice: checkpoints.Choice
    notes: list[str] = field(default_factory=list)

    def accept(self) -> list[str]:
        """Move the checkpoints newer than the resume point that failed (or have no manifest) aside (rank 0)."""
        if os.environ.get("RANK", "0") != "0":
            return []
        lines = checkpoints.set_aside(self.choice)
        for line in lines:
            log.warning("%s", line)
        return lines


def _legacy(checkpoints_dir: str) -> list[Path]:
    """Checkpoints that look complete but have no manifest (saved by an ads without checked checkpoints)."""
    return [
        f
        for _, f in checkpoints.checkpoint_folders(checkpoints_dir)
        if not mf.has_checkpoint_manifest(f) and (f / "trainer_state.json").is_file()
    ]


def find_resume(plan: Any, checkpoints_dir: str, horizon: int | None) -> Resume:
    """The run's resume point and identity; RunStateError (one line) when it can't resume exactly."""
    now = identity.trajectory(plan, horizon)
    doc = identity.read_run(plan.run_dir)
    run_id = str(doc["run_id"]) if doc and isinstance(doc.get("run_id"), str) else None
    choice = checkpoints.newest_verified(checkpoints_dir, run_id)  # its warnings are logged once, when set aside
    if choice.chosen is None:
        failed = [w for f, w in zip(choice.rejected, choice.warnings, strict=True) if f not in choice.incomplete]
        if failed:
            raise RunStateError(
                f"no checkpoint of {plan.run_dir} verifies ({failed[0]}): restore the file, or delete "
                f"{checkpoints_dir} to train again from step 0"
            )
        legacy = _legacy(checkpoints_dir)
        if legacy:
            raise RunStateError(
                f"{legacy[-1]} has no {mf.CHECKPOINT_MANIFEST} (saved by an ads without checked checkpoints): "
                f"resume it with that version, or delete {checkpoints_dir} to train again from step 0"
            )
        return Resume(identity.start_run(plan.run_dir, now, facts=identity.about(plan)), None, choice)
    step, folder = choice.chosen
    missing = checkpoints.missing_exact_state(folder)
    if missing:
        raise RunStateError(
            f"{folder} holds no {missing}: a resume from it would not be exact; restore it, or delete {folder} to "
            "resume from an older checkpoint"
        )
    notes = []
    if doc is None:
        run_id = mf.checkpoint_run_id(folder)
        log.warning("%s/%s is missing: recording this command's options as the run's", plan.run_dir, identity.RUN_FILE)
        identity.start_run(plan.run_dir, now, run_id, identity.about(plan))
    else:
        doc = identity.with_new_options(doc, now, plan)
        notes = identity.check_resume(plan.run_dir, doc, now, list(plan.config.allow_change), step)
    assert run_id is not None
    return Resume(run_id, (step, folder), choice, notes)
