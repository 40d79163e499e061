"""What this machine offers a trainer: CUDA GPUs, installed packages. The trainers' `can_run_here` (asked by
`trainer: auto`, see `ads_core.train.trainers.choose_trainer`) and their launch checks read these, so a test can
stand in for a GPU machine by replacing two functions here.
"""

from __future__ import annotations

import importlib.util

from ads_core.models.hardware import gpu_devices_present  # the one device probe (the score stage's too)

ROLLOUT_ENGINES = ("vllm", "sglang")


def cuda_gpu_count() -> int:
    """CUDA GPUs torch sees here; a missing torch or a broken driver counts as none (a machine without a GPU
    device answers at once, without importing torch: refusals and dry runs stay fast)."""
    if not gpu_devices_present():
        return 0
    try:
        import torch
    except ImportError:
        return 0
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return 0


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
