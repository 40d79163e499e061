"""The study's runs (docs/study.md), usable in any process: the flow's, a worker of the local pool, a Dask worker.

* `prepare_study`: the task, the warmed-up policy, the held-out sets (one per family) and the step-0 shares;
* `build_config`: the real pipeline's settings (scored in float32: no timed dtype choice);
* `train_study_run`: one GRPO run (TRL) with validation, float32 on one torch and one BLAS thread, so that its
  numbers depend on the seeds only; a finished run is reused, an unfinished one trained again from the start.

The Prefect flow is ``ads_lab.flows.ads_study``; the analysis ``ads_lab.studies.study_analysis``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.config.build import BuildConfig
from ads_core.train.options import TrainConfig
from ads_lab import presets
from ads_lab.config.renamed import dump_as_before
from ads_lab.config.study import StudyConfig
from ads_lab.demo.runs import DATASET, fixed_threads, validated_run

RUN_MARKER = "study_run.json"
HELDOUT_PREFIX = "heldout-"  # one held-out eval set per family: heldout-max, heldout-min, ...
NLL_SUM_ARTIFACT = "nll_sum"  # the build with difficulty nll_sum (the product's default) instead of nll_mean


@dataclass(frozen=True)
class StudyPrepared:
    policy: str
    source: str
    heldout: dict[str, str]  # eval set name -> its Parquet file
    counts: dict[str, int]
    start: dict[str, Any] = field(default_factory=dict)  # ads_lab.studies.start.start_shares of the training set


def run_dir(cfg: StudyConfig, name: str, seed: int) -> Path:
    return Path(cfg.out) / "runs" / f"{safe(name)}-seed{seed}"


def safe(name: str) -> str:
    """A sampler name as a folder name (dots+rr -> dots-rr)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def prepare_study(cfg: StudyConfig) -> StudyPrepared:
    """Task, policy (reused when unchanged), held-out sets per family and the start regime (cached in
    OUT/start.json under the policy's key)."""
    from ads_lab.demo.policy import build_policy, policy_key
    from ads_lab.demo.task import make_task, write_heldout, write_source
    from ads_lab.studies.start import solve_counts, start_shares

    out = Path(cfg.out)
    task = make_task(cfg.task)
    with fixed_threads():
        policy = build_policy(out / "policy", cfg.policy, cfg.task, task.warmup)
    source = write_source(task.train, out / "task" / "train.jsonl")
    heldout = {}
    for family in cfg.task.families:
        name = HELDOUT_PREFIX + family
        heldout[name] = str(write_heldout([p for p in task.test if p.family == family], out, name))
    key = {
        "policy": policy_key(cfg.policy, cfg.task),
        "samples": cfg.start_samples,
        "tokens": cfg.max_completion_length,
        "temperature": cfg.temperature,
    }
    cache = out / "start.json"
    try:
        cached = json.loads(cache.read_text())
        start = cached["shares"] if cached.get("key") == key else None
    except (OSError, ValueError, KeyError):
        start = None
    if start is None:
        with fixed_threads():
            counts, boxed = solve_counts(
                policy, task.train, cfg.start_samples, cfg.max_completion_length, temperature=cfg.temperature
            )
        start = start_shares(task.train, counts, cfg.start_samples, boxed)
        start["per_problem"] = {"solved": counts, "boxed": boxed}  # in the training set's order (train.jsonl)
        tmp = cache.with_name(cache.name + ".tmp")
        tmp.write_text(json.dumps({"key": key, "shares": start}, indent=1))
        tmp.replace(cache)
    counts_of = {"train": len(task.train), "heldout": len(task.test), "warmup": len(task.warmup)}
    return StudyPrepared(str(policy), str(source), heldout, counts_of, start)


def build_config(cfg: StudyConfig, policy: str) -> BuildConfig:
    """The build of the task, scored by the warmed-up policy in float32 (difficulty = its NLL of the answer)."""
    return BuildConfig(
        format={"name": DATASET, "template": "plain"},
        score={"model": policy, "dtype": "float32", "difficulty": "nll_mean"},  # ADS as published
        cluster={"num_clusters": cfg.num_clusters},
        report={"decontaminate": False, "map_iterations": 250},
    )


