"""Experiment 2's files in OUT: results.md (gates, the comparisons with t- and bootstrap intervals, the arms'
secondary metrics, the families, the decision), per_seed.csv (every run's numbers and code version),
experiment2.json, ``ads compare``'s files, the accuracy plot over the learnable families, and the window and
cluster-weight traces of the ADS arms."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ads_core import storage
from ads_core.evaluation.compare import AVERAGE, RunData
from ads_lab.config.study import StudyConfig
from ads_lab.studies import experiment2_analysis as ea
from ads_lab.studies.experiment2 import row_labels
from ads_lab.studies.study_plots import window_trace

WEIGHT_PREFIX = "ads/p/"


def families_of_rows(artifact: str) -> list[str]:
    return row_labels(storage.read_parquet(artifact, columns=["extra_info"]))[0]


def write(
    cfg: StudyConfig, groups: dict[str, list[RunData]], artifacts: dict[str, str], sections: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """Analyse, write every file, return what experiment2.json holds plus the Markdown."""
    from ads_core.evaluation.compare_report import write_comparison
    from ads_lab.studies.study_plots import write_window_traces

    out = Path(cfg.out) / cfg.report
    rows_of = {a: families_of_rows(uri) for a, uri in artifacts.items()}
    families_of = {name: rows_of[sections[name].get("artifact", "build")] for name in groups}
    sweep = cfg.report == "sweep"
    analysis = ea.analyse(groups, cfg.task.families, cfg.unreachable, cfg.accuracy_target, families_of, sweep)
    comparison = write_comparison(groups, out)
    traces = write_window_traces(groups, out)
    plots = {"accuracy": _save(out / "accuracy.png", accuracy_png(groups, analysis["learnable_sets"]))}
    weighted = {n: r for n, r in groups.items() if any(_weights(run) for run in r)}
    if weighted:
        plots["weights"] = _save(out / "cluster_weights.png", weights_png(weighted))
    text = markdown(cfg, analysis, extra)
    result = {
        "config": cfg.model_dump(mode="json"),
        "analysis": analysis,
        "paths": comparison["paths"]
        | {"window_traces": traces, "results": str(out / "results.md"), "per_seed": str(out / "per_seed.csv")}
        | plots,
        **extra,
    }
    files = {
        "results.md": text,
        "per_seed.csv": ea.per_seed_csv(analysis),
        "experiment2.json": json.dumps(result, indent=1, default=str),
    }
    for name, content in files.items():
        tmp = out / f"{name}.tmp"
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(out / name)
    return result | {"markdown": text}


def markdown(cfg: StudyConfig, analysis: dict[str, Any], extra: dict[str, Any]) -> str:
    decision = analysis["decision"]
    if decision is None:
        verdict = (
            "The knob sweep: every cell reported, none chosen (a better-looking cell is a hypothesis for fresh seeds)."
        )
    else:
        verdict = (
            f"Decision (the declared rule): **{decision['case']}**: {decision['text']}; default sampler: "
            f"`{decision['default']}`."
        )
    if not cfg.enforce_gates:
        verdict += " (Smoke sizes: this measures nothing.)"
    lines = [
        f"# Experiment 2: {', '.join(cfg.samplers)}; seeds {cfg.seeds[0]}-{cfg.seeds[-1]} ({len(cfg.seeds)}); "
        f"{cfg.steps} steps",
        "",
        f"Primary metric: held-out mean@{cfg.eval_k} at step {cfg.steps} over {', '.join(analysis['learnable_sets'])}"
        f" (step 0: {analysis['step0_accuracy']:.3f}); paired by seed; the t-interval decides.",
        "",
        ea.comparison_table(analysis),
        "",
        verdict,
        "",
        ea.arm_table(analysis),
        "",
        "Final accuracy per held-out family (mean over seeds):",
        "",
        ea.family_table(analysis),
    ]
    for key in ("gates", "pilot"):
        if key in extra:
            lines += ["", f"{key}: `{json.dumps(extra[key], default=str)}`"]
    return "\n".join(lines) + "\n"


def _save(path: Path, png: bytes) -> str:
    tmp = path.with_name(path.stem + ".tmp.png")
    tmp.write_bytes(png)
    os.replace(tmp, path)
    return str(path)


def _weights(run: RunData) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for record in run.steps:
        for name, value in (record.get("metrics") or {}).items():
            if name.startswith(WEIGHT_PREFIX):
                out.setdefault(name.removeprefix(WEIGHT_PREFIX), []).append((int(record["step"]), float(value)))
    return out


def accuracy_png(groups: dict[str, list[RunData]], sets: list[str]) -> bytes:
    """Held-out accuracy over the learnable families against steps and against prompts, mean +- sd per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, runs in groups.items():
        curves = [r.curve(AVERAGE, sets) for r in runs]
        steps = np.array([p.step for p in curves[0]])
        acc = np.array([[p.accuracy for p in c] for c in curves])
        prompts = np.array([[p.prompts for p in c] for c in curves]).mean(axis=0)
        mean, sd = acc.mean(axis=0), acc.std(axis=0)
        for ax, x in ((axes[0], steps), (axes[1], prompts)):
            ax.plot(x, mean, marker="o", label=name)
            ax.fill_between(x, mean - sd, mean + sd, alpha=0.12)
    axes[0].set_xlabel("GRPO step")
    axes[1].set_xlabel("prompts rolled out")
    for ax in axes:
        ax.set_ylabel("held-out mean@k, learnable families")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Experiment 2: mean +- sd over {len(next(iter(groups.values())))} seeds")
    return _png(fig)


def weights_png(groups: dict[str, list[RunData]]) -> bytes:
    """Each ADS arm's cluster weights p against steps (mean over seeds) above its windows' positions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(groups), figsize=(5 * len(groups), 7), squeeze=False)
    for col, (name, runs) in enumerate(groups.items()):
        for row, read in enumerate((_weights, window_trace)):
            ax = axes[row][col]
            traces = [read(r) for r in runs]
            for cluster in sorted(traces[0], key=lambda c: int(c) if c.isdigit() else c):
                series = [np.array([v for _, v in t[cluster]]) for t in traces if cluster in t]
                width = min(len(s) for s in series)
                steps = [s for s, _ in traces[0][cluster]][:width]
                ax.plot(steps, np.mean([s[:width] for s in series], axis=0), label=f"cluster {cluster}")
            ax.set_title(f"{name}: {'cluster weight p' if row == 0 else 'window position (0 easy, 1 hard)'}")
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=7, ncol=2)
    return _png(fig)


def _png(fig: Any) -> bytes:
    import io

    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
