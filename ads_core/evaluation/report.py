"""``table.md``: the paper's layout (one row per policy, one column per set, an average column), in percent.

The first table is mean@k (the paper's number, with its 95% interval below it), then pass@k and maj@k.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TITLES = {"mean_at_k": "mean@{k}", "pass_at_k": "pass@{k}", "maj_at_k": "maj@{k}"}


def _set_names(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for summary in summaries.values():
        names.extend(n for n in summary["sets"] if n not in names)
    return names


def _cell(values: Mapping[str, Any] | None, metric: str) -> str:
    if values is None:
        return "–"
    return f"{100 * values[metric]:.2f}"


def markdown_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown tables for {policy: summary.json document}."""
    sets = _set_names(summaries)
    ks = sorted({int(s["k"]) for s in summaries.values()})
    k = "/".join(str(x) for x in ks) or "k"
    lines: list[str] = []
    for metric, title in TITLES.items():
        lines.append(f"### {title.format(k=k)} (%)")
        lines.append("")
        lines.append("| policy | " + " | ".join(sets) + " | average |")
        lines.append("|---|" + "---:|" * (len(sets) + 1))
        for policy, summary in summaries.items():
            cells = [_cell(summary["sets"].get(name), metric) for name in sets]
            lines.append(f"| {policy} | " + " | ".join(cells) + f" | {_cell(summary['overall'], metric)} |")
        if metric == "mean_at_k":
            lines.append("")
            lines.append(
                "95% intervals (bootstrap over problems): "
                + "; ".join(
                    f"{policy} {name} [{100 * v['ci_low']:.1f}, {100 * v['ci_high']:.1f}] (n={v['n']})"
                    for policy, summary in summaries.items()
                    for name, v in summary["sets"].items()
                )
            )
        lines.append("")
    return "\n".join(lines)
