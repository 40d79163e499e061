"""Reference rollouts under TRL: the need ``reference_rollouts`` of a sampler kind (``dots``), met by this trainer.

The current policy rolls out K problems, G times each, through TRL's own prompt rendering and generation (same chat
template, temperature, top-p/top-k, completion length as training), scored by the run's correctness reward; not
used for gradients. ``run_trl`` makes one ``ReferenceRollouts`` before the sampler, hands it to the sampler's
factory (``build_sampler(..., provided=...)``) and to ``ADSGRPOTrainer``, whose constructor binds it: the sampler
calls it from ``next_batch``, during training, never before the trainer exists.

A round's rollouts run under their own seed (``torch.random.fork_rng``), so the global RNG the training
generations use is untouched and a resumed run's reference rollouts are the uninterrupted run's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


class ReferenceRollouts:
    """(rows, seed) -> each row's mean correctness over ``num_generations`` completions of the current policy."""

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset  # the training rows (prompt, ground_truth), by row position
        self._trainer: Any = None  # the GRPOTrainer that rolls out, bound by its constructor
        self._seconds = 0.0  # spent rolling out since `take_seconds` last asked

    def bind(self, trainer: Any) -> None:
        """Roll out with TRAINER's policy and generation settings (its constructor calls this once)."""
        if self._trainer is not None and self._trainer is not trainer:
            raise RuntimeError("these reference rollouts already roll out through another trainer")
        self._trainer = trainer

    def take_seconds(self) -> float:
        """Seconds spent rolling out since the last call (the step line's ``reference_rollout_seconds``)."""
        seconds, self._seconds = self._seconds, 0.0
        return seconds

    def __call__(self, rows: np.ndarray, seed: int) -> np.ndarray:
        import torch

        trainer = self._trainer
        if trainer is None:
            raise RuntimeError("reference rollouts were asked for before the trainer that rolls them out was made")
        started = time.perf_counter()
        picked = self._dataset.select([int(r) for r in rows])
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
        self._seconds += time.perf_counter() - started
        return success