def with_predictor(cfg: StudyConfig, sections: dict[str, dict[str, Any]], artifact: str, policy: str) -> dict:
    """SECTIONS with DOTS's predictor set where a `dots` section has none: trained once for the study's artifact
    (``ads_lab.studies.predictor``: source policies other than the trained one, the study's G and temperature)."""
    from ads_lab.studies.predictor import prepare_predictor

    out = json.loads(json.dumps(sections))
    needing = [s for s in out.values() if s.get("kind") == "dots" and not s.get("dots", {}).get("predictor")]
    if needing:
        with fixed_threads():
            folder = prepare_predictor(
                Path(cfg.out),
                cfg.task,
                cfg.policy,
                artifact,
                policy,
                cfg.num_generations,
                cfg.max_completion_length,
                cfg.temperature,
            )
        for section in needing:
            section.setdefault("dots", {})["predictor"] = str(folder.resolve())
    return out


def with_seed(section: dict[str, Any], seed: int) -> dict[str, Any]:
    """TrainConfig.sampler SECTION with its kind's seed set to SEED (the knobs stay as given)."""
    return presets.resolve(section, seed)


def train_config(
    cfg: StudyConfig, name: str, section: dict[str, Any], seed: int, policy: str, heldout: dict[str, str]
) -> TrainConfig:
    """One run, as ``ads train --trainer trl --eval-set ... --eval-steps N --eval-limit 0 --eval-k K``."""
    sampler = presets.resolve(section, seed, cfg.num_clusters)  # the preset's sampler section, without its extras
    folder = str(run_dir(cfg, name, seed))
    run = validated_run(cfg, folder, list(heldout.values()), sampler, seed, policy, **section.get(presets.TRAINER, {}))
    return run.replaced(**section[presets.TRAIN]) if section.get(presets.TRAIN) else run


