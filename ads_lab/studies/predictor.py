"""DOTS's difficulty predictor for a demo-task artifact, as `bench/grpo_curriculum.py` and the study train it.

The DOTS notes require labels from policies *other* than the one being trained: here the tiny policy warmed up for
a third and two thirds of the warm-up (seeds 1 and 2) label the training set, and one warmed up for half of it
(seed 3) is held out, the policy on which the predictor's rho is reported (beside raw embeddings' rho).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ads_lab.config.demo import DemoPolicyConfig, DemoTaskConfig

PREDICTOR_DIR = "dots-predictor"
SOURCES = (("third", 3.0, 1), ("two-thirds", 1.5, 2), ("half", 2.0, 3))  # name, warm-up divisor, seed; last: held out


def prepare_predictor(
    out: Path,
    task_cfg: DemoTaskConfig,
    policy_cfg: DemoPolicyConfig,
    artifact: str,
    embed_model: str,
    num_generations: int,
    max_completion_length: int,
    temperature: float = 1.0,
    log: Callable[[str], None] = print,
) -> Path:
    """The trained predictor's folder, OUT/dots-predictor (reused when a valid one is already there)."""
    from ads_core.sampler.dots import artifact as predictor_artifact
    from ads_core.sampler.dots.predictor import FitSettings
    from ads_core.train.dots.make import DotsTrainSettings, train_predictor
    from ads_lab.demo.policy import build_policy
    from ads_lab.demo.task import make_task

    folder = Path(out) / PREDICTOR_DIR
    try:
        predictor_artifact.load(str(folder))
        return folder
    except (ValueError, OSError):
        pass
    task = make_task(task_cfg)
    steps = policy_cfg.warmup_steps
    sources = []
    for name, divisor, seed in SOURCES:
        spec = policy_cfg.replaced(warmup_steps=max(1, int(steps / divisor)), seed=seed)
        sources.append(str(build_policy(Path(out) / "dots-sources" / name, spec, task_cfg, task.warmup)))
    settings = DotsTrainSettings(
        num_generations=num_generations,
        temperature=temperature,
        max_completion_length=max_completion_length,
        fit=FitSettings(hidden=128, epochs=20, reference_size=64),
    )
    started = time.perf_counter()
    result = train_predictor(artifact, sources[:2], sources[2], embed_model, str(folder), settings, log)
    log(
        f"dots predictor: held-out rho {result.rho:.3f} (raw embeddings {result.rho_raw:.3f}), "
        f"{time.perf_counter() - started:.0f} s"
    )
    return folder
