"""DOTS's selection rule: P(q) proportional to exp(-|d_q - alpha| / tau), drawn without replacement.

Drawing without replacement proportionally to weights is done with the Gumbel top-k trick (keys log w + Gumbel
noise, take the largest), which is exactly successive sampling without replacement and, unlike
``Generator.choice(p=...)``, never fails when tau is so small that most probabilities underflow to 0.
"""

from __future__ import annotations

import numpy as np


def selection_logits(predicted_success: np.ndarray, alpha: float, tau: float) -> np.ndarray:
    """log-weights of every problem: -|d - alpha| / tau with d = 1 - predicted success."""
    difficulty = 1.0 - np.asarray(predicted_success, dtype=np.float64)
    return -np.abs(difficulty - alpha) / tau


def draw_without_replacement(logits: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """SIZE distinct indices drawn proportionally to exp(LOGITS) without replacement, in draw order."""
    size = min(int(size), len(logits))
    keys = np.asarray(logits, dtype=np.float64) + rng.gumbel(size=len(logits))
    picked = np.argpartition(-keys, size - 1)[:size] if size < len(keys) else np.arange(len(keys))
    return picked[np.argsort(-keys[picked], kind="stable")].astype(np.int64)


def select_round(
    predicted_success: np.ndarray, batch_size: int, mu: int, alpha: float, tau: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """The next MU batches of BATCH_SIZE rows: mu * batch_size rows drawn without replacement, shuffled, split.
    With fewer rows than mu * batch_size, the draw is repeated (each pass without replacement)."""
    logits = selection_logits(predicted_success, alpha, tau)
    need, parts = mu * batch_size, []
    while need > 0:
        part = draw_without_replacement(logits, need, rng)
        parts.append(part)
        need -= len(part)
    picked = rng.permutation(np.concatenate(parts))
    return [picked[i * batch_size : (i + 1) * batch_size] for i in range(mu)]
