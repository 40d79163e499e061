"""The `ads-demo` flow: `ads demo` from start to end, so that with PREFECT_API_URL set the whole demo shows in the
UI (the build as its own `ads-build` subflow run, one task per training run, the comparison as an artifact).

1. `demo-prepare`: the synthetic task, the warmed-up policy, the held-out eval set (``ads_core.demo``).
2. `ads-build` (subflow): the real pipeline on the task (format, score with the policy, cluster, sort); cached.
3. `train-<sampler>-seed<n>`: ADS and uniform from the same policy with the same seeds and steps, `jobs` at a
   time in worker processes (one thread each), validated on the held-out set as they train (eval.jsonl).
4. `demo-compare`: ``ads compare``'s tables and plot in OUT/demo/, and the lines `ads demo` prints.

Everything is reused on a rerun: the policy, the build's stages and every finished run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from ads_core.common.progress import phase
from ads_core.config.demo import DemoConfig
from ads_core.demo import runs
from ads_prefect.flows.ads_build import ads_build
from ads_prefect.flows.setup import flow, prepare_process
from ads_prefect.tasks import demo as td


def demo_run_name() -> str:
    return f"demo-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


@flow(
    name="ads-demo",
    flow_run_name=demo_run_name,
    validate_parameters=True,
    task_runner=ThreadPoolTaskRunner(max_workers=64),  # the runs' tasks wait on the worker processes
)
def ads_demo(demo: DemoConfig = DemoConfig()) -> dict[str, Any]:
    """Build a synthetic task with the real pipeline, train ADS and uniform from the same start, compare them.

    Args:
        demo: `ads_core.config.demo.DemoConfig` (sizes, seeds, steps, where it writes).
    """
    prepare_process()
    cfg = demo.effective()
    paths = runs.DemoPaths.of(cfg)
    phase("demo: the task and the warmed-up policy", announce=False)
    prepared = td.prepare_demo(cfg)
    build_cfg = runs.build_config(cfg, prepared.policy)
    sections = {name: getattr(build_cfg, name) for name in build_cfg.model_fields}
    phase("demo: building the task", announce=False)
    with runs.fixed_threads():  # the build's numbers (NLL, embeddings, K-Means) do not depend on the core count
        built = ads_build(source=prepared.source, dataset=runs.DATASET, out=str(paths.build), **sections)
    artifact = built["final_uri"]
    pairs = [(sampler, seed) for seed in range(cfg.seeds) for sampler in (runs.BASELINE, runs.CANDIDATE)]
    todo = sum(not runs.finished(cfg, sampler, seed) for sampler, seed in pairs)  # no workers for a full rerun
    phase(f"demo: training {todo} of {len(pairs)} runs, {min(cfg.jobs, todo)} at a time", announce=False)
    with runs.workers(min(cfg.jobs, todo)) as pool:
        td.set_pool(pool)
        try:
            futures = [td.train_demo_run.submit(cfg, sampler, seed, artifact, prepared) for sampler, seed in pairs]
            folders = [f.result() for f in futures]
        finally:
            td.set_pool(None)
    phase("demo: comparing the runs", announce=False)
    result = td.compare_demo(cfg)
    return {
        "out": str(paths.root),
        "artifact": artifact,
        "build_stages": built["stages"],
        "runs": folders,
        "markdown": result["markdown"],
        "lines": result["lines"],
        "paths": result["paths"],
        "flow_run": {"id": _run_id(), "name": _run_name()},
    }


def _run_id() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.id)


def _run_name() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.name)
