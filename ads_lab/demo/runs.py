"""The demo's pieces, each reusable from what an earlier (or killed) demo left in OUT/demo/:

* `prepare`: the task's sets, the warmed-up policy and the held-out eval set;
* `build_config`: the real pipeline's settings for the task (the ``ads-build`` flow or ``build()`` runs them);
* `train_run`: one GRPO run (TRL, ``ads_core.train.run.train`` as ``ads train`` runs it) with validation on the
  held-out set during training, in a worker process of `workers` (one thread each; they die with this process);
* `load_groups`: the runs as ``ads compare`` groups them (uniform, the baseline, then ADS; one run per seed).

A finished run (its final policy and its last validation record are there) is reused; an unfinished one is
removed and trained again from the start, so a killed demo run again gives the same result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ads_core.common import progress
from ads_core.common.gc_tuning import freeze_what_is_loaded, tune_gc_for_batch_work
from ads_core.config.build import BuildConfig
from ads_core.train.options import TrainConfig
from ads_lab.config.demo import DemoConfig
from ads_lab.config.renamed import dump_as_before

HELDOUT = "heldout"  # the held-out set's name in each run's eval.jsonl
BASELINE = "uniform"
CANDIDATE = "ads"
DEMO_DIR = "demo"
DATASET = "arith"
RUN_MARKER = "demo_run.json"  # written when a run finished: the settings it ran with


@dataclass(frozen=True)
class DemoPaths:
    """Where everything goes: OUT/demo/{task, policy, build, heldout, runs} and the comparison files."""

    root: Path

    @classmethod
    def of(cls, cfg: DemoConfig) -> DemoPaths:
        return cls(Path(cfg.out) / DEMO_DIR)

    @property
    def policy(self) -> Path:
        return self.root / "policy"

    @property
    def source(self) -> Path:
        return self.root / "task" / "train.jsonl"

    @property
    def build(self) -> Path:
        return self.root / "build"

    def run(self, sampler: str, seed: int) -> Path:
        return self.root / "runs" / f"{sampler}-seed{seed}"


@dataclass(frozen=True)
class Prepared:
    policy: str
    source: str
    heldout: str
    counts: dict[str, int]


def prepare(cfg: DemoConfig) -> Prepared:
    """The task's sets, the warmed-up policy (reused when its settings did not change) and the held-out eval set."""
    from ads_lab.demo.policy import build_policy
    from ads_lab.demo.task import make_task, write_heldout, write_source

    paths = DemoPaths.of(cfg)
    task = make_task(cfg.task)
    progress.phase("demo: preparing the policy (built once, then reused)")
    with fixed_threads():
        policy = build_policy(paths.policy, cfg.policy, cfg.task, task.warmup)
    source = write_source(task.train, paths.source)
    heldout = write_heldout(task.test, paths.root, HELDOUT)
    counts = {"train": len(task.train), "heldout": len(task.test), "warmup": len(task.warmup)}
    return Prepared(str(policy), str(source), str(heldout), counts)


@contextmanager
def fixed_threads() -> Iterator[None]:
    """Torch and BLAS on one thread: the numbers then depend on the seeds, not on the machine's core count (a
    reduction split over threads rounds differently), and at the tiny policy's sizes a second thread costs more
    CPU than it saves time."""
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)


def build_config(cfg: DemoConfig, policy: str) -> BuildConfig:
    """The build of the task: scored by the warmed-up policy in float32 (never a dtype chosen by timing this
    machine), difficulty the seed's token-mean NLL of the reference answer (ADS as published, as the study ran it)."""
    return BuildConfig(
        format={"name": DATASET, "template": "plain"},
        score={"model": policy, "dtype": "float32", "difficulty": "nll_mean"},
        cluster={"num_clusters": cfg.num_clusters},
        report={"decontaminate": False, "map_iterations": 250},
    )


def sampler_section(cfg: DemoConfig, sampler: str, seed: int) -> dict[str, Any]:
    """TrainConfig.sampler for SAMPLER (ads or uniform) with its seed set; the knobs stay the defaults."""
    if sampler == CANDIDATE:
        return {"kind": "ads", "ads": {"seed": seed, "window": cfg.window}}
    return {"kind": sampler, sampler: {"seed": seed}}


def train_config(cfg: DemoConfig, sampler: str, seed: int, policy: str, heldout: str) -> TrainConfig:
    """One run, as ``ads train --trainer trl --eval-set HELDOUT --eval-steps N --eval-limit 0 --eval-k K``."""
    run_dir = DemoPaths.of(cfg).run(sampler, seed)
    return validated_run(cfg, str(run_dir), [heldout], sampler_section(cfg, sampler, seed), seed, policy)


