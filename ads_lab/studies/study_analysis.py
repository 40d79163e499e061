"""The study's analysis (docs/study.md), decided before the runs: paired by seed against uniform, bootstrap
intervals over seeds, the secondary metrics, the seeds the target half-width needs, the decision rule, and the
window traces of the ADS runs. Verdicts come from ``ads_core.evaluation.paired`` (t-intervals decide, since
Experiment 2; the bootstrap is printed beside them), as `ads demo`'s and `ads compare`'s do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ads_core.evaluation.compare import AVERAGE, RunData, bootstrap_interval, common_sets, first_reach, summarize
from ads_core.evaluation.paired import paired_verdict

BASELINE = "uniform"
PRIMARY = ("ads", "ads-frontier")  # the two pre-declared primary comparisons (97.5% intervals)
PRIMARY_LEVEL, SECONDARY_LEVEL = 0.975, 0.95
RESAMPLES = 10_000
TARGET_HALF_WIDTH = 0.02
PILOT_SD_MARGIN = 1.3  # a 4-seed sd is a poor estimate: docs/study.md scales it up before sizing the study
Z = {0.95: 1.959964, 0.975: 2.241403}


def finals(runs: Sequence[RunData], key: str, sets: Sequence[str]) -> list[float]:
    return [r.curve(key, sets)[-1].accuracy for r in runs]


def _start(run: RunData, key: str, sets: Sequence[str]) -> float:
    return run.curve(key, sets)[0].accuracy


def _seconds_to(run: RunData, step: int) -> float:
    return sum(float(s.get("seconds", 0.0)) for s in run.steps if int(s.get("step", 0)) <= step)


def _auc(run: RunData, key: str, sets: Sequence[str], span: int) -> float:
    """Mean held-out accuracy over prompts rolled out 0..SPAN, the same span for every run compared (the
    smallest final rollout count among them), so runs that rolled out more are not averaged over more."""
    from ads_lab.studies.experiment2_analysis import auc

    return auc(run, sets if key == AVERAGE else [key], span)


def _wall_ratios(
    base: Sequence[RunData], runs: Sequence[RunData], key: str, sets: Sequence[str]
) -> tuple[list[float], bool]:
    """Training seconds to the same seed's uniform final accuracy, as a share of uniform's (a seed that never got
    there counts as its whole run), and whether any seed was censored so (then the mean is a lower bound)."""
    out, censored = [], False
    for b, r in zip(base, runs, strict=True):
        target = b.curve(key, sets)[-1].accuracy
        theirs, mine = first_reach(b.curve(key, sets), target), first_reach(r.curve(key, sets), target)
        if theirs is None or theirs.step == 0:
            return [], False
        denominator = _seconds_to(b, theirs.step)
        if denominator <= 0:
            return [], False
        censored = censored or mine is None
        out.append(_seconds_to(r, mine.step if mine else r.total_steps) / denominator)
    return out, censored


def analyse(groups: dict[str, list[RunData]], key: str) -> dict[str, Any]:
    """Every sampler against uniform, paired by seed (the groups list their runs in the same seed order)."""
    sets = common_sets([r for g in groups.values() for r in g])
    base = groups[BASELINE]
    reach = {row["name"]: row for row in summarize(groups, key)}
    base_finals = finals(base, key, sets)
    span = min(r.total_prompts for g in groups.values() for r in g)  # AUC over one rollout span for every run
    rows = []
    for name, runs in groups.items():
        mine = finals(runs, key, sets)
        gains = [m - _start(r, key, sets) for m, r in zip(mine, runs, strict=True)]
        row: dict[str, Any] = {
            "name": name,
            "seeds": len(runs),
            "final_mean": sum(mine) / len(mine),
            "final_sd": _sd(mine),
            "auc_mean": sum(_auc(r, key, sets, span) for r in runs) / len(runs),
            "reach": reach[name],
            "per_family": {s: sum(finals(runs, s, [s])) / len(runs) for s in sets},
            # did it learn at all: final minus step-0 accuracy, paired by seed (the pilot's viability gate)
            "gain": paired_verdict("final", "step 0", gains),
        }
        if name != BASELINE:
            diffs = [m - b for m, b in zip(mine, base_finals, strict=True)]
            level = PRIMARY_LEVEL if name in PRIMARY else SECONDARY_LEVEL
            row["diffs"] = diffs
            row["diff_sd"] = _sd(diffs)
            row["paired"] = paired_verdict(name, BASELINE, diffs, level)
            aucs = [_auc(r, key, sets, span) - _auc(b, key, sets, span) for r, b in zip(runs, base, strict=True)]
            row["auc_diff"] = {"mean": sum(aucs) / len(aucs), "interval": bootstrap_interval(aucs, resamples=RESAMPLES)}
            walls, censored = _wall_ratios(base, runs, key, sets)
            wall_span = bootstrap_interval(walls, resamples=RESAMPLES) if walls else None
            row["wall_ratio"] = (
                {"mean": sum(walls) / len(walls), "interval": wall_span, "censored": censored} if walls else None
            )
        rows.append(row)
    gate = next(r["gain"] for r in rows if r["name"] == BASELINE)
    return {
        "key": key,
        "sets": sets,
        "rows": rows,
        "decision": decide(rows),
        "power": power(rows),
        "uniform_learns": gate["winner"] == "final",
        "uniform_gain": gate["text"],
    }


def _sd(values: Sequence[float]) -> float:  # ddof 1: the seed-to-seed spread the power rule uses
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def seeds_needed(sd: float, level: float = PRIMARY_LEVEL, half_width: float = TARGET_HALF_WIDTH) -> int:
    """Seeds for a paired interval of HALF_WIDTH at LEVEL, for a seed-to-seed sd of the difference SD."""
    return max(2, math.ceil((Z[level] * sd / half_width) ** 2))


def power(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The largest primary sd (scaled by the pilot margin) and the seeds it needs; the achieved half-widths."""
    primary = [r for r in rows if r["name"] in PRIMARY and "diff_sd" in r]
    achieved = {
        r["name"]: (r["paired"]["interval"][1] - r["paired"]["interval"][0]) / 2
        for r in rows
        if r.get("paired", {}).get("interval")
    }
    if not primary:
        return {"achieved_half_width": achieved}
    sd = max(r["diff_sd"] for r in primary)
    return {
        "diff_sd": sd,
        "sd_with_margin": sd * PILOT_SD_MARGIN,
        "seeds_needed": seeds_needed(sd * PILOT_SD_MARGIN),
        "achieved_half_width": achieved,
    }


