"""The training plot of any trainer that reports its steps (`streams_steps`): mean reward and success per step,
the validation accuracy when there is one, each drawn cluster's success and window position.

It reads the per-step records every such trainer produces (`step`, `reward_mean`, `success_mean`, and optionally
`clusters`/`success` per prompt and the sampler's ``metrics()``), not a trainer's files, so the `ads-train` flow
draws it for any trainer without importing one. Of ``metrics()`` only ``<prefix>/window_frac/<cluster>`` is read.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

WINDOW_CLUSTER_PART = "/window_frac/"


def _per_cluster(records: Iterable[dict[str, Any]]) -> tuple[dict[int, list[tuple[int, float]]], dict[int, list]]:
    """cluster -> [(step, mean success of its prompts that step)] and -> [(step, window position)]."""
    success: dict[int, list[tuple[int, float]]] = {}
    window: dict[int, list[tuple[int, float]]] = {}
    for r in records:
        sums: dict[int, list[float]] = {}
        for c, s in zip(r.get("clusters", []), r.get("success", []), strict=False):
            sums.setdefault(int(c), []).append(float(s))
        for c, values in sums.items():
            success.setdefault(c, []).append((r["step"], sum(values) / len(values)))
        for key, value in (r.get("metrics") or {}).items():
            if WINDOW_CLUSTER_PART in key:
                cluster = key.rsplit("/", 1)[-1]
                if cluster.lstrip("-").isdigit():
                    window.setdefault(int(cluster), []).append((r["step"], float(value)))
    return success, window


def plot_steps(
    records: list[dict[str, Any]], title: str = "training", evals: list[dict[str, Any]] | None = None
) -> bytes:
    """PNG: mean reward and success per step, with the validation accuracy (mean@k per set, from eval.jsonl) when
    there is one; each cluster's success when drawn; each cluster's window position."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    success, window = _per_cluster(records)
    panels = 3 if window else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.8), constrained_layout=True)
    ax = axes[0]
    ax.plot(steps, [r.get("reward_mean", 0.0) for r in records], marker="o", ms=3, label="mean reward")
    ax.plot(steps, [r.get("success_mean", 0.0) for r in records], marker="s", ms=3, ls="--", label="mean success")
    for name in dict.fromkeys(e["set"] for e in evals or []):
        points = [(e["step"], e["mean_at_k"]) for e in evals or [] if e["set"] == name and e["mean_at_k"] is not None]
        k = next(e["k"] for e in evals or [] if e["set"] == name)
        if points:
            ax.plot(*zip(*points, strict=True), marker="D", ms=4, lw=1.5, label=f"validation {name} mean@{k}")
    ax.set(
        title="reward per step" + (", validation accuracy" if evals else ""),
        xlabel="step",
        ylim=(-0.05, max(1.05, ax.get_ylim()[1])),
    )
    ax.legend(fontsize=8)
    cmap = plt.get_cmap("tab20")
    ax = axes[1]
    for i, (c, pts) in enumerate(sorted(success.items())):
        ax.plot(*zip(*pts, strict=True), marker="o", ms=3, lw=1, color=cmap(i % 20), label=str(c))
    ax.set(title="success of each cluster's prompts (when drawn)", xlabel="step", ylim=(-0.05, 1.05))
    if 0 < len(success) <= 20:
        ax.legend(title="cluster", fontsize=7, ncol=2)
    if window:
        ax = axes[2]
        for i, (c, pts) in enumerate(sorted(window.items())):
            ax.plot(*zip(*pts, strict=True), lw=1, color=cmap(i % 20), label=str(c))
        ax.set(title="window position per cluster (0 easy, 1 hard)", xlabel="step", ylim=(-0.05, 1.05))
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()
