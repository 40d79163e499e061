"""How a comparison (``ads_core.evaluation.compare``) is shown: Markdown tables (printed by ``ads compare`` and the
benchmark, saved as ``compare.md``, published as a Prefect artifact) and the plot of accuracy against steps and
against prompts rolled out (``compare.png``; mean and sd over a group's seeds)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ads_core.evaluation.compare import ABOUT, AVERAGE, RunData, common_sets, compare, ratio_text
from ads_core.evaluation.paired import MIN_VERDICT_SEEDS


def _cell(record: dict[str, Any] | None) -> str:
    if not record or record.get("mean_at_k") is None:
        return "-"
    text = f"{record['mean_at_k']:.3f}"
    if record.get("ci_low") is not None and record.get("ci_high") is not None:
        text += f" [{record['ci_low']:.3f}, {record['ci_high']:.3f}]"
    return text


def finals_table(result: dict[str, Any]) -> str:
    """Final accuracy per run and set (mean@k with its 95% interval), the average over the shared sets."""
    sets = result["sets"]
    shown = list(dict.fromkeys([*sets, *(s for r in result["runs"] for s in r["final"])]))
    ks = sorted({int(r["final"][s].get("k", 0)) for r in result["runs"] for s in r["final"]})
    head = (
        "| run | sampler | trainer | model | seed | "
        + " | ".join(shown)
        + (" | average" if len(sets) > 1 else "")
        + " | final at step | steps | prompts rolled out |"
    )
    lines = [
        f"Final accuracy: mean@{'/'.join(map(str, ks))} with its 95% interval (n = problems per set)",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for run in result["runs"]:
        final = run["final"]
        cells = [_cell(final.get(s)) for s in shown]
        if len(sets) > 1:
            cells.append(f"{sum(final[s]['mean_at_k'] for s in sets) / len(sets):.3f}")
        about = " | ".join("?" if run.get(key) is None else str(run[key]) for key in ABOUT)
        at = run.get("final_step", "-")
        lines.append(
            f"| {run['name']} | {about} | "
            + " | ".join(cells)
            + f" | {at} | {run['steps']} | {run['prompts_rolled_out']} |"
        )
    n = {s: result["runs"][0]["final"][s].get("n") for s in sets}
    lines.append("")
    lines.append("n: " + ", ".join(f"{s} {v}" for s, v in n.items()))
    lines += [f"note: {note}" for note in result.get("notes", [])]
    return "\n".join(lines)


def reach_table(result: dict[str, Any], key: str | None = None) -> str:
    """Steps and prompts each run needed to reach the baseline's final accuracy, as a share of the baseline's."""
    key = key or result["headline"]
    rows = result["reach"][key]
    base = result["baseline"]
    lines = [
        f"Steps and prompts rolled out to reach {base}'s final accuracy on {key} ({rows[0]['target']:.3f}), "
        f"as a share of {base}'s:",
        "",
        "| run | final | reached | at step | steps | prompts | wall time | prompts/step | informative | time s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        final = f"{row['final_mean']:.3f}" + (f" +- {row['final_sd']:.3f}" if row["runs"] > 1 else "")
        at = f"{row['steps_mean']:.0f}" if row["steps_mean"] is not None else "-"
        share = f"{row['informative_share']:.2f}" if row["informative_share"] is not None else "-"
        steps, prompts = ratio_text(row, "step_ratio", True), ratio_text(row, "rollout_ratio", True)
        wall = ratio_text(row, "time_ratio", True)
        lines.append(
            f"| {row['name']} | {final} | {row['reached']}/{row['runs']} | {at} | {steps} | {prompts} | {wall} | "
            f"{row['prompts_per_step']:.1f} | {share} | {row['seconds']:.0f} |"
        )
    lines += [
        "",
        "at step: the first evaluation at or above the target (mean over the runs that reach it). steps / prompts: "
        f"the run's steps (prompts rolled out) to the target over {base}'s, mean over seeds [95% t-interval over "
        f"seeds, from {MIN_VERDICT_SEEDS} seeds on]; '>=': some runs never reached it (counted as the whole run); "
        f"n/a: {base} ended no better than "
        "it started. wall time: the same for the training wall seconds logged to reach it (rollouts, reference "
        "rollouts, updates). informative: share of rolled-out groups whose rewards disagree. time: seconds of its "
        "logged steps.",
    ]
    return "\n".join(lines)


def curve_table(groups: dict[str, list[RunData]], key: str, columns: int = 8) -> str:
    """Accuracy at the evaluated steps (mean +- sd over a group's runs), at most COLUMNS steps shown."""
    sets = common_sets([r for g in groups.values() for r in g])
    curves = {name: [r.curve(key, sets) for r in runs] for name, runs in groups.items()}
    steps = sorted({p.step for cs in curves.values() for c in cs for p in c})
    pick = sorted({*steps[:: max(1, -(-len(steps) // columns))], steps[-1]}) if steps else []
    lines = [f"Accuracy on {key} at each evaluation", "", "| run | " + " | ".join(f"step {s}" for s in pick) + " |"]
    lines.append("|" + "---|" * (len(pick) + 1))
    for name, cs in curves.items():
        cells = []
        for s in pick:
            values = [p.accuracy for c in cs for p in c if p.step == s]
            if not values:
                cells.append("-")
                continue
            mean = sum(values) / len(values)
            sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
            cells.append(f"{mean:.3f}" + (f" +- {sd:.3f}" if len(values) > 1 else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict_lines(result: dict[str, Any]) -> str:
    """Each run (group) against the baseline on the final accuracy, by the one rule (``paired.paired_verdict``)."""
    lines = [
        f"Verdict on the final accuracy on {result['headline']}, paired by seed (a winner needs at least "
        f"{MIN_VERDICT_SEEDS} paired seeds and a 95% t-interval of the difference that excludes 0):",
        "",
    ]
    lines += [f"- {verdict['text']}" for verdict in result.get("verdicts", {}).values()]
    return "\n".join(lines)


def markdown(groups: dict[str, list[RunData]], result: dict[str, Any]) -> str:
    parts = [finals_table(result), curve_table(groups, result["headline"]), reach_table(result)]
    if result.get("verdicts"):
        parts.append(verdict_lines(result))
    parts += [reach_table(result, s) for s in result["sets"] if s != result["headline"]]
    return "\n\n".join(parts) + "\n"


def plot_png(groups: dict[str, list[RunData]], key: str = AVERAGE) -> bytes:
    """PNG: accuracy against optimizer steps, prompts rolled out and wall time, mean +- sd over a group's runs."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sets = common_sets([r for g in groups.values() for r in g])
    fig, axes = plt.subplots(1, 3, figsize=(16, 4), constrained_layout=True)
    per_step = set()
    for name, runs in groups.items():
        curves = [r.curve(key, sets) for r in runs]
        steps = sorted(set.intersection(*({p.step for p in c} for c in curves)))
        if not steps:
            continue
        acc = np.array([[p.accuracy for p in c if p.step in steps] for c in curves])
        prompts = np.array([[p.prompts for p in c if p.step in steps] for c in curves]).mean(axis=0)
        seconds = np.array([[p.seconds for p in c if p.step in steps] for c in curves]).mean(axis=0)
        mean, sd = acc.mean(axis=0), acc.std(axis=0)
        per_step.add(round(float(prompts[-1]) / max(1, steps[-1]), 2) if steps[-1] else None)
        label = f"{name}: mean, band +- sd over {len(runs)} seeds" if len(runs) > 1 else f"{name}: 1 run"
        for ax, x in ((axes[0], np.array(steps)), (axes[1], prompts), (axes[2], seconds)):
            ax.plot(x, mean, marker="o", ms=3, label=label)
            if len(runs) > 1:
                ax.fill_between(x, mean - sd, mean + sd, alpha=0.15)
    per_step.discard(None)
    steps_title = "accuracy against steps"
    if len(per_step) > 1:  # a step is not the same work for every sampler: the rollouts axis compares cost
        steps_title += "\n(samplers differ in prompts per step: compare cost on the right)"
    axes[0].set(xlabel="optimizer step", ylabel=f"held-out accuracy on {key} (mean@k)", title=steps_title)
    axes[1].set(xlabel="prompts rolled out (every generated group)", title="accuracy against rollouts")
    axes[2].set(xlabel="training wall seconds (machine-dependent)", title="accuracy against wall time")
    axes[0].legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return buf.getvalue()


def validation_report(run_dir: str | os.PathLike[str]) -> tuple[str, bytes] | None:
    """One run's validation as Markdown (mean@k [interval] per evaluated step and set) and its curve (PNG), for
    the ads-train flow's UI; None when the run recorded none."""
    from ads_core.evaluation.evallog import EVAL_FILE, read_evals

    records = read_evals(Path(run_dir) / EVAL_FILE)
    if not records:
        return None
    sets = list(dict.fromkeys(r["set"] for r in records))
    by_step: dict[int, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_step.setdefault(r["step"], {})[r["set"]] = r
    ks = sorted({int(r["k"]) for r in records})
    lines = [
        f"Validation: mean@{'/'.join(map(str, ks))} with its 95% interval, per step and set (`{EVAL_FILE}`)",
        "",
        "| step | prompts rolled out | " + " | ".join(sets) + " |",
        "|" + "---|" * (len(sets) + 2),
    ]
    for step, row in sorted(by_step.items()):
        prompts = next(iter(row.values())).get("prompts_rolled_out", "-")
        lines.append(f"| {step} | {prompts} | " + " | ".join(_cell(row.get(s)) for s in sets) + " |")
    run = RunData(Path(run_dir).name, str(run_dir), [], records)
    key = AVERAGE if len(sets) > 1 else sets[0]
    return "\n".join(lines) + "\n", plot_png({run.name: [run]}, key)


def write_comparison(groups: dict[str, list[RunData]], out: str | os.PathLike[str]) -> dict[str, Any]:
    """compare.json, compare.md and compare.png in OUT; returns the result with the paths and the Markdown."""
    result = compare(groups)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    text = markdown(groups, result)
    paths = {"json": folder / "compare.json", "markdown": folder / "compare.md", "plot": folder / "compare.png"}
    for key, content in (("json", json.dumps(result, indent=1)), ("markdown", text)):
        tmp = paths[key].with_name(paths[key].name + ".tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, paths[key])
    tmp_png = folder / "compare.tmp.png"
    tmp_png.write_bytes(plot_png(groups, result["headline"]))
    os.replace(tmp_png, paths["plot"])
    return {**result, "markdown": text, "paths": {k: str(v) for k, v in paths.items()}}
