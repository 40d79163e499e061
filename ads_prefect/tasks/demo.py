"""Prefect tasks of the `ads-demo` flow: prepare the task and policy, train one run in a worker process (its
validation curve published as an artifact), compare the runs (tables and plot published)."""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from ads_core.config.demo import DemoConfig
from ads_core.demo import runs
from ads_prefect.runtime.interrupts import run_interruptible
from ads_prefect.tasks.artifact_keys import artifact_key
from ads_prefect.tasks.publish import image_markdown

_pool: ProcessPoolExecutor | None = None  # the flow's worker processes, set for the duration of its training


def set_pool(pool: ProcessPoolExecutor | None) -> None:
    global _pool
    _pool = pool


@task(name="demo-prepare", cache_policy=NO_CACHE, retries=0)
def prepare_demo(cfg: DemoConfig) -> runs.Prepared:
    """The task's sets, the warmed-up policy (reused when unchanged) and the held-out eval set."""
    prepared = runs.prepare(cfg)
    get_run_logger().info("task: %s; policy %s", prepared.counts, prepared.policy)
    return prepared


@task(name="demo-train", task_run_name="train-{sampler}-seed{seed}", cache_policy=NO_CACHE, retries=0)
def train_demo_run(cfg: DemoConfig, sampler: str, seed: int, artifact: str, prepared: runs.Prepared) -> str:
    """One GRPO run with validation on the held-out set, in a worker process; reused when already finished."""
    args = (cfg, sampler, seed, artifact, prepared.policy, prepared.heldout)
    if runs.finished(cfg, sampler, seed):  # reused: no worker process started
        folder = str(runs.DemoPaths.of(cfg).run(sampler, seed))
        get_run_logger().info("%s seed %d: finished earlier, reused (%s)", sampler, seed, folder)
    else:
        try:
            if _pool is not None:  # in a worker process, whose SIGINT is told as such (runtime.interrupts)
                folder = _pool.submit(run_interruptible, runs.train_run, *args).result()
            else:
                folder = runs.train_run(*args)
        except KeyboardInterrupt:  # its worker process got SIGINT: the demo stops, saying what it stopped
            raise stopped_in_worker(sampler, seed) from None
    from ads_core.evaluation.compare_report import validation_report

    report = validation_report(folder)
    if report is not None:
        text, png = report
        create_markdown_artifact(
            key=artifact_key("demo", f"{sampler}-seed{seed}"),
            markdown=f"# {sampler} seed {seed}: validation\n\n{text}\n{image_markdown(png, 'held-out accuracy')}",
            description=f"held-out accuracy of the demo's {sampler} run, seed {seed}",
        )
    return folder


class DemoInterrupted(Exception):
    """A training run of the demo was interrupted in its worker process; the demo stops."""


def stopped_in_worker(sampler: str, seed: int) -> DemoInterrupted:
    """Say which run a SIGINT stopped in its worker and stop the whole demo as Ctrl-C does (exit 130, finished runs
    kept), instead of moving on to the next runs with one missing."""
    from ads_prefect.runtime.runner import interrupt_this_process

    sys.stderr.write(
        f"interrupted: the {sampler} run, seed {seed}, stopped in its worker process (SIGINT); stopping the demo "
        "(finished runs are kept)\n"
    )
    sys.stderr.flush()
    interrupt_this_process()
    return DemoInterrupted(f"{sampler} seed {seed}: interrupted in its worker process")


@task(name="demo-compare", cache_policy=NO_CACHE, retries=0)
def compare_demo(cfg: DemoConfig) -> dict[str, Any]:
    """``ads compare``'s comparison of the runs, written to OUT/demo/ and published with its plot; the printed
    summary lines are added to the result."""
    from ads_core.demo.report import summary_lines

    groups = runs.load_groups(cfg)
    from ads_core.evaluation.compare_report import write_comparison

    result = write_comparison(groups, runs.DemoPaths.of(cfg).root)
    lines = summary_lines(result, groups, cfg.steps)
    png = Path(result["paths"]["plot"]).read_bytes()
    body = "\n".join(["```", *lines, "```"])
    create_markdown_artifact(
        key=artifact_key("demo", "compare"),
        markdown=f"# ADS vs uniform\n\n{body}\n\n{result['markdown']}\n{image_markdown(png, 'accuracy')}",
        description="the demo's runs compared (ads compare): accuracy against steps and against rollouts",
    )
    return {**result, "lines": lines}
