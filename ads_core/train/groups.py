"""The ADS reference trainer's all-wrong drop, for every trainer and sampler kind (`TrainConfig.drop_all_wrong`).

Whenever its curriculum sampler is active, the reference trainer removes from the gradient batch every group
whose G rollouts are all wrong (accuracy 0 in all of them); groups with any success, all-correct ones included,
stay, and when every group of the step is all wrong nothing is removed (ads_spec.md section 4, item 2). The
sampler still receives every group's success. Plain GRPO there gets no such filter, so the paper's ADS-vs-GRPO
difference holds a filter as well as a sampler; the option lets either run with or without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ads_core.sampler.kinds import kind_spec


def drops_all_wrong(cfg: Any) -> bool:
    """Whether a run of CFG (a TrainConfig) drops all-wrong groups: `on`, or `auto` for a kind published with it."""
    mode = cfg.drop_all_wrong
    if mode == "auto":
        return kind_spec(cfg.sampler.kind).drops_all_wrong
    return mode == "on"


def groups_to_keep(group_success: Any) -> np.ndarray:
    """The reference's rule over one step's groups (each group's mean correctness, in batch order): keep every
    group with any success; keep them all when every group is all wrong."""
    success = np.asarray(group_success, dtype=np.float64)
    all_wrong = success <= 0.0
    if all_wrong.all():
        return np.ones(len(success), dtype=bool)
    return ~all_wrong