def run_key(cfg: StudyConfig, name: str, section: dict[str, Any], seed: int, artifact: str) -> str:
    """What a run's result depends on: the settings that train it (not where runs go or how many run at once)."""
    settings = dump_as_before(
        cfg,
        mode="json",
        exclude={
            "out",
            "jobs",
            "dask",
            "dask_workers",
            "seeds",
            "samplers",
            "accuracy_target",
            "report",
            "enforce_gates",
        },
    )
    section = json.loads(json.dumps(section))
    if section.get("dots", {}).get("predictor"):  # the predictor by its folder's name, as the artifact: not by path
        section["dots"]["predictor"] = Path(section["dots"]["predictor"]).name
    blob = json.dumps(
        {"study": settings, "name": name, "sampler": section, "seed": seed, "artifact": Path(artifact).name},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def finished(cfg: StudyConfig, name: str, section: dict[str, Any], seed: int, artifact: str) -> bool:
    """The run trained all its steps with these settings and validated after the last one."""
    from ads_core.evaluation.evallog import EVAL_FILE, read_evals

    folder = run_dir(cfg, name, seed)
    try:
        done = json.loads((folder / RUN_MARKER).read_text()).get("key") == run_key(cfg, name, section, seed, artifact)
    except (OSError, ValueError):
        return False
    return done and any(r["step"] == cfg.steps for r in read_evals(folder / EVAL_FILE))


def train_study_run(
    cfg: StudyConfig, name: str, section: dict[str, Any], seed: int, artifact: str, policy: str, heldout: dict[str, str]
) -> str:
    """One GRPO run with validation; returns its folder. Reused when finished, else trained from the start."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    from ads_core.train.run import train

    folder = run_dir(cfg, name, seed)
    if finished(cfg, name, section, seed, artifact):
        return str(folder)
    shutil.rmtree(folder, ignore_errors=True)  # a killed run's partial steps: start again, for the same result
    import time

    wall, cpu = time.perf_counter(), time.process_time()
    with fixed_threads():
        train(artifact, train_config(cfg, name, section, seed, policy, heldout))
    cost = {"wall_seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}
    (folder / RUN_MARKER).write_text(json.dumps({"key": run_key(cfg, name, section, seed, artifact), **cost}))
    return str(folder)


def run_cost(cfg: StudyConfig, name: str, seed: int) -> dict[str, float]:
    """The wall and CPU seconds a finished run took when it was trained (for the budget; {} when unknown)."""
    try:
        marker = json.loads((run_dir(cfg, name, seed) / RUN_MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(marker[k]) for k in ("wall_seconds", "cpu_seconds") if k in marker}


def load_study_groups(cfg: StudyConfig) -> dict[str, list[Any]]:
    """The runs as ``ads compare`` groups them: uniform first, one run per seed in the seeds' order."""
    from ads_core.evaluation.compare import load_run

    return {
        name: [load_run(str(run_dir(cfg, name, seed)), name=f"{safe(name)}-seed{seed}") for seed in cfg.seeds]
        for name in cfg.samplers
    }


def write_study_results(cfg: StudyConfig, prepared: StudyPrepared, extra: dict[str, Any]) -> dict[str, Any]:
    """``ads compare``'s files, the window traces, results.md (one table with the paired intervals, the families,
    the start regime, the decision) and study.json, all in OUT; returns what study.json holds."""
    from ads_core.evaluation.compare_report import write_comparison
    from ads_lab.studies.start import shares_table
    from ads_lab.studies.study_analysis import analyse, family_table, results_table
    from ads_lab.studies.study_plots import write_window_traces

    out = Path(cfg.out) / cfg.report
    out.mkdir(parents=True, exist_ok=True)
    groups = load_study_groups(cfg)
    if cfg.design == "experiment2":
        from ads_lab.studies import experiment2_report

        return experiment2_report.write(cfg, groups, extra["artifacts"], extra["sections"], extra)
    comparison = write_comparison(groups, out)
    traces = write_window_traces(groups, out)
    analysis = analyse(groups, comparison["headline"])
    power = analysis["power"]
    lines = [
        f"# Study results: {', '.join(cfg.samplers)}; seeds {', '.join(map(str, cfg.seeds))}; {cfg.steps} steps",
        "",
        f"Primary metric: held-out mean@{cfg.eval_k} at step {cfg.steps} ({comparison['headline']}); "
        "paired by seed against uniform, percentile-bootstrap intervals over seeds.",
        "",
        results_table(analysis),
        "",
        f"Decision (docs/study.md's rule): {analysis['decision']}",
        "",
        "Viability gate (docs/study.md, amendment 1): uniform "
        + ("learned" if analysis["uniform_learns"] else "did NOT learn")
        + f" ({analysis['uniform_gain']})",
        "",
        "Final accuracy per held-out family (mean over seeds):",
        "",
        family_table(analysis),
        "",
        f"Start regime (step 0, {prepared.counts['train']} training problems, warmed-up policy):",
        "",
        shares_table(prepared.start) if prepared.start else "(not measured)",
        "",
        "Power: "
        + (
            f"sd of the primary paired difference {power['diff_sd']:.4f} (x{1.3} = {power['sd_with_margin']:.4f}); "
            f"seeds for +-0.02 at 97.5%: {power['seeds_needed']}. "
            if "diff_sd" in power
            else ""
        )
        + "Achieved half-widths: "
        + ", ".join(f"{k} {v:.3f}" for k, v in power["achieved_half_width"].items()),
        "",
        "Training reward is not compared across samplers: each trains on different problems.",
    ]
    text = "\n".join(lines) + "\n"
    result = {
        "config": cfg.model_dump(mode="json"),
        "counts": prepared.counts,
        "start": prepared.start,
        "analysis": {k: v for k, v in analysis.items() if k != "rows"}
        | {"rows": [{k: v for k, v in r.items() if k != "reach"} | {"reach": r["reach"]} for r in analysis["rows"]]},
        "paths": comparison["paths"] | {"window_traces": traces, "results": str(out / "results.md")},
        **extra,
    }
    for name, content in (("results.md", text), ("study.json", json.dumps(result, indent=1, default=str))):
        tmp = out / f"{name}.tmp"
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(out / name)
    return result | {"markdown": text}