def validated_run(
    cfg: Any, run_dir: str, eval_sets: list[str], sampler: dict[str, Any], seed: int, policy: str, **trl: Any
) -> TrainConfig:
    """A GRPO run of the demo or the study (CFG: a `DemoConfig` or a `StudyConfig`, which share these settings):
    TRL from POLICY, validated on EVAL_SETS every `eval_every` steps, one checkpoint at the end; the keyword
    arguments are added to `TrainConfig.trl` (DOTS+RR's `replay`)."""
    return TrainConfig(
        trainer="trl",
        model=policy,
        steps=cfg.steps,
        run_dir=run_dir,
        eval_sets=eval_sets,
        validation={"steps": cfg.eval_every, "limit": 0, "k": cfg.eval_k},
        decontaminate="off",
        sampler=sampler,
        trl={
            "num_generations": cfg.num_generations,
            "max_completion_length": cfg.max_completion_length,
            "learning_rate": cfg.learning_rate,
            "temperature": cfg.temperature,
            "seed": seed,
            "save_steps": cfg.steps,
            "keep_checkpoints": 1,
            **trl,
        },
    )


def run_key(cfg: DemoConfig, sampler: str, seed: int) -> str:
    """What a run's result depends on: every setting but where it writes and how many run at a time."""
    settings = dump_as_before(cfg, mode="json", exclude={"out", "jobs", "seeds", "smoke"})
    blob = json.dumps({"demo": settings, "sampler": sampler, "seed": seed}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def finished(cfg: DemoConfig, sampler: str, seed: int) -> bool:
    """The run trained all its steps with these settings and validated after the last one."""
    from ads_core.evaluation.evallog import EVAL_FILE, read_evals

    run_dir = DemoPaths.of(cfg).run(sampler, seed)
    try:
        done = json.loads((run_dir / RUN_MARKER).read_text()).get("key") == run_key(cfg, sampler, seed)
    except (OSError, ValueError):
        return False
    return done and any(r["step"] == cfg.steps for r in read_evals(run_dir / EVAL_FILE))


def train_run(cfg: DemoConfig, sampler: str, seed: int, artifact: str, policy: str, heldout: str) -> str:
    """One GRPO run with validation; returns its folder. Reused when finished, else trained from the start."""
    from ads_core.train.run import train

    run_dir = DemoPaths.of(cfg).run(sampler, seed)
    if finished(cfg, sampler, seed):
        return str(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)  # a killed run's partial steps: start again, for the same result
    progress.say(f"demo: training {sampler} seed {seed} ({cfg.steps} steps)")
    with fixed_threads():  # also in this process (jobs 0) and whatever process calls it
        train(
            artifact,
            train_config(cfg, sampler, seed, policy, heldout),
            on_step=progress.StepLines(cfg.steps, run_dir.name),
        )
    progress.say(f"demo: {sampler} seed {seed} finished: {run_dir}")
    (run_dir / RUN_MARKER).write_text(json.dumps({"key": run_key(cfg, sampler, seed)}))
    return str(run_dir)


def _worker_init() -> None:
    """A worker process: one torch and one BLAS thread (numbers that depend on the seeds only; also the fastest
    per core at these sizes), the `ads` commands' garbage-collector threshold and the trainer's modules imported
    and frozen, and it dies with its parent (Linux), so a killed demo leaves no runs going."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    tune_gc_for_batch_work()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(limits=1)  # for the life of the worker
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    with contextlib.suppress(ImportError):  # without the train extra, each run says what is missing itself
        import ads_core.train.trl.trainer  # noqa: F401  (what every run imports: TRL, transformers' trainer)
    freeze_what_is_loaded()  # each run's full collections skip those modules


def _ready() -> None:
    """A no-op: submitted once per worker so that every worker starts now, from the calling thread."""


@contextmanager
def workers(jobs: int) -> Iterator[ProcessPoolExecutor | None]:
    """JOBS worker processes (spawned, one thread each) that `train_run` calls are sent to; None for 0 jobs.

    They are all started here, from the calling thread: a worker dies with the thread that started it (Linux's
    parent-death signal), and the threads that send it work come and go. On an error or Ctrl-C the pool is left
    without waiting for the runs in flight; the caller's process ending takes the workers with it."""
    if jobs <= 0:
        yield None
        return
    import multiprocessing

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init)
    try:
        for started in [pool.submit(_ready) for _ in range(jobs)]:
            started.result()
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def load_groups(cfg: DemoConfig) -> dict[str, list[Any]]:
    """The runs as ``ads compare`` groups them: uniform (the baseline) first, then ADS, one run per seed each."""
    from ads_core.evaluation.compare import load_run

    paths = DemoPaths.of(cfg)
    return {
        name: [load_run(str(paths.run(name, seed)), name=f"{name}-seed{seed}") for seed in range(cfg.seeds)]
        for name in (BASELINE, CANDIDATE)
    }
