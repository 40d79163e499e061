"""What this machine offers a trainer: CUDA GPUs, installed packages. The trainers' `can_run_here` (asked by
`trainer: auto`, see `ads_core.train.trainers.choose_trainer`) and their launch checks read these, so a test can
stand in for a GPU machine by replacing two functions here.
"""

from __future__ import annotations

import importlib.util

ROLLOUT_ENGINES = ("vllm", "sglang")


def gpu_devices_present() -> bool:
    """Whether the kernel shows any GPU device (NVIDIA's /dev/nvidia*, AMD ROCm's /dev/kfd): without one there is
    nothing for torch to find, and importing it (seconds) is not needed to say so."""
    import glob
    import os

    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd") or os.path.isdir("/proc/driver/nvidia")


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
