"""The `ads-study` flow (docs/study.md, `bench/study.py`): every (sampler, seed) run of the study as its own task.

1. `study-prepare`: the task, the warmed-up policy, the held-out sets per family, the step-0 regime.
2. `ads-build` (subflow): the real pipeline on the task (scored in float32); cached.
   `study-predictor`: DOTS's predictor for that artifact when a `dots` sampler runs (reused when done).
3. `train-<sampler>-seed<n>`: each run, `jobs` at a time in local one-thread worker processes, or spread over a
   Dask cluster (`dask`: local, or a scheduler address) as the build spreads its score shards, so that more
   machines run more seeds. Finished runs are reused: a killed study run again resumes where it was.
4. `study-results`: ``ads compare``'s tables and plot, the window traces, results.md and study.json.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from ads_core.config.study import StudyConfig
from ads_core.demo import runs, study
from ads_prefect.flows.ads_build import ads_build
from ads_prefect.flows.setup import flow, prepare_process
from ads_prefect.tasks import study as ts


def study_run_name() -> str:
    return f"study-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


@flow(name="ads-study", flow_run_name=study_run_name, validate_parameters=True, task_runner=ThreadPoolTaskRunner(64))
def ads_study(study_cfg: StudyConfig, sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Train every sampler in SECTIONS (name -> TrainConfig.sampler) on every seed, then analyse in pairs.

    Args:
        study_cfg: `ads_core.config.study.StudyConfig`.
        sections: the samplers by name, each as its `TrainConfig.sampler` section (seeds are set per run), with
            an optional `trl` entry of `TrainConfig.trl` additions (DOTS+RR's `replay`).
    """
    prepare_process()
    cfg = study_cfg
    started = time.perf_counter()
    prepared = ts.prepare_study(cfg)
    build_cfg = study.build_config(cfg, prepared.policy)
    parts = {name: getattr(build_cfg, name) for name in build_cfg.model_fields}
    with runs.fixed_threads():  # the build's numbers do not depend on the machine's core count
        built = ads_build(source=prepared.source, dataset=runs.DATASET, out=str(Path(cfg.out) / "build"), **parts)
    artifacts = {"build": built["final_uri"]}
    pairs = [(name, seed) for seed in cfg.seeds for name in cfg.samplers]
    args = {name: sections[name] for name in cfg.samplers}
    if any(section.get("kind") == "dots" for section in args.values()):
        args = ts.with_predictor(cfg, args, artifacts["build"], prepared.policy)
    wanted = {section.get(study.ARTIFACT_EXTRA) for section in args.values()}
    if "oracle" in wanted:
        artifacts["oracle"] = ts.oracle_artifact(cfg, artifacts["build"])
    if study.NLL_SUM_ARTIFACT in wanted:  # the same build ranked by the summed NLL (the product's default)
        parts["score"] = parts["score"].replaced(difficulty="nll_sum")
        with runs.fixed_threads():
            other = ads_build(
                source=prepared.source, dataset=runs.DATASET, out=str(Path(cfg.out) / "build-nll_sum"), **parts
            )
        artifacts[study.NLL_SUM_ARTIFACT] = other["final_uri"]
    checked = ts.check_gates(cfg, prepared, artifacts["build"]) if cfg.design == "experiment2" else None
    if checked is not None and not checked["passed"] and cfg.enforce_gates:  # a failed gate voids the runs
        return {"result": {"gates": checked, "trained": False}, "flow_run": {"id": _run_id(), "name": _run_name()}}

    def artifact_of(name: str) -> str:
        return artifacts[args[name].get(study.ARTIFACT_EXTRA, "build")]

    def params(name: str, seed: int) -> dict[str, Any]:
        return {
            "cfg": cfg,
            "name": name,
            "section": args[name],
            "seed": seed,
            "artifact": artifact_of(name),
            "policy": prepared.policy,
            "heldout": prepared.heldout,
        }

    todo = [p for p in pairs if not study.finished(cfg, p[0], args[p[0]], p[1], artifact_of(p[0]))]
    say = _progress(len(pairs), len(pairs) - len(todo), started)
    if cfg.dask and todo:
        from ads_prefect.runtime.dask import api_pinned, check_scheduler, prepare_workers, shard_runner

        check_scheduler(cfg.dask)
        with api_pinned(), shard_runner(cfg.dask, cfg.dask_workers or cfg.jobs, len(todo)) as runner:
            prepare_workers(runner, cfg.dask)
            futures = {runner.submit(ts.train_study_run, parameters=params(*p)): p for p in todo}
            for future in as_completed(list(futures)):
                say(*futures[future], future.result())
    elif todo:
        with runs.workers(min(cfg.jobs, len(todo))) as pool:
            ts.set_pool(pool)
            try:
                futures = {ts.train_study_run.submit(**params(*p)): p for p in todo}
                for future in as_completed(list(futures)):
                    say(*futures[future], future.result())
            finally:
                ts.set_pool(None)
    cost = {f"{study.safe(n)}-seed{s}": study.run_cost(cfg, n, s) for n, s in pairs}
    extra = {"artifact": artifacts["build"], "artifacts": artifacts, "run_cost": cost, "sections": args}
    if checked is not None:
        extra["gates"] = checked
    extra["wall_seconds"] = time.perf_counter() - started
    result = ts.write_results(cfg, prepared, extra)
    return {"result": result, "flow_run": {"id": _run_id(), "name": _run_name()}}


def _progress(total: int, reused: int, started: float) -> Callable[[str, int, str], None]:
    """A line per finished run: how many are done, the run's held-out curve ends, and the time so far."""
    done = [reused]
    if reused:
        print(f"[{reused}/{total}] runs finished earlier, reused", flush=True)

    def say(name: str, seed: int, folder: str) -> None:
        from ads_core.evaluation.compare import AVERAGE, load_run

        done[0] += 1
        run = load_run(folder, name=f"{name}-seed{seed}")
        sets = run.sets
        key = AVERAGE if len(sets) > 1 else sets[0]
        first, last = run.curve(key)[0], run.curve(key)[-1]
        elapsed = time.perf_counter() - started
        print(
            f"[{done[0]}/{total}] {name} seed {seed}: held-out {first.accuracy:.3f} -> {last.accuracy:.3f} "
            f"after {last.step} steps ({elapsed:.0f} s so far)",
            flush=True,
        )

    return say


def _run_id() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.id)


def _run_name() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.name)
