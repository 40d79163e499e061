"""Does the difficulty column mean anything for this model and data? The report's answer, where the source says.

When the source's rows carry a difficulty of their own (MATH's `level`, a dataset's `difficulty`, a `pass_rate`),
each difficulty measure is compared with it by Spearman's rank correlation (ρ: +1 the same order, 0 none, −1
reversed); a measure that tracks difficulty has ρ > 0 against a level and ρ < 0 against a pass rate. The clusters
are compared with a categorical label (`subject`) by NMI (topics.py). Numbers are read from
`extra_info.source_meta`, where the format stage keeps a source row's short fields; "Level 3" reads as 3.

Measures (`MEASURES`): `nll_mean`, the seed's token-mean NLL of the reference solution; `nll_sum`, its sum over
the solution's tokens (longer solutions weigh more); `nll_answer`, the token-mean NLL of the final answer given
the question alone; `pass_rate`, the policy's share of correct rollouts (higher is easier). The build scores one
of them (score.difficulty) and reports that one, plus the other of `nll_sum` and `nll_mean` when it scored one
of them (the sum is the mean times the token count the scores keep).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

MEASURES = ("nll_mean", "nll_sum", "nll_answer", "pass_rate")
MEASURE_TEXT = {  # what each measure is, as every label of a build names its difficulty
    "nll_mean": "token-mean NLL of the reference solution",
    "nll_sum": "summed NLL of the reference solution",
    "nll_answer": "token-mean NLL of the final answer given the question",
    "pass_rate": "the policy's share of correct rollouts",
}
# numeric labels a source may carry about a row's difficulty (first found wins per name; every one is reported)
NUMERIC_LABELS = ("level", "difficulty", "pass_rate", "solve_rate", "rating", "elo")
MIN_LABELLED = 0.9  # share of rows that must carry the label
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def describe_measure(measure: str | None) -> str:
    """``nll_sum, the summed NLL of the reference solution``: the label every place that names a build's difficulty
    uses, from the measure the artifact records (an artifact that records none says so)."""
    if not measure:
        return "measure not recorded (built before the final manifest named it)"
    return f"{measure}, {MEASURE_TEXT[measure]}" if measure in MEASURE_TEXT else measure


def label_number(value: Any) -> float | None:
    """A label as a number: 3 -> 3.0, "Level 3" -> 3.0, "0.25" -> 0.25; None when it holds no number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    found = _NUMBER.search(str(value))
    return float(found.group()) if found else None


def numeric_labels(final: pl.DataFrame) -> dict[str, np.ndarray]:
    """{label: one float per row (NaN where missing)} for each of NUMERIC_LABELS nearly every row carries with at
    least two distinct values."""
    if "source_meta" not in final.columns or final.height == 0:
        return {}
    meta = final["source_meta"].cast(pl.String)
    out = {}
    for name in NUMERIC_LABELS:
        raw = meta.str.json_path_match(f"$.{name}").to_list()
        values = np.array([np.nan if (v := label_number(x)) is None else v for x in raw], dtype=np.float64)
        present = values[~np.isnan(values)]
        if len(present) >= MIN_LABELLED * final.height and len(np.unique(present)) >= 2:
            out[name] = values
    return out


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> dict[str, Any]:
    """Spearman's ρ over the rows where both are finite, with its n and two-sided p (None when undefined)."""
    from scipy.stats import spearmanr

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        return {"rho": None, "p": None, "n": int(len(x))}
    result = spearmanr(x, y)
    return {"rho": round(float(result.statistic), 4), "p": float(f"{float(result.pvalue):.3g}"), "n": int(len(x))}


def measure_columns(final: pl.DataFrame, scored: str) -> dict[str, np.ndarray]:
    """The measures a build has: the one it scored (the `difficulty` column) and the other of the token-mean and
    summed NLL, derived from it."""
    out = {scored: final["difficulty"].to_numpy().astype(np.float64)}
    if scored in ("nll_mean", "nll_sum") and "n_target_tokens" in final.columns:
        tokens = final["n_target_tokens"].to_numpy().astype(np.float64)
        if scored == "nll_mean":
            out["nll_sum"] = out["nll_mean"] * tokens
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                out["nll_mean"] = np.where(tokens > 0, out["nll_sum"] / tokens, np.nan)
    return {name: out[name] for name in MEASURES if name in out}  # the seed's measure first, as MEASURES lists


def validity(
    measures: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray], agreement: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The report section's numbers: Spearman of every measure against every label (and against each other
    measure, the pass rate above all), and NMI(cluster, categorical label). None when there is nothing to
    compare against."""
    if not labels and not agreement and len(measures) < 2:
        return None
    rows = []
    names = list(measures)
    for i, name in enumerate(names):
        for label, values in labels.items():
            rows.append({"measure": name, "against": label, **spearman(measures[name], values)})
        for other in names[i + 1 :]:
            rows.append({"measure": name, "against": other, **spearman(measures[name], measures[other])})
    clusters = None
    if agreement:
        clusters = {"label": agreement["column"], "nmi": agreement["nmi"], "values": agreement["values"]}
    return {"spearman": rows, "clusters": clusters}


def markdown(section: Mapping[str, Any], scored: str) -> str:
    """The section as Markdown: one table of ρ, and the clusters' NMI."""
    lines = [
        "## Difficulty validity",
        "",
        f"The build's difficulty is `{scored}`. Spearman ρ between each measure and what the source says about "
        "difficulty (ρ > 0 against a level and < 0 against a pass rate mean the measure tracks it).",
        "",
        "| measure | against | ρ | p | n |",
        "|---|---|---:|---:|---:|",
    ]
    for row in section["spearman"]:
        rho = "n/a" if row["rho"] is None else f"{row['rho']:+.3f}"
        p = "" if row["p"] is None else f"{row['p']:.2g}"
        lines.append(f"| {row['measure']} | {row['against']} | {rho} | {p} | {row['n']} |")
    clusters = section.get("clusters")
    if clusters:
        lines += [
            "",
            f"Clusters against the source's `{clusters['label']}` ({clusters['values']} values): "
            f"NMI **{clusters['nmi']:.3f}** (1: the same grouping, 0: independent).",
        ]
    return "\n".join(lines) + "\n"


def validity_summary(section: Mapping[str, Any], scored: str) -> dict[str, Any]:
    """The manifest's short form: the scored measure, rho of each measure against each source label, and of the
    measures against each other (all there is when the source labels no difficulty)."""
    measures = set(MEASURES)
    rows = [r for r in section["spearman"] if r["against"] not in measures]
    between = [r for r in section["spearman"] if r["against"] in measures]
    return {
        "scored": scored,
        "spearman": {f"{r['measure']} vs {r['against']}": r["rho"] for r in rows},
        "between_measures": {f"{r['measure']} vs {r['against']}": r["rho"] for r in between},
    }


def summary_line(summary: Mapping[str, Any]) -> str | None:
    """The build's one printed line on validity: rho against the source's own labels, or, when it has none, says so
    and gives the measures against each other; None when there is nothing to say."""
    where = "OUT/report/difficulty_validity.json"

    def shown(rhos: Mapping[str, Any]) -> str:
        return ", ".join(f"{name} {rho:+.3f}" if rho is not None else f"{name} n/a" for name, rho in rhos.items())

    if summary.get("spearman"):
        return f"difficulty validity (Spearman rho, {where}): {shown(summary['spearman'])}"
    if summary.get("between_measures"):
        return (
            "difficulty validity: no level or subject column in the source, so nothing to check the difficulty "
            f"against; the measures against each other (Spearman rho, {where}): {shown(summary['between_measures'])}"
        )
    return None
