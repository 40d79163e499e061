"""`RUN_DIR/steps.jsonl`: one JSON object per optimizer step, written as the run goes, and its plot.

Each line has ``step`` (1-based), ``sample_ids`` (the step's prompts, each once, as the artifact's sample_id),
``rows`` (their positions in the training file), ``rewards`` and ``success`` (each prompt's mean reward and mean
correctness, in the same order; ``success`` is what the sampler's ``update`` received), ``clusters`` (each
prompt's cluster), ``lag`` and ``drawn_after_updates`` (see ``ads_core.train.trl.feed``), the step's headline
numbers (``reward_mean``, ``success_mean``, ``active_clusters``, ``window_position``, ``loss``,
``completion_length``, ``seconds``) and ``metrics``, the sampler's own ``metrics()`` after the update.

Only two kinds of ``metrics()`` keys are read here, both optional: ``<prefix>/window_frac_mean`` (a window's
mean position, 0 = easiest end, 1 = hardest) and ``<prefix>/window_frac/<cluster>``; ADS provides them, the
baselines don't. Lines are flushed and fsynced one by one, so a killed run keeps what it logged; on resume
the file is cut back (atomically) to the steps of the checkpoint it resumes from.

Only numpy and matplotlib (for the plot) are imported, and the storage layer's fencing (every write checks the
run's lock on its folder).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ads_core.common.jsonl import read_steps
from ads_core.storage import fencing

WINDOW_MEAN_SUFFIX = "/window_frac_mean"
WINDOW_CLUSTER_PART = "/window_frac/"


def keep_steps_up_to(path: str | os.PathLike[str], last_step: int) -> str | None:
    """Rewrite the log with only steps <= LAST_STEP (the resumed checkpoint), each once (the last line of a step
    logged twice: the run that reached the checkpoint wrote it last), atomically. Returns what was wrong with
    the log (steps logged twice, steps missing), or None."""
    p = Path(path)
    if not p.exists():
        return f"{p} is missing: it will hold only the steps after {last_step}" if last_step > 0 else None
    records = [r for r in read_steps(p) if r["step"] <= last_step]
    by_step = {r["step"]: r for r in records}
    kept = [by_step[k] for k in sorted(by_step)]
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in kept:
            f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fencing.check_publish(str(p))
    os.replace(tmp, p)
    problems = []
    if len(records) > len(kept):
        problems.append(f"held {len(records) - len(kept)} step line(s) twice (kept each step once)")
    missing = [k for k in range(1, last_step + 1) if k not in by_step]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        problems.append(f"lacks steps {shown} (cut or deleted): its records and plot miss them")
    return f"{p} {' and '.join(problems)}" if problems else None


class StepWriter:
    """Appends one line per step and makes it durable before returning."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        fencing.check_publish(str(self.path))  # a run that lost its lock on the run folder logs nothing more
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


def window_position(metrics: dict[str, float]) -> float | None:
    """The sampler's mean window position, when its metrics report one."""
    for key, value in metrics.items():
        if key.endswith(WINDOW_MEAN_SUFFIX):
            return float(value)
    return None


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
