"""`ads compare RUN...`: training runs side by side, from their `steps.jsonl` and `eval.jsonl`.

For each run: the final validation accuracy (mean@k) per eval set with its 95% interval; and the steps and the
prompts rolled out it needed to reach the FIRST run's (the baseline's) final accuracy, as a share of what the
baseline itself needed. The rule is ``ads simulate``'s and ``bench/grpo_curriculum.py``'s: the target is reached at
the first evaluation at or above it; a run that never gets there counts as its whole run, shown as ">=" (and as "not
reached" when none of its seeds does); when the baseline's final accuracy is no better than where it started
(reached at step 0) there is nothing to reach and the ratio is "n/a". The headline is the ``average`` over the sets
every run evaluated (the paper's average column); each set has its own rows too.

A comparison entry is a group of runs: one run per seed (``ads compare NAME=RUN,RUN,...``, the demo, the
benchmark; a plain ``RUN`` is a group of one), reported as the mean and sd over seeds, seed i of a group measured
against seed i of the baseline. Each ratio's 95% interval over seeds is the t-interval (``paired.t_interval``), given
only from ``paired.MIN_VERDICT_SEEDS`` seeds on: below that a percentile bootstrap is little more than the seeds'
own range. The verdict on the final accuracy is ``paired.paired_verdict``'s, the one rule of every comparison here:
a winner only with at least that many paired seeds and a t-interval that excludes 0.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.common.errors import InputError
from ads_core.common.jsonl import read_steps
from ads_core.evaluation.evallog import EVAL_FILE, check_evals, read_evals
from ads_core.evaluation.metrics import BOOTSTRAP_RESAMPLES, mean_interval
from ads_core.evaluation.paired import MIN_VERDICT_SEEDS, paired_verdict, t_interval

AVERAGE = "average"
RUNS_ROOT = "ads-runs"
STEPS_FILE = "steps.jsonl"
RUN_FILE = "run.json"  # what the run is (its "about": sampler, trainer, model, seed); ads_core.train.resume.identity
ABOUT = ("sampler", "trainer", "model", "seed")  # the tables' columns
RECORDED = (*ABOUT, "drop_all_wrong", "code")  # what read_about returns (code: the commit and dirty flag)


@dataclass(frozen=True)
class Point:
    step: int
    prompts: int  # prompts rolled out by training up to this step
    accuracy: float  # mean@k
    ci_low: float | None = None
    ci_high: float | None = None
    seconds: float = 0.0  # training wall seconds logged up to this step


def step_seconds(record: dict[str, Any]) -> float:
    """A logged step's wall seconds: ``step_seconds`` (rollouts, reference rollouts, update, saves), else TRL's
    ``seconds``."""
    return float(record.get("step_seconds", record.get("seconds", 0.0)) or 0.0)


@dataclass
class RunData:
    name: str
    folder: str
    steps: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    about: dict[str, Any] = field(default_factory=dict)  # sampler, trainer, model, seed (None where unknown)
    notes: list[str] = field(default_factory=list)  # what the reader should know (NaN records left out)

    @property
    def sets(self) -> list[str]:
        return list(dict.fromkeys(r["set"] for r in self.evals))

    def prompts_at(self, step: int) -> int:
        """Prompts rolled out in the logged steps up to STEP (dynamic sampling's extra batches included)."""
        return sum(int(s.get("rollout_prompts", 0)) for s in self.steps if s["step"] <= step)

    def seconds_at(self, step: int) -> float:
        """Training wall seconds of the logged steps up to STEP."""
        return sum(step_seconds(s) for s in self.steps if s["step"] <= step)

    @property
    def total_steps(self) -> int:
        return max([s["step"] for s in self.steps] + [r["step"] for r in self.evals] + [0])

    @property
    def total_prompts(self) -> int:
        logged = self.prompts_at(self.total_steps) if self.steps else 0
        return max([logged] + [int(r.get("prompts_rolled_out") or 0) for r in self.evals])

    def curve(self, set_name: str = AVERAGE, sets: Sequence[str] | None = None) -> list[Point]:
        """Accuracy per evaluated step on one set, or the mean over SETS (default all) where all were evaluated."""
        by_step: dict[int, dict[str, dict[str, Any]]] = {}
        for r in self.evals:
            by_step.setdefault(r["step"], {})[r["set"]] = r
        wanted = [set_name] if set_name != AVERAGE else list(sets or self.sets)
        points = []
        for step in sorted(by_step):
            records = [by_step[step].get(name) for name in wanted]
            if not wanted or any(r is None or r.get("mean_at_k") is None for r in records):
                continue
            prompts = records[0].get("prompts_rolled_out")  # type: ignore[union-attr]
            prompts = int(prompts) if isinstance(prompts, int) else self.prompts_at(step)
            accuracy = sum(float(r["mean_at_k"]) for r in records) / len(records)  # type: ignore[index]
            single = records[0] if len(records) == 1 else {}
            low, high = single.get("ci_low"), single.get("ci_high")  # type: ignore[union-attr]
            points.append(Point(step, prompts, accuracy, low, high, self.seconds_at(step)))
        return points


def resolve_run(ref: str, runs_root: str = RUNS_ROOT) -> Path:
    """A run folder, or a run name under ./ads-runs; one clear error otherwise."""
    for candidate in (Path(ref), Path(runs_root) / ref):
        if candidate.is_dir():
            return candidate
    raise InputError(f"run {ref}: no folder {ref} and no run {runs_root}/{ref}")


def load_run(ref: str, name: str | None = None, runs_root: str = RUNS_ROOT) -> RunData:
    """A run's steps and evaluations; a run without any validation record is refused (nothing to compare)."""
    folder = resolve_run(ref, runs_root)
    notes = check_evals(folder / EVAL_FILE)  # a record that is not numbers: one line naming file and line
    evals = [r for r in read_evals(folder / EVAL_FILE) if not _nan(r.get("mean_at_k"))]
    if not evals:
        raise InputError(
            f"run {ref}: {folder / EVAL_FILE} has no validation records; train with eval sets "
            "(--eval-set NAME, --eval-steps N) to record them"
        )
    steps = read_steps(folder / STEPS_FILE)
    return RunData(name or folder.resolve().name, str(folder), steps, evals, read_about(folder), notes)


def read_about(folder: Path) -> dict[str, Any]:
    """The run's sampler, trainer, model and seed from RUN_DIR/run.json (a run recorded before it kept them: read
    from its trajectory's keys); None for what it does not say."""
    try:
        doc = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    about = doc.get("about") if isinstance(doc.get("about"), dict) else {}
    trajectory = doc.get("trajectory") if isinstance(doc.get("trajectory"), dict) else {}
    if not about and trajectory:
        trainer = next(
            (k.split(".")[0] for k in trajectory if k.endswith(".seed") and not k.startswith("sampler")), None
        )
        about = {
            "sampler": trajectory.get("sampler.kind"),
            "trainer": trainer,
            "model": trajectory.get("model"),
            "seed": trajectory.get(f"{trainer}.seed"),
        }
    return {key: about.get(key) for key in RECORDED}


def _nan(value: Any) -> bool:
    """No usable mean@k: null (verl's NaN written as null) or a NaN that a hand or another tool wrote."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def load_runs(refs: Sequence[str], runs_root: str = RUNS_ROOT) -> list[RunData]:
    """Each run in REFS; two with one folder name (a/run, b/run) are told apart as run and run-2."""
    runs: list[RunData] = []
    for ref in refs:
        run = load_run(ref, runs_root=runs_root)
        base, i = run.name, 2
        while run.name in {r.name for r in runs}:
            run.name, i = f"{base}-{i}", i + 1
        runs.append(run)
    return runs


def load_groups(refs: Sequence[str], runs_root: str = RUNS_ROOT) -> dict[str, list[RunData]]:
    """``ads compare``'s arguments as groups, the first the baseline: ``NAME=RUN,RUN,...`` is one group, its runs
    paired with the other groups' by seed (the seeds their run.json records, else the order given); a plain RUN is
    a group of one (two with one folder name are told apart as run and run-2)."""
    groups: dict[str, list[RunData]] = {}
    for ref in refs:
        if _is_group(ref):
            name, _, members = ref.partition("=")
            folders = [m for m in members.split(",") if m]
            if not name or not folders:
                raise InputError(f"{ref}: a group is NAME=RUN,RUN,... (one run per seed)")
            runs = [load_run(m, name=f"{name}-{i}", runs_root=runs_root) for i, m in enumerate(folders)]
            seeds = [r.about.get("seed") for r in runs]
            if all(isinstance(s, int) for s in seeds) and len(set(seeds)) == len(seeds):
                runs.sort(key=lambda r: int(r.about["seed"]))
        else:
            runs = [load_run(ref, runs_root=runs_root)]
            name = runs[0].name
        base, i = name, 2
        while name in groups:
            name, i = f"{base}-{i}", i + 1
        if not _is_group(ref):
            runs[0].name = name
        groups[name] = runs
    return groups


def _is_group(ref: str) -> bool:
    return "=" in ref and not Path(ref).exists()


def first_reach(curve: Sequence[Point], target: float) -> Point | None:
    return next((p for p in curve if p.accuracy >= target - 1e-12), None)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _sd(values: Sequence[float]) -> float:  # ddof 0, as ads simulate
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def bootstrap_interval(
    values: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float] | None:
    """LEVEL percentile-bootstrap interval of the mean of VALUES (one per seed; ``metrics.mean_interval``, the one
    bootstrap); None for fewer than two."""
    return mean_interval(values, level, resamples) if len(values) >= 2 else None


def common_sets(runs: Sequence[RunData]) -> list[str]:
    """The sets every run evaluated, in the first run's order."""
    first = runs[0].sets
    return [s for s in first if all(s in r.sets for r in runs[1:])]


def summarize(groups: dict[str, list[RunData]], set_name: str = AVERAGE) -> list[dict[str, Any]]:
    """One row per group: final accuracy, and steps / prompts to the baseline's (first group's) final accuracy."""
    names = list(groups)
    base_runs = groups[names[0]]
    sets = common_sets([r for runs in groups.values() for r in runs])
    rows = []
    for name, runs in groups.items():
        step_ratios: list[float] = []
        prompt_ratios: list[float] = []
        time_ratios: list[float] = []
        steps_hit: list[int] = []
        finals: list[float] = []
        for i, run in enumerate(runs):
            base = base_runs[i] if len(base_runs) == len(runs) else base_runs[0]
            theirs_curve, mine_curve = base.curve(set_name, sets), run.curve(set_name, sets)
            if not theirs_curve or not mine_curve:
                raise InputError(f"{run.folder if not mine_curve else base.folder}: no evaluation of {set_name}")
            target = theirs_curve[-1].accuracy
            finals.append(mine_curve[-1].accuracy)
            theirs, mine = first_reach(theirs_curve, target), first_reach(mine_curve, target)
            assert theirs is not None  # the baseline reaches its own final accuracy at its last evaluation
            if mine is not None:
                steps_hit.append(mine.step)
            hit_step = mine.step if mine else run.total_steps
            hit_prompts = mine.prompts if mine else run.total_prompts
            hit_seconds = mine.seconds if mine else run.seconds_at(run.total_steps)
            if theirs.step == 0 or theirs.prompts == 0:  # the baseline ended no better than it started
                step_ratios.append(math.nan)
                prompt_ratios.append(math.nan)
                time_ratios.append(math.nan)
                continue
            step_ratios.append(hit_step / theirs.step)
            prompt_ratios.append(hit_prompts / theirs.prompts)
            time_ratios.append(hit_seconds / theirs.seconds if theirs.seconds > 0 and run.steps else math.nan)
        last = runs[0].curve(set_name, sets)[-1]
        informative = sum(int(s.get("informative_groups", 0)) for r in runs for s in r.steps)
        rolled = sum(r.total_prompts for r in runs)
        rows.append(
            {
                "name": name,
                "runs": len(runs),
                "final_mean": _mean(finals),
                "final_sd": _sd(finals),
                "ci_low": last.ci_low if len(runs) == 1 else None,
                "ci_high": last.ci_high if len(runs) == 1 else None,
                "target": _mean([b.curve(set_name, sets)[-1].accuracy for b in base_runs]),
                "reached": len(steps_hit),
                "steps_mean": _mean(steps_hit) if steps_hit else None,
                **_ratio_fields("step_ratio", step_ratios),
                **_ratio_fields("rollout_ratio", prompt_ratios),
                **_ratio_fields("time_ratio", time_ratios),
                "steps": _mean([r.total_steps for r in runs]),
                "prompts_rolled_out": rolled / len(runs),
                "prompts_per_step": rolled / max(1, sum(r.total_steps for r in runs)),
                "informative_share": informative / max(1, rolled) if any(r.steps for r in runs) else None,
                "seconds": sum(step_seconds(s) for r in runs for s in r.steps),
            }
        )
    return rows


def _ratio_fields(key: str, per_seed: list[float]) -> dict[str, Any]:
    """KEY (the mean over seeds), KEY_per_seed and KEY_interval; all None where the baseline had nothing to reach."""
    if any(math.isnan(v) for v in per_seed):
        return {key: None, f"{key}_per_seed": None, f"{key}_interval": None}
    interval = t_interval(per_seed) if len(per_seed) >= MIN_VERDICT_SEEDS else None  # fewer: none (see the module)
    return {key: _mean(per_seed), f"{key}_per_seed": per_seed, f"{key}_interval": interval}


def verdicts(groups: dict[str, list[RunData]], set_name: str) -> dict[str, dict[str, Any]]:
    """Each group against the baseline (the first): ``paired_verdict`` on the final accuracy of SET_NAME, seed i
    against seed i. Groups of different sizes are not paired: no verdict, said why."""
    names = list(groups)
    sets = common_sets([r for runs in groups.values() for r in runs])
    finals = {name: [r.curve(set_name, sets)[-1].accuracy for r in runs] for name, runs in groups.items()}
    base = names[0]
    out = {}
    for name in names[1:]:
        if len(finals[name]) != len(finals[base]):
            text = (
                f"no verdict: {name} has {len(finals[name])} run(s) and {base} {len(finals[base])}; a verdict "
                f"pairs one run per seed in each (at least {MIN_VERDICT_SEEDS} seeds)"
            )
            out[name] = {"winner": None, "n": 0, "text": text}
            continue
        diffs = [c - b for c, b in zip(finals[name], finals[base], strict=True)]
        out[name] = paired_verdict(name, base, diffs)
    return out


def ratio_text(row: dict[str, Any], key: str, interval: bool = False) -> str:
    """The ratio as the tables show it: ">=" where some seeds never reached the target, and with INTERVAL its
    bootstrap interval over seeds in brackets (a censored seed counts as its whole run, so a ">=" interval is a
    lower bound too)."""
    if row[key] is None:
        return "n/a"
    if row["reached"] == 0:
        return "not reached"
    bound = ">= " if row["reached"] < row["runs"] else ""
    span = row.get(f"{key}_interval") if interval else None
    return f"{bound}{row[key]:.2f}" + (f" [{span[0]:.2f}, {span[1]:.2f}]" if span else "")


def compare(groups: dict[str, list[RunData]]) -> dict[str, Any]:
    """What ``compare.json`` holds: each run's final records, and the reach rows of the average and every set."""
    runs = [r for group in groups.values() for r in group]
    sets = common_sets(runs)
    if not sets:
        raise InputError("the runs share no eval set: " + "; ".join(f"{r.name}: {', '.join(r.sets)}" for r in runs))
    finals = {}
    for run in runs:
        last: dict[str, dict[str, Any]] = {}
        for record in run.evals:
            if record["step"] >= last.get(record["set"], {"step": -1})["step"]:
                last[record["set"]] = record
        finals[run.name] = last
    notes = [note for run in runs for note in run.notes] + unfinished_notes(runs, finals)
    reach = {key: summarize(groups, key) for key in ([AVERAGE] if len(sets) > 1 else []) + sets}
    return {
        "baseline": next(iter(groups)),
        "sets": sets,
        "groups": {name: [r.name for r in group] for name, group in groups.items()},
        "runs": [
            {
                "name": r.name,
                "folder": os.path.abspath(r.folder),
                **{key: r.about.get(key) for key in ABOUT},
                "steps": r.total_steps,
                "prompts_rolled_out": r.total_prompts,
                "final": finals[r.name],
                "final_step": max((rec["step"] for rec in finals[r.name].values()), default=0),
            }
            for r in runs
        ],
        "headline": AVERAGE if len(sets) > 1 else sets[0],
        "reach": reach,
        "verdicts": verdicts(groups, AVERAGE if len(sets) > 1 else sets[0]),
        "notes": notes,
    }


def unfinished_notes(runs: Sequence[RunData], finals: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """A note for each run whose final figures come from an earlier step than another run's, or than its own
    last logged training step (an unfinished or killed run)."""
    last = {r.name: max((rec["step"] for rec in finals[r.name].values()), default=0) for r in runs}
    furthest = max(last.values(), default=0)
    notes = []
    for run in runs:
        trained = max((int(s["step"]) for s in run.steps), default=0)
        if last[run.name] < furthest or last[run.name] < trained:
            ahead = max(furthest, trained)
            notes.append(
                f"{run.name}: last evaluated at step {last[run.name]} (step {ahead} reached elsewhere): unfinished? "
                f"its final figures are those of step {last[run.name]}"
            )
    return notes
