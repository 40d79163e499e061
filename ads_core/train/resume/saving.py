"""A checkpoint save and load that fail in one line: a full or read-only disk during a save (the partial folder
is removed, and the same command later resumes exactly from the previous checkpoint), non-finite loss, gradients
or weights (the run stops before anything is saved, naming the step), and a policy that does not fit the
checkpoint it resumes from (naming both, not thousands of characters of size mismatches)."""

from __future__ import annotations

import errno
import math
import re
import shutil
from pathlib import Path
from typing import Any

WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
_DISK_TEXT = (  # how libraries report a failed write without an errno (safetensors, torch's zip writer)
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
    "unexpected pos",
    "PytorchStreamWriter failed",
    "file write failed",
)
_MISMATCH = re.compile(
    r"size mismatch for ([\w.]+): copying a param with shape (.+?) from checkpoint, "
    r"the shape in current model is (.+?)\.(?=\s|$)"
)


def save_failure(exc: BaseException, folder: str) -> str | None:
    """What went wrong with the disk during a save of FOLDER, or None when EXC is not a disk error."""
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        why = exc.strerror or str(exc)
    elif any(text in str(exc) for text in _DISK_TEXT):
        why = "the write failed (a full disk?)"
    else:
        return None
    try:
        free = shutil.disk_usage(Path(folder).parent).free
        why += f", {free / 2**20:.1f} MiB free"
    except OSError:
        pass
    return why


def remove_partial(folder: str) -> bool:
    """A save this process started that failed (its caller checks that): removed, which gives back its space,
    only when provably incomplete (no manifest; the manifest is written last). Returns whether it was removed."""
    from ads_core.storage.manifest import has_checkpoint_manifest

    if has_checkpoint_manifest(folder):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def nonfinite_logs(logs: dict[str, Any]) -> str | None:
    """The first of the step's loss and gradient norm that is not finite, as ``loss nan``."""
    for key in ("loss", "grad_norm"):
        value = logs.get(key)
        if isinstance(value, int | float) and not math.isfinite(value):
            return f"{'the gradient norm' if key == 'grad_norm' else 'the loss'} is {value}"
    return None


def nonfinite_weights(model: Any) -> str | None:
    """The first parameter with a NaN or infinite value, or None."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if not bool(torch.isfinite(param).all()):
                return f"weight {name} holds NaN or infinite values"
    return None


def mismatch_line(exc: BaseException) -> str | None:
    """A summary of PyTorch's "size mismatch" wall of text (the first tensor and how many), or None."""
    found = _MISMATCH.findall(str(exc))
    if not found and "size mismatch" not in str(exc) and "Missing key" not in str(exc):
        return None
    if not found:
        return "its weights do not match the model's (missing or unexpected tensors)"
    name, saved, model = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return f"{len(found)} weights differ in shape ({name}: checkpoint {saved}, model {model}{more})"
