"""The report of `bench/grpo_curriculum.py`: steps (and rollouts) to uniform's final held-out accuracy per sampler,
the accuracy table (mean +- sd over seeds at checkpoints) and the plot. Runs are the dicts ``run_one`` returns,
with the step-0 point (the warmed-up policy) first in each curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BASELINE = "uniform"
HEADLINE = "ads-frontier"


def first_reach(curve: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    return next((point for point in curve if point["accuracy"] >= target - 1e-12), None)


def summarize(cfg: Any, runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per sampler: final accuracy, steps and prompts to uniform's final accuracy (per seed) and their ratios."""
    import numpy as np

    base = {r["seed"]: r for r in runs[BASELINE]}
    rows = []
    for name, seeds in runs.items():
        step_ratios, prompt_ratios, reached, steps_hit = [], [], [], []
        for r in seeds:
            b = base[r["seed"]]
            target = b["curve"][-1]["accuracy"]
            mine, theirs = first_reach(r["curve"], target), first_reach(b["curve"], target)
            assert theirs is not None  # uniform reaches its own final accuracy at its last evaluation at the latest
            reached.append(mine is not None)
            if mine is not None:
                steps_hit.append(mine["step"])
            hit = mine or {"step": cfg.steps, "rollout_prompts": r["rollout_prompts"]}
            if theirs["step"] == 0:  # uniform's final accuracy is no better than the start: nothing to reach
                step_ratios.append(float("nan"))
                prompt_ratios.append(float("nan"))
                continue
            step_ratios.append(hit["step"] / theirs["step"])
            prompt_ratios.append(hit["rollout_prompts"] / theirs["rollout_prompts"])
        finals = np.array([r["curve"][-1]["accuracy"] for r in seeds])
        greedy = np.array([r["curve"][-1].get("greedy", float("nan")) for r in seeds])
        prompts = sum(r["rollout_prompts"] for r in seeds)
        rows.append(
            {
                "sampler": name,
                "final_mean": float(finals.mean()),
                "final_sd": float(finals.std()),
                "greedy_mean": float(greedy.mean()),
                "greedy_sd": float(greedy.std()),
                "steps_mean": float(np.mean(steps_hit)) if steps_hit else None,
                "reached": int(sum(reached)),
                "seeds": len(seeds),
                "step_ratio": mean_or_none(step_ratios),
                "rollout_ratio": mean_or_none(prompt_ratios),
                "prompts_per_step": prompts / (len(seeds) * cfg.steps),
                "informative_share": sum(r["informative_groups"] for r in seeds) / max(1, prompts),
                "seconds": sum(r["seconds"] for r in seeds),
            }
        )
    return rows


def mean_or_none(values: list[float]) -> float | None:
    """The mean; None when any seed has no ratio (uniform ended no better than the warmed-up policy)."""
    return None if any(v != v for v in values) else sum(values) / len(values)


def ratio_text(row: dict[str, Any], key: str) -> str:
    if row[key] is None:
        return "n/a"
    if row["reached"] == 0:
        return "not reached"
    bound = ">= " if row["reached"] < row["seeds"] else ""
    return f"{bound}{row[key]:.2f}"


def format_report(cfg: Any, runs: dict[str, list[dict[str, Any]]], rows: list[dict[str, Any]], n_test: int) -> str:
    import numpy as np

    steps = [p["step"] for p in next(iter(runs.values()))[0]["curve"]]
    pick = sorted({*steps[::2], steps[-1]})
    width = max(len(n) for n in runs) + 2
    lines = [
        f"Held-out accuracy ({cfg.eval_samples} completions per problem at temperature 1, "
        f"{n_test} problems), mean +- sd over seeds "
        f"{list(cfg.seeds)}:",
        "step".ljust(width) + "".join(f"{s:>14d}" for s in pick),
    ]
    for name, seeds in runs.items():
        cells = []
        for s in pick:
            acc = np.array([next(p["accuracy"] for p in r["curve"] if p["step"] == s) for r in seeds])
            cells.append(f"{acc.mean():.3f}+-{acc.std():.3f}".rjust(14))
        lines.append(name.ljust(width) + "".join(cells))
    lines += [
        "",
        f"Steps to reach {BASELINE}'s final held-out accuracy (per seed), as a share of {BASELINE}'s steps:",
        "sampler".ljust(width)
        + f"{'final acc':>16}{'greedy':>16}{'reached':>9}{'at step':>9}{'steps':>13}{'rollouts':>13}"
        + f"{'prompts/step':>14}{'informative':>13}{'time s':>8}",
    ]
    for row in rows:
        at = f"{row['steps_mean']:.0f}" if row["steps_mean"] is not None else "-"
        lines.append(
            row["sampler"].ljust(width)
            + f"{row['final_mean']:>9.3f}+-{row['final_sd']:.3f}{row['greedy_mean']:>9.3f}+-{row['greedy_sd']:.3f}"
            + f"{row['reached']:>6}/{row['seeds']:<2}{at:>9}"
            + f"{ratio_text(row, 'step_ratio'):>13}{ratio_text(row, 'rollout_ratio'):>13}"
            + f"{row['prompts_per_step']:>14.1f}{row['informative_share']:>13.2f}{row['seconds']:>8.0f}"
        )
    lines.append(
        "final acc: sampled at temperature 1 (the target's metric); greedy: greedy decoding; sd over seeds (ddof 0, as "
        "ads simulate). at step: mean first evaluation at the target, over the seeds that reach it. steps / "
        f"rollouts: mean over seeds of the sampler's steps (prompts rolled out) to the target over {BASELINE}'s; "
        "'>=': some seeds never reached it (counted as the whole run). informative: share of rolled-out groups whose "
        "rewards disagree. time: wall seconds of its runs."
    )
    return "\n".join(lines)


def save_plot(runs: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for name, seeds in runs.items():
        steps = np.array([p["step"] for p in seeds[0]["curve"]])
        acc = np.array([[p["accuracy"] for p in r["curve"]] for r in seeds])
        prompts = np.array([[p["rollout_prompts"] for p in r["curve"]] for r in seeds]).mean(axis=0)
        mean, sd = acc.mean(axis=0), acc.std(axis=0)
        for ax, x in ((axes[0], steps), (axes[1], prompts)):
            ax.plot(x, mean, marker="o", ms=3, label=name)
            ax.fill_between(x, mean - sd, mean + sd, alpha=0.15)
    axes[0].set(xlabel="optimizer step", ylabel="held-out accuracy (sampled, T=1)", title="accuracy against steps")
    axes[1].set(xlabel="prompts rolled out", title="accuracy against rollouts (mean over seeds)")
    axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=80)
    plt.close(fig)
