"""`trainer: auto`: verl where it can train (CUDA GPUs, verl and a rollout engine, or a Ray cluster), else TRL.

verl is GPU-only (no CPU training, verl issue #3266) and needs a rollout engine (vLLM or SGLang); TRL runs on
CPU and on one node with accelerate. The choice and its reason are part of every plan (`TrainPlan.trainer`,
`trainer_reason`), so a run says which trainer it used and why.
"""

from __future__ import annotations

import importlib.util

ROLLOUT_ENGINES = ("vllm", "sglang")


def cuda_gpu_count() -> int:
    """CUDA GPUs torch sees here; a missing torch or a broken driver counts as none."""
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


def choose_trainer(trainer: str, ray_address: str | None = None, sampler: str = "ads") -> tuple[str, str]:
    """(verl or trl, why): an explicit choice stands; ``auto`` picks verl only where verl can train (and only
    for the ADS sampler: the verl integration has no baselines)."""
    if trainer in ("verl", "trl"):
        return trainer, f"trainer={trainer} as set"
    if sampler != "ads":
        return "trl", f"auto: the {sampler} sampler trains with TRL (verl runs the ADS sampler only)"
    if ray_address:
        return "verl", f"auto: a Ray address ({ray_address}) means verl on that cluster"
    gpus = cuda_gpu_count()
    if gpus == 0:
        return "trl", "auto: no CUDA GPU here (verl is GPU-only)"
    if not installed("verl"):
        return "trl", f"auto: {gpus} CUDA GPU(s) but verl is not installed"
    engines = [e for e in ROLLOUT_ENGINES if installed(e)]
    if not engines:
        return "trl", f"auto: {gpus} CUDA GPU(s) and verl, but no rollout engine ({' or '.join(ROLLOUT_ENGINES)})"
    return "verl", f"auto: {gpus} CUDA GPU(s), verl and {engines[0]}"
