"""Reference rollouts for a sampler that asks for them (kind ``dots``): the current policy rolls out K problems, G
times each, through TRL's own prompt rendering and generation (same chat template, temperature, top-p/top-k,
completion length as training), scored by the run's correctness reward. Not used for gradients.

A round's rollouts run under their own seed (``torch.random.fork_rng``), so the global RNG the training
generations use is untouched and a resumed run's reference rollouts are the uninterrupted run's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def attach_reference_rollouts(trainer: Any) -> None:
    """Give the feed's sampler its reference rollout, when it asks for one (``needs_reference_rollouts``)."""
    sampler = trainer.feed.sampler
    if getattr(sampler, "needs_reference_rollouts", False):
        sampler.rollout = reference_rollout(trainer)


def reference_rollout(trainer: Any) -> Callable[[np.ndarray, int], np.ndarray]:
    """(rows, seed) -> each row's mean correctness over ``num_generations`` completions of the current policy."""
    import torch

    def run(rows: np.ndarray, seed: int) -> np.ndarray:
        started = time.perf_counter()
        picked = trainer.rows.dataset.select([int(r) for r in rows])
        group = int(trainer.num_generations)
        prompts = [p for p in picked["prompt"] for _ in range(group)]
        truths = [t for t in picked["ground_truth"] for _ in range(group)]
        was_training = trainer.model.training
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seed) % (2**63))
                prompt_ids, images, fields = trainer._tokenize_prompts(prompts)
                completion_ids, _ = trainer._generate_single_turn(prompt_ids, images, fields, group)
        finally:
            trainer.model.train(was_training)
        texts = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        correct = np.asarray(trainer.reward_funcs[0](completions=texts, ground_truth=truths), dtype=np.float64)
        success = np.nan_to_num(correct, nan=0.0).reshape(len(rows), group).mean(axis=1)
        trainer.reference_seconds += time.perf_counter() - started
        return success

    return run
