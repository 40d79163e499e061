"""Prefect tasks of the `ads-study` flow: prepare the task, train one (sampler, seed) run, and write the results.

A run goes to the flow's local worker pool (``ads_lab.flows.workers``) when there is one, and otherwise runs where
the task runs: in the flow's process, or on a Dask worker when the flow submits it to a Dask task runner
(`StudyConfig.dask`)."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ads_lab.config.study import StudyConfig
from ads_lab.flows import workers
from ads_lab.studies import study


@task(name="study-prepare", cache_policy=NO_CACHE, retries=0)
def prepare_study(cfg: StudyConfig) -> study.StudyPrepared:
    """The task's sets, the warmed-up policy (reused when unchanged), the held-out sets and the start regime."""
    prepared = study.prepare_study(cfg)
    get_run_logger().info("task: %s; policy %s; start %s", prepared.counts, prepared.policy, prepared.start.get("all"))
    return prepared


@task(name="study-predictor", cache_policy=NO_CACHE, retries=0)
def with_predictor(
    cfg: StudyConfig, sections: dict[str, dict[str, Any]], artifact: str, policy: str
) -> dict[str, dict[str, Any]]:
    """DOTS's predictor, trained once for the study's artifact (reused when done), set in every `dots` section."""
    return study.with_predictor(cfg, sections, artifact, policy)


@task(name="study-oracle", cache_policy=NO_CACHE, retries=0)
def oracle_artifact(cfg: StudyConfig, artifact: str) -> str:
    """The build's artifact with clusters = the true families and rank = the true level (Experiment 2's positive
    control); rewritten only when the build's artifact changed."""
    from ads_lab.studies.experiment2 import write_oracle_artifact

    return write_oracle_artifact(artifact, cfg.out)


@task(name="study-gates", cache_policy=NO_CACHE, retries=0)
def check_gates(cfg: StudyConfig, prepared: study.StudyPrepared, artifact: str) -> dict[str, Any]:
    """Experiment 2's gates, measured before any GRPO run (a failed one voids the runs)."""
    from ads_lab.demo.task import make_task
    from ads_lab.studies.experiment2 import gates

    checked = gates(cfg, prepared.start, artifact, make_task(cfg.task).train)
    for g in checked["gates"]:
        get_run_logger().info("gate %s: %s (%s)", g["gate"], "passed" if g["passed"] else "FAILED", g["measured"])
    return checked


@task(name="study-train", task_run_name="train-{name}-seed{seed}", cache_policy=NO_CACHE, retries=0)
def train_study_run(
    cfg: StudyConfig, name: str, section: dict[str, Any], seed: int, artifact: str, policy: str, heldout: dict[str, str]
) -> str:
    """One GRPO run with validation; reused when already finished."""
    args = (cfg, name, section, seed, artifact, policy, heldout)
    if study.finished(cfg, name, section, seed, artifact):  # reused: no worker process needed
        return study.train_study_run(*args)
    return workers.in_worker(study.train_study_run, *args)


@task(name="study-results", cache_policy=NO_CACHE, retries=0)
def write_results(cfg: StudyConfig, prepared: study.StudyPrepared, extra: dict[str, Any]) -> dict[str, Any]:
    """compare.*, window traces, results.md and study.json in OUT."""
    return study.write_study_results(cfg, prepared, extra)
