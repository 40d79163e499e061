"""What `ads demo` prints under ``ads compare``'s tables: what it measured, whichever way it came out, from
``ads compare``'s result (compare.json's numbers, nothing recomputed differently), and where the plot is. The
verdict is said once, in the tables' "Verdict" section (``ads compare``'s, by the one rule of
``ads_core.evaluation.paired``)."""

from __future__ import annotations

from typing import Any

from ads_core.evaluation.compare import ratio_text


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f}"
    return f"{mean:.3f} (seeds {', '.join(f'{v:.3f}' for v in values)}; range {max(values) - min(values):.3f})"


def summary_lines(result: dict[str, Any], groups: dict[str, list[Any]], steps: int) -> list[str]:
    """What was measured in plain sentences: both final accuracies with their spread over seeds, the paired
    difference, and the steps and rollouts ADS needed to reach uniform's final accuracy (the verdict is the
    tables')."""
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
    diffs = [c - b for c, b in zip(finals[cand_name], finals[base_name], strict=True)]
    if seeds > 1:
        higher = sum(d > 0 for d in diffs)
        lines.append(
            f"  paired by seed: {cand_name} ended higher in {higher} of {seeds} seeds; difference "
            f"{sum(diffs) / len(diffs):+.3f} on average (from {min(diffs):+.3f} to {max(diffs):+.3f})"
        )
    lines.append("  " + reach_line(base, cand, base_name, cand_name, seeds))
    paths = result["paths"]
    lines.append(f"plot: {paths['plot']}")
    lines.append(f"table: {paths['markdown']}; numbers: {paths['json']}")
    return lines


def reach_line(base: dict[str, Any], cand: dict[str, Any], base_name: str, cand_name: str, seeds: int) -> str:
    """Steps and prompts to the baseline's final accuracy. A seed that never got there counts as its whole run,
    so the ratio is then a lower bound on the cost, and is said to be one (">= 0.91" is no speed-up)."""
    head = (
        f"to {base_name}'s final accuracy ({base['target']:.3f}): {cand_name} reached it in {cand['reached']}/{seeds}"
    )
    if cand["step_ratio"] is None:
        return f"{head}; no ratio: {base_name} ended no better than it started"
    if cand["reached"] == 0:
        return f"{head}: not reached within the run"
    steps, rollouts = ratio_text(cand, "step_ratio", True), ratio_text(cand, "rollout_ratio", True)
    text = f"{head}; steps needed: {steps} of {base_name}'s, prompts rolled out: {rollouts} of {base_name}'s"
    if cand["reached"] < seeds:
        text += f" (lower bounds: {seeds - cand['reached']} seed(s) never got there, counted as their whole run)"
    return text