def decide(rows: Sequence[dict[str, Any]]) -> str:
    """docs/study.md's decision rule, applied to the primary comparisons."""
    by = {r["name"]: r for r in rows}
    present = [n for n in PRIMARY if n in by]
    if not present:
        return "no primary comparison ran: no decision"
    wins = [n for n in present if by[n]["paired"]["winner"] == n]
    losses = [n for n in present if by[n]["paired"]["winner"] == BASELINE]
    if len(wins) == 1:
        return f"recommend {wins[0]}: its paired interval against uniform lies above 0"
    if len(wins) == 2:
        a, b = (by[n]["diffs"] for n in PRIMARY)
        between = paired_verdict(PRIMARY[1], PRIMARY[0], [y - x for x, y in zip(a, b, strict=True)])
        if between["winner"] is None:
            return f"both ADS windows beat uniform; not told apart ({between['text']}): the default stays (ads)"
        return f"recommend {between['winner']}: both beat uniform and {between['text']}"
    if losses:
        return f"uniform was better than {', '.join(losses)} (interval below 0); the default stays (ads), said plainly"
    return "no advantage of ADS over uniform resolved on this task: the default stays (ads), said plainly"


def results_table(analysis: dict[str, Any]) -> str:
    """One Markdown table: final accuracy, the paired difference with its interval and the secondary metrics."""
    lines = [
        "| sampler | seeds | final acc (mean +- sd) | paired diff vs uniform [interval] | verdict | steps to uniform's "
        "final (ratio [95%]) | rollouts to it | wall time to it | informative groups | AUC vs rollouts (diff) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    from ads_core.evaluation.compare import ratio_text

    for r in analysis["rows"]:
        reach = r["reach"]
        share = reach.get("informative_share")
        cells = [
            r["name"],
            str(r["seeds"]),
            f"{r['final_mean']:.3f} +- {r['final_sd']:.3f}",
        ]
        if r["name"] == BASELINE:
            cells += ["(baseline)", "", "1", "1", "1"]
        else:
            p, span = r["paired"], r["paired"]["interval"]
            interval = f" [{span[0]:+.3f}, {span[1]:+.3f}] ({100 * p['level']:g}%)" if span else ""
            verdict = p["winner"] + " higher" if p["winner"] else "no resolved difference"
            wall = r["wall_ratio"]
            wall_text = "n/a"
            if wall:
                wall_text = (
                    (">= " if wall.get("censored") else "")
                    + f"{wall['mean']:.2f}"
                    + (f" [{wall['interval'][0]:.2f}, {wall['interval'][1]:.2f}]" if wall["interval"] else "")
                )
            cells += [
                f"{p['mean']:+.3f}{interval}",
                verdict,
                ratio_text(reach, "step_ratio", True),
                ratio_text(reach, "rollout_ratio", True),
                wall_text,
            ]
        cells.append(f"{share:.2f}" if share is not None else "n/a")
        auc = r.get("auc_diff")
        cells.append(f"{r['auc_mean']:.3f}" + (f" ({auc['mean']:+.3f})" if auc else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def family_table(analysis: dict[str, Any]) -> str:
    """Final accuracy per held-out family and sampler (mean over seeds)."""
    sets = analysis["sets"]
    lines = ["| sampler | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    for r in analysis["rows"]:
        lines.append(f"| {r['name']} | " + " | ".join(f"{r['per_family'][s]:.3f}" for s in sets) + " |")
    return "\n".join(lines)
