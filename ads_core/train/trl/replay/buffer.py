"""The replay buffer: whole groups (one prompt x G completions), oldest evicted first.

A group keeps what its loss needs later, unpadded to its own width: the prompt's token ids, the completions'
token ids and masks, each completion's reward and advantage (computed within its own group when it was rolled
out; the official code recomputes them from the stored rewards and gets the same), and the **behaviour policy's
per-token log-probs** (the training model's, at the rollout temperature, before any update on it).

Only groups whose rewards are not all equal are kept (the others carry no gradient). Each step, replayed groups
are drawn uniformly without replacement *before* that step's fresh groups are added, and stay in the buffer until
they age out, as in the official code. The buffer and its generator are saved with every checkpoint
(``save``/``load``: safetensors, tensors only), so a resumed run replays what the uninterrupted run would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

FIELDS = ("prompt_ids", "completion_ids", "completion_mask", "behaviour_logps", "rewards", "advantages")
FORMAT = "ads-replay-buffer/1"


@dataclass
class Group:
    row: int  # the prompt's row in the training artifact
    step: int  # the step that rolled it out
    prompt_ids: torch.Tensor  # (P,) int64, no padding
    completion_ids: torch.Tensor  # (G, T) int64, right-padded
    completion_mask: torch.Tensor  # (G, T)
    behaviour_logps: torch.Tensor  # (G, T) float32
    rewards: torch.Tensor  # (G,) float32
    advantages: torch.Tensor  # (G,) float32

    @property
    def informative(self) -> bool:
        return bool(self.rewards.numel()) and bool((self.rewards != self.rewards[0]).any())


class ReplayBuffer:
    """FIFO of at most ``capacity`` mixed-reward groups, with its own seeded generator for the draws."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = int(capacity)
        self.groups: list[Group] = []
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.groups)

    def sample(self, n: int) -> list[Group]:
        """Up to N groups, uniformly without replacement (all of them when fewer), in buffer order."""
        n = min(int(n), len(self.groups))
        if n <= 0:
            return []
        picked = np.sort(self.rng.choice(len(self.groups), size=n, replace=False))
        return [self.groups[i] for i in picked]

    def add(self, groups: list[Group]) -> int:
        """Append the informative GROUPS, evict the oldest beyond capacity; returns how many were kept."""
        kept = [g for g in groups if g.informative]
        self.groups.extend(kept)
        if len(self.groups) > self.capacity:
            self.groups = self.groups[len(self.groups) - self.capacity :]
        return len(kept)

    # -- checkpoint ------------------------------------------------------------------------------------

    def tensors(self) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        """(tensors, metadata) for safetensors: each group's fields under ``<i>.<field>``."""
        out: dict[str, torch.Tensor] = {}
        for i, g in enumerate(self.groups):
            for name in FIELDS:
                out[f"{i}.{name}"] = getattr(g, name).detach().cpu().contiguous()
        meta = {
            "format": FORMAT,
            "capacity": str(self.capacity),
            "rows": json.dumps([g.row for g in self.groups]),
            "steps": json.dumps([g.step for g in self.groups]),
            "rng": json.dumps(self.rng.bit_generator.state),
        }
        return out, meta

    def save(self, path: str) -> None:
        from safetensors.torch import save_file

        from ads_core import storage

        tensors, meta = self.tensors()
        if not tensors:  # safetensors needs one tensor
            tensors = {"empty": torch.zeros(0)}
        with storage.atomic_local_file(path) as tmp:
            save_file(tensors, str(tmp), metadata=meta)

    def load(self, path: str) -> None:
        """Restore a saved buffer; a file that does not hold one raises ValueError naming it (nothing changes)."""
        from safetensors import safe_open

        try:
            with safe_open(path, framework="pt") as f:
                meta: dict[str, Any] = f.metadata() or {}
                if meta.get("format") != FORMAT:
                    raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
                rows, steps = json.loads(meta["rows"]), json.loads(meta["steps"])
                if int(meta["capacity"]) != self.capacity:
                    raise ValueError(f"saved with buffer_size {meta['capacity']}, this run has {self.capacity}")
                groups = []
                for i, (row, step) in enumerate(zip(rows, steps, strict=True)):
                    fields = {name: f.get_tensor(f"{i}.{name}") for name in FIELDS}
                    groups.append(Group(row=int(row), step=int(step), **fields))
                rng = np.random.default_rng()
                rng.bit_generator.state = json.loads(meta["rng"])
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: not a usable replay buffer: {exc}") from None
        self.groups, self.rng = groups, rng
