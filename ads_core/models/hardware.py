"""The device and dtype a model runs in, derived from the hardware (without importing torch where it can)."""

from __future__ import annotations

import functools
import sys
from typing import Any

from ads_core.models.tiny import cached_model_dir, preset_of

# Device nodes some GPU stack needs (NVIDIA, any NVIDIA GPU's node, NVIDIA Jetson, WSL2's GPU bridge, AMD ROCm, the
# NVIDIA driver's proc folder), as glob patterns. On Linux without any of them torch cannot see a GPU, so `auto` is
# "cpu" without importing torch (~3 CPU-s per process): a build whose rows all come from the score cache never loads
# it. The one probe: training's choice of trainer (ads_core.train.choice) asks it too.
GPU_DEVICE_NODES = (
    "/dev/nvidiactl",
    "/dev/nvidia[0-9]*",
    "/dev/nvhost-ctrl",
    "/dev/dxg",
    "/dev/kfd",
    "/proc/driver/nvidia",
)


def gpu_devices_present(nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> bool:
    """Whether this machine shows any GPU device node (always True off Linux, where torch must be asked)."""
    import glob

    return not sys.platform.startswith("linux") or any(glob.glob(node) for node in nodes)


def pick_device(device: str = "auto", nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> str:
    if device != "auto":
        return device
    if not gpu_devices_present(nodes):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# CPU flags (as /proc/cpuinfo spells them) of a native bf16 matmul: Intel AMX, or AVX512-BF16 (Intel Cooper
# Lake and later, AMD Zen 4 and later). `torch.backends.cpu.get_cpu_capability()` says only "AVX512" on both.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
DTYPES = ("float32", "bfloat16", "float16")


@functools.lru_cache(maxsize=1)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU feature flags of the first processor in /proc/cpuinfo; empty where there is none (macOS)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True where bf16 matmul runs in hardware (AMX-BF16 or AVX512-BF16); AVX2-only CPUs emulate it ~8-10x slower.
    Native is not faster: `auto` decides by measuring (`ads_core.models.dtype`)."""
    return any(f in (cpu_flags() if flags is None else flags) for f in BF16_CPU_FLAGS)


def pick_dtype(device: str, dtype: str = "auto", flags: frozenset[str] | None = None, model: str | None = None) -> Any:
    """The torch dtype the scorer runs in: an explicit name wins; `auto` is bf16 on GPU, and on CPU bf16 only where
    it is faster on this machine for MODEL's shape (AMX, or measured: `ads_core.models.dtype`), else fp32.

    The row score cache keys on this value, so it must be the dtype the model really runs in.
    """
    import torch

    return getattr(torch, dtype_choice(device, dtype, flags, model))


def dtype_choice(
    device: str, dtype: str = "auto", flags: frozenset[str] | None = None, model: str | None = None
) -> str:
    """`pick_dtype`'s choice as a plain name ("bfloat16"), without importing torch (a measured CPU choice is read
    from the per-machine cache; only its first measurement imports torch)."""
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"score.dtype: unknown dtype {dtype!r}; expected auto or one of {', '.join(DTYPES)}")
        return dtype
    if device.startswith("cuda"):
        return "bfloat16"
    if device != "cpu":
        return "float32"
    from ads_core.models.dtype import cpu_auto_dtype

    preset = preset_of(model) if model is not None else None
    return cpu_auto_dtype(cpu_flags() if flags is None else flags, str(cached_model_dir(preset)) if preset else model)


def dtype_name(device: str, dtype: str = "auto", model: str | None = None) -> str:
    """The resolved dtype as a plain name ("bfloat16"), for manifests and cache keys."""
    return dtype_choice(pick_device(device), dtype, model=model)
