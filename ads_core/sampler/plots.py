"""Pictures of what the samplers do: accuracy against steps (`ads simulate`), and each cluster's window
position and success over steps (the simulator and training runs alike).

``WindowTrace`` is the data behind the window picture. The simulator records one from a live
``ADSSampler``; a training run rebuilds one from its logged metrics (``WindowTrace.from_metrics`` reads the
``ads/window_frac/<id>`` and ``ads/r/<id>`` series that ``ADSSampler.metrics`` writes and the verl and TRL
adapters log). ``save_window_plot`` draws either. Plots use matplotlib's Agg canvas: no display needed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ads_core.sampler.ads import ADSSampler

_SERIES = re.compile(r"ads/(window_frac|r)/(-?\d+)$")


@dataclass
class WindowTrace:
    """Per cluster and step: where the window sits (0 = easiest, 1 = hardest) and the success it saw."""

    cluster_ids: list[int]
    steps: list[int] = field(default_factory=list)
    position: list[list[float]] = field(default_factory=list)  # (steps, clusters)
    success: list[list[float]] = field(default_factory=list)  # (steps, clusters): r, the last update's success

    @classmethod
    def start(cls, sampler: ADSSampler) -> WindowTrace:
        trace = cls([int(c) for c in sampler.cluster_ids])
        trace.record(0, sampler)
        return trace

    def record(self, step: int, sampler: ADSSampler) -> None:
        self.steps.append(int(step))
        self.position.append(sampler.window_extent()[2].tolist())
        self.success.append(sampler.r.tolist())

    @classmethod
    def from_metrics(cls, records: Iterable[Mapping[str, Any]], step_key: str = "ads/step") -> WindowTrace:
        """From logged metric dicts (e.g. the lines of a run's metrics.jsonl): the records that carry the
        per-cluster series (the adapters log them every ``cluster_metrics_interval`` steps); a missing value
        is NaN. ``step_key`` names the step (``ads/step`` by default, else a ``step`` key)."""
        rows: list[tuple[int, dict[tuple[str, int], float]]] = []
        clusters: set[int] = set()
        for record in records:
            series = {}
            for key, value in record.items():
                found = _SERIES.match(str(key))
                if found and isinstance(value, int | float):
                    series[(found.group(1), int(found.group(2)))] = float(value)
            if not series:
                continue
            step = record.get(step_key, record.get("step"))
            if not isinstance(step, int | float) or isinstance(step, bool) or not math.isfinite(step):
                raise ValueError(f"a metrics record with per-cluster series has no numeric {step_key!r} or 'step'")
            rows.append((int(step), series))
            clusters |= {cid for _, cid in series}
        trace = cls(sorted(clusters))
        for step, series in sorted(rows, key=lambda row: row[0]):
            trace.steps.append(step)
            trace.position.append([series.get(("window_frac", c), math.nan) for c in trace.cluster_ids])
            trace.success.append([series.get(("r", c), math.nan) for c in trace.cluster_ids])
        return trace

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_ids": self.cluster_ids,
            "steps": self.steps,
            "position": self.position,
            "success": self.success,
        }


def save_window_plot(traces: Mapping[str, WindowTrace], path: str, title: str = "") -> None:
    """One row per trace: window position and success of every cluster (rows) at every step (columns).

    Clusters are sorted by their last position, so a frontier that moves shows as a sweep from dark to light
    across the panel; a window stuck at the easy end stays dark.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [n for n, t in traces.items() if t.steps and t.cluster_ids]
    if not names:
        raise ValueError("no window trace to draw (no ADS sampler, or no per-cluster metrics logged)")
    fig = Figure(figsize=(11, 2.8 * len(names) + 0.6), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names), 2, squeeze=False)
    for row, name in enumerate(names):
        trace = traces[name]
        position, success = np.asarray(trace.position).T, np.asarray(trace.success).T  # (clusters, steps)
        order = np.argsort(np.nan_to_num(position[:, -1], nan=-1.0), kind="stable")
        extent = (trace.steps[0], trace.steps[-1], len(order), 0)
        for col, (values, label, cmap) in enumerate(
            ((position, "window position (0 easiest, 1 hardest)", "viridis"), (success, "window success r", "RdYlGn"))
        ):
            ax = axes[row][col]
            image = ax.imshow(values[order], aspect="auto", cmap=cmap, vmin=0, vmax=1, extent=extent)
            ax.set_title(f"{name}: {label}", fontsize=9)
            ax.set_xlabel("training step")
            ax.set_ylabel("cluster (by final position)")
            fig.colorbar(image, ax=ax, fraction=0.04)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")


def save_plot(result: Any, path: str, names: Sequence[str] | None = None) -> None:
    """Accuracy-versus-step curves (mean and min-max band over seeds) of a ``SimulationResult`` as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name in names or list(result.curves):
        curve = result.curves[name]
        (line,) = ax.plot(result.eval_steps, curve.mean(axis=0), label=name)
        ax.fill_between(result.eval_steps, curve.min(axis=0), curve.max(axis=0), color=line.get_color(), alpha=0.15)
    ax.axhline(result.targets.mean(), color="grey", ls="--", lw=1, label=f"{result.config.baseline} final")
    ax.set_xlabel("training step")
    ax.set_ylabel("expected held-out accuracy")
    learner = result.config.learner
    ax.set_title(f"Synthetic GRPO learner '{learner}', {len(result.config.seeds)} seeds (a model, not LLM evidence)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
