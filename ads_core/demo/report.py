"""What `ads demo` prints: what it measured, whichever way it came out, from ``ads compare``'s result
(compare.json's numbers, nothing recomputed differently), and where the plot is."""

from __future__ import annotations

from typing import Any

from ads_core.evaluation.compare import ratio_text


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f}"
    return f"{mean:.3f} (seeds {', '.join(f'{v:.3f}' for v in values)}; range {max(values) - min(values):.3f})"


def summary_lines(result: dict[str, Any], groups: dict[str, list[Any]], steps: int) -> list[str]:
    """The verdict in plain sentences: both final accuracies with their spread over seeds, the steps and rollouts
    ADS needed to reach uniform's final accuracy, the start accuracy, and the files."""
    key = result["headline"]
    rows = {row["name"]: row for row in result["reach"][key]}
    base_name, cand_name = list(groups)[:2]
    base, cand = rows[base_name], rows[cand_name]
    seeds = base["runs"]
    finals = {name: [r.curve(key)[-1].accuracy for r in runs] for name, runs in groups.items()}
    starts = [r.curve(key)[0].accuracy for r in groups[base_name]]
    n = result["runs"][0]["final"][key].get("n")
    k = result["runs"][0]["final"][key].get("k")
    lines = [
        f"measured: {cand_name} vs {base_name}, {seeds} seed(s) x {steps} GRPO steps each, "
        "from the same warmed-up policy; "
        f"held-out accuracy = mean@{k} on {n} problems (step 0: {sum(starts) / len(starts):.3f})",
        f"  final accuracy {base_name}: {_spread(finals[base_name])}",
        f"  final accuracy {cand_name}: {_spread(finals[cand_name])}",
    ]
    if seeds > 1 and len(finals[cand_name]) == len(finals[base_name]):
        diffs = [c - b for c, b in zip(finals[cand_name], finals[base_name], strict=True)]
        higher = sum(d > 0 for d in diffs)
        lines.append(
            f"  paired by seed: {cand_name} ended higher in {higher} of {seeds} seeds; difference "
            f"{sum(diffs) / len(diffs):+.3f} on average (from {min(diffs):+.3f} to {max(diffs):+.3f})"
        )
    step_ratio, rollout_ratio = ratio_text(cand, "step_ratio", True), ratio_text(cand, "rollout_ratio", True)
    span = cand.get("step_ratio_interval")
    lines.append(
        f"  to {base_name}'s final accuracy ({base['target']:.3f}): {cand_name} reached it in "
        f"{cand['reached']}/{seeds} seed(s); steps needed: {step_ratio} of {base_name}'s, "
        f"prompts rolled out: {rollout_ratio} of {base_name}'s"
    )
    if cand["step_ratio"] is None:
        verdict = f"no verdict: {base_name} ended no better than it started, so there is no target to reach"
    elif cand["reached"] == 0:
        verdict = f"{cand_name} did NOT reach {base_name}'s final accuracy in this run"
    elif cand["reached"] < seeds:
        verdict = f"mixed: {cand_name} reached it in {cand['reached']} of {seeds} seeds only"
    elif span is not None and span[0] < 1.0 <= span[1]:
        verdict = f"no order resolved: the steps ratio's interval over seeds spans 1 ({step_ratio})"
    elif cand["step_ratio"] < 1.0:
        verdict = f"{cand_name} got there in fewer steps than {base_name} (ratio {step_ratio})"
    else:
        verdict = f"{cand_name} was no faster than {base_name} here (ratio {step_ratio})"
    lines.append(f"  verdict: {verdict}; differences within the seeds' range are noise at this size")
    paths = result["paths"]
    lines.append(f"plot: {paths['plot']}")
    lines.append(f"table: {paths['markdown']}; numbers: {paths['json']}")
    return lines
