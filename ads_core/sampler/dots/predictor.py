"""DOTS's adaptive-difficulty predictor: attention from a problem to a labelled reference set, then calibration.

For a query embedding z_q and K reference embeddings z_i labelled with the *current* policy's success s_i:

    a = softmax(<f_q(z_q), f_r(z_i)> / sqrt(h)),   s_hat = sum_i a_i s_i,
    (temp, bias) = MLP([mean(s), std(s)]),          p = sigmoid(logit(s_hat) / temp + bias)

f_q and f_r are separate towers (LayerNorm, Linear, GELU, Dropout ..., LayerNorm), as in the official code, with a
smaller hidden size. It is trained with BCE on labels made by *other* policies (each query attends to references
labelled by its own source policy), so what it learns is how problems relate, not one policy's skill: at RL time
the references carry the current policy's labels. The code works with success rates; difficulty is 1 - success.

``fit`` trains it; ``evaluate`` measures Pearson rho on a held-out policy the way the paper does (K random
references, a linear refit on them, rho on the rest), beside the raw-embedding baseline (cosine attention over the
frozen embeddings, no adapter, same refit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn


def tower(dim: int, hidden: int, layers: int, dropout: float) -> nn.Sequential:
    parts: list[nn.Module] = [nn.LayerNorm(dim)]
    width = dim
    for i in range(layers):
        parts.append(nn.Linear(width, hidden))
        if i < layers - 1:
            parts += [nn.GELU(), nn.Dropout(dropout)]
        width = hidden
    parts.append(nn.LayerNorm(hidden))
    return nn.Sequential(*parts)


class DifficultyPredictor(nn.Module):
    """Query/reference towers, attention over the reference labels, the [mean, std] -> (temp, bias) head."""

    def __init__(self, dim: int, hidden: int = 128, layers: int = 3, dropout: float = 0.1) -> None:
        super().__init__()
        self.dim, self.hidden, self.layers, self.dropout = dim, hidden, layers, dropout
        self.query_proj = tower(dim, hidden, layers, dropout)
        self.ref_proj = tower(dim, hidden, layers, dropout)
        self.calibration = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 2))

    def spec(self) -> dict[str, Any]:
        return {"dim": self.dim, "hidden": self.hidden, "layers": self.layers, "dropout": self.dropout}

    def forward(self, queries: torch.Tensor, refs: torch.Tensor, ref_success: torch.Tensor) -> torch.Tensor:
        """Predicted success of each query (B,) from K references (K, dim) labelled ``ref_success`` (K,)."""
        q = self.query_proj(queries)
        r = self.ref_proj(refs)
        weights = torch.softmax(q @ r.T / math.sqrt(self.hidden), dim=-1)
        base = weights @ ref_success
        stats = torch.stack([ref_success.mean(), ref_success.std()]).nan_to_num(0.0)
        out = self.calibration(stats)
        temp = nn.functional.softplus(out[0]).clamp(0.01, 10.0)
        bias = torch.tanh(out[1])
        return torch.sigmoid(torch.logit(base.clamp(1e-4, 1 - 1e-4)) / temp + bias)


@dataclass(frozen=True)
class FitSettings:
    hidden: int = 128
    layers: int = 3
    dropout: float = 0.1
    epochs: int = 20
    batch_size: int = 256
    reference_size: int = 64
    lr: float = 1e-3
    seed: int = 1


def fit(embeddings: np.ndarray, labels: dict[str, np.ndarray], settings: FitSettings) -> DifficultyPredictor:
    """Train on LABELS (source policy -> success of every problem, aligned with EMBEDDINGS): each batch holds one
    policy's queries and one random reference subset, disjoint from the queries, labelled by the same policy."""
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    z = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    n = len(z)
    model = DifficultyPredictor(z.shape[1], settings.hidden, settings.layers, settings.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    names = sorted(labels)
    k = min(settings.reference_size, n // 2)
    total = settings.epochs * len(names) * max(1, math.ceil((n - k) / settings.batch_size))
    warmup = max(1, min(100, total // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    loss_fn = nn.BCELoss()
    model.train()
    for _ in range(settings.epochs):
        for name in rng.permutation(names):
            y = torch.as_tensor(np.asarray(labels[name], dtype=np.float32))
            order = rng.permutation(n)
            refs, queries = order[:k], order[k:]
            for start in range(0, len(queries), settings.batch_size):
                batch = queries[start : start + settings.batch_size]
                pred = model(z[batch], z[refs], y[refs])
                loss = loss_fn(pred, y[batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
    model.eval()
    return model


def predict(model: DifficultyPredictor, embeddings: Any, ref_rows: np.ndarray, ref_success: np.ndarray) -> np.ndarray:
    """Predicted success of every row (the references too, which attend to themselves, as in the official code)."""
    z = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    y = torch.as_tensor(np.asarray(ref_success, dtype=np.float32))
    out = []
    with torch.no_grad():
        refs = z[torch.as_tensor(ref_rows, dtype=torch.long)]
        for start in range(0, len(z), 1024):
            out.append(model(z[start : start + 1024], refs, y).numpy())
    return np.concatenate(out).astype(np.float64)


def raw_predict(
    embeddings: Any, ref_rows: np.ndarray, ref_success: np.ndarray, temperature: float = 0.05
) -> np.ndarray:
    """The baseline: softmax(cosine / temperature) attention over the raw frozen embeddings, no adapter."""
    z = np.asarray(embeddings, dtype=np.float64)
    z = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    logits = z @ z[ref_rows].T / temperature
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    return (w / w.sum(axis=1, keepdims=True)) @ np.asarray(ref_success, dtype=np.float64)


def linear_refit(pred: np.ndarray, ref_rows: np.ndarray, ref_success: np.ndarray) -> np.ndarray:
    """Least-squares a*pred + b fitted on the references, applied to every prediction (not clipped, as the code)."""
    x, y = pred[ref_rows], np.asarray(ref_success, dtype=np.float64)
    if np.ptp(x) <= 1e-12:
        return np.full_like(pred, y.mean())
    a, b = np.polyfit(x, y, 1)
    return a * pred + b


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def evaluate(
    model: DifficultyPredictor, embeddings: np.ndarray, success: np.ndarray, reference_size: int, seeds: int = 5
) -> dict[str, float]:
    """Pearson rho (mean over SEEDS reference draws) on one policy's labels, predicted vs observed on the problems
    outside the reference set, for the trained predictor and the raw-embedding baseline."""
    n = len(success)
    k = min(reference_size, n - 2)
    ours, raw = [], []
    for seed in range(1, seeds + 1):
        refs = np.random.default_rng(seed).choice(n, size=k, replace=False)
        rest = np.setdiff1d(np.arange(n), refs)
        p = linear_refit(predict(model, embeddings, refs, success[refs]), refs, success[refs])
        b = linear_refit(raw_predict(embeddings, refs, success[refs]), refs, success[refs])
        ours.append(pearson(p[rest], success[rest]))
        raw.append(pearson(b[rest], success[rest]))
    return {"rho": _nanmean(ours), "rho_raw": _nanmean(raw), "reference_size": float(k)}


def _nanmean(values: list[float]) -> float:
    """The mean of the finite values; nan when there is none (labels without variance: no rho to measure)."""
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")
