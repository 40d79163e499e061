"""``table.md``: the paper's layout (one row per policy; MATH-500, AIME 25, AIME 24, Minerva, AMC 23, GPQA-Diamond,
MMLU-Pro in the paper's order, then any other set; the average over the sets present), in percent.

The first table is mean@k (the paper's number, with its 95% interval below it), then pass@k and maj@k. Once any
of the paper's sets is in a table, all seven columns are (a set not evaluated shows "–"). Below the tables: the
prompt template each policy was evaluated with, and where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ads_core.evaluation.metrics import MIN_INTERVAL_PROBLEMS
from ads_core.evaluation.sets.catalog import PAPER_SETS, PAPER_TITLES

TITLES = {"mean_at_k": "mean@{k}", "pass_at_k": "pass@{k}", "maj_at_k": "maj@{k}"}


def set_columns(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The paper's seven sets in its order (when any of them is there), then the other sets as first seen."""
    names: list[str] = []
    for summary in summaries.values():
        names.extend(n for n in summary["sets"] if n not in names)
    paper = list(PAPER_SETS) if any(n in PAPER_SETS for n in names) else []
    return paper + [n for n in names if n not in PAPER_SETS]


def _cell(values: Mapping[str, Any] | None, metric: str) -> str:
    if values is None:
        return "–"
    return f"{100 * values[metric]:.2f}"


def _interval(values: Mapping[str, Any]) -> str:
    if values.get("ci_low") is None or values.get("ci_high") is None:
        return f"none (fewer than {MIN_INTERVAL_PROBLEMS} problems)"
    return f"[{100 * values['ci_low']:.1f}, {100 * values['ci_high']:.1f}]"


def template_line(summary: Mapping[str, Any]) -> str:
    """``name (source)`` of a summary's prompt template."""
    template = summary.get("template") or {}
    name = template.get("name") or "formatted prompts kept"
    return f"{name} ({template['source']})" if template.get("source") else str(name)


def markdown_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown tables for {policy: summary.json document}."""
    sets = set_columns(summaries)
    ks = sorted({int(s["k"]) for s in summaries.values()})
    k = "/".join(str(x) for x in ks) or "k"
    heads = [PAPER_TITLES.get(name, name) for name in sets]
    lines: list[str] = []
    for metric, title in TITLES.items():
        lines.append(f"### {title.format(k=k)} (%)")
        lines.append("")
        lines.append("| policy | " + " | ".join(heads) + " | Average |")
        lines.append("|---|" + "---:|" * (len(sets) + 1))
        for policy, summary in summaries.items():
            cells = [_cell(summary["sets"].get(name), metric) for name in sets]
            lines.append(f"| {policy} | " + " | ".join(cells) + f" | {_cell(summary['overall'], metric)} |")
        if metric == "mean_at_k":
            lines.append("")
            lines.append(
                "95% intervals (bootstrap over problems): "
                + "; ".join(
                    f"{policy} {name} {_interval(v)} (n={v['n']})"
                    for policy, summary in summaries.items()
                    for name, v in summary["sets"].items()
                )
            )
            lines.append("Average: over the sets present; –: not evaluated.")
        lines.append("")
    lines.append("Prompt template: " + "; ".join(f"{p} {template_line(s)}" for p, s in summaries.items()))
    lines.append("")
    return "\n".join(lines)
