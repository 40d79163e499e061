"""What every trainer feeds back to its sampler after a batch: each prompt's row and its mean success.

TRL's per-step record (`ads_core.train.trl.feed.Feedback`: the draw, rewards, rollout counts) and verl's batch
mapping (`ads_core.train.verl.sampler.BatchFeedback`: uid groups, unmatched ids) extend this one dataclass, and
both reach the sampler the same way, `feedback.apply(sampler)`: one ``update(rows, success)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ads_core.sampler.base import Sampler


@dataclass
class Feedback:
    rows: np.ndarray  # row positions in the training set, one per prompt (in the order they were drawn)
    success: np.ndarray  # mean correctness of each prompt's rollouts, in [0, 1]

    def apply(self, sampler: Sampler) -> None:
        """The sampler's one update with this batch."""
        sampler.update(self.rows, self.success)
