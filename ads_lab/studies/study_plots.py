"""The study's figures: each ADS run's window against steps (does it leave the easy end of its clusters?), and
held-out accuracy with the band labelled. Written next to ``ads compare``'s compare.png."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ads_core.evaluation.compare import RunData

WINDOW_PREFIX = "ads/window_frac/"


def window_trace(run: RunData) -> dict[str, list[tuple[int, float]]]:
    """Cluster id -> (step, window position as a fraction of the cluster, easy 0 to hard 1) from steps.jsonl."""
    out: dict[str, list[tuple[int, float]]] = {}
    for record in run.steps:
        for name, value in (record.get("metrics") or {}).items():
            if name.startswith(WINDOW_PREFIX):
                out.setdefault(name.removeprefix(WINDOW_PREFIX), []).append((int(record["step"]), float(value)))
    return out


def write_window_traces(groups: dict[str, list[RunData]], out: str | os.PathLike[str]) -> dict[str, str]:
    """window_traces.csv (every ADS run, cluster and step) and window_traces.png (per ADS sampler: each cluster's
    window position, mean over seeds); nothing when no run logged a window."""
    traced = {name: [(r, window_trace(r)) for r in runs] for name, runs in groups.items()}
    traced = {name: runs for name, runs in traced.items() if any(t for _, t in runs)}
    if not traced:
        return {}
    folder = Path(out)
    rows = [
        (name, run.name, cluster, step, value)
        for name, runs in traced.items()
        for run, trace in runs
        for cluster, points in trace.items()
        for step, value in points
    ]
    csv_path = folder / "window_traces.csv"
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["sampler", "run", "cluster", "step", "window_frac"])
        writer.writerows(rows)
    os.replace(tmp, csv_path)
    png_path = folder / "window_traces.png"
    tmp_png = folder / "window_traces.tmp.png"
    tmp_png.write_bytes(_window_png(traced))
    os.replace(tmp_png, png_path)
    return {"csv": str(csv_path), "png": str(png_path)}


def _window_png(traced: dict[str, list[tuple[RunData, dict[str, list[tuple[int, float]]]]]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(traced), figsize=(5.5 * len(traced), 3.8), squeeze=False, constrained_layout=True)
    for ax, (name, runs) in zip(axes[0], traced.items(), strict=True):
        clusters = sorted({c for _, t in runs for c in t}, key=lambda c: (len(c), c))
        for cluster in clusters:
            by_step: dict[int, list[float]] = {}
            for _, trace in runs:
                for step, value in trace.get(cluster, []):
                    by_step.setdefault(step, []).append(value)
            steps = sorted(by_step)
            ax.plot(steps, [sum(by_step[s]) / len(by_step[s]) for s in steps], label=f"cluster {cluster}", lw=1)
        ax.set(
            xlabel="optimizer step",
            ylabel="window position in cluster (0 easy, 1 hard)",
            ylim=(-0.02, 1.02),
            title=f"{name}: window per cluster, mean over {len(runs)} seed(s)",
        )
        ax.legend(fontsize=6, ncol=2)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return buf.getvalue()


def band_label(runs: Sequence[Any]) -> str:
    """What a group's shaded band is: +- sd over its seeds (ddof 0), or nothing for one run."""
    return f"+- sd over {len(runs)} seeds" if len(runs) > 1 else "1 run, no band"
