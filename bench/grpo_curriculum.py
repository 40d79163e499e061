"""Real GRPO on a CPU with each sampler in TRL's loop: held-out accuracy against steps, and the steps each sampler
needs to reach uniform's final held-out accuracy (issue 18 item 7, issue 19).

What runs. A synthetic arithmetic task (``ads_lab/demo/task.py``, the one ``ads demo`` runs at smaller sizes:
families max, min and sum of 2 to 5 one-digit
numbers as the semantic groups, the operand count as the latent difficulty; train, held-out test and warm-up
sets drawn from seeds, no question in two of them). A small Qwen2-architecture policy (0.75M parameters) is
built locally and warmed up with 300 supervised steps, which leave it answering in the rewarded ``\\boxed{}``
form a third of the time, min mostly right, max sometimes, sum rarely. The training artifact is built by the real
pipeline (``ads_core.pipeline.build.build``: format, score = embeddings + NLL under the warmed-up policy,
K-Means, sort), so clusters and difficulties come from the real stages. Then, per seed and sampler,
``ads_core.train.run.train`` trains GRPO with TRL exactly as ``ads train --trainer trl`` does (the project's
``ADSGRPOTrainer``, its sampler feedback, the math reward) and validates on the held-out set as ``ads train
--eval-set PATH --eval-steps N --eval-k 2 --eval-limit 0`` does: ``ads eval``'s code (``evaluate_policy``, the
project's grader, ``ads eval``'s temperature and top-p), 2 completions per problem, mean@2, at step 0 and every
``--eval-every`` steps, into each run's ``eval.jsonl``. Samplers are named by ``ads_lab.presets`` (the one table
the studies and ``ads simulate`` use too; any preset that trains on the build's artifact runs here), by default:
``uniform``; ``ads`` (the reference window);
``ads-frontier`` (``window="frontier"``); ``dots`` (DOTS: the trained difficulty predictor with reference rollouts
every mu steps), ``dots+rr`` (the same with rollout replay, ``--replay``) and ``dots-lite`` (DOTS's selection rule
alone); ``dynamic`` (DAPO-style dynamic sampling: groups
whose rewards all agree are dropped and more generation batches are rolled out in the same step, so its
rollouts are counted too); ``ads-skip`` and ``ads-frontier-skip`` (either window with pre-rollout skipping,
``skip=True``: rows whose recent groups all agreed are skipped before rollout). Every sampler keeps its preset's
knobs (the ADS ones drop all-wrong groups from the gradient batch, as published); a seed sets the sampler's and
TRL's seeds. DOTS's predictor is trained once (``ads dots-train``'s code) on
labels from three source policies that are not the trained one: the tiny policy warmed up for a third and two
thirds of the warm-up (seeds 1 and 2), and one held out (half the warm-up, seed 3) on which its rho is printed.

Reported with ``ads compare``'s code (``ads_core.evaluation.compare``; printed, and written to OUT/compare.md,
OUT/compare.json and the plot OUT/compare.png, plus OUT/grpo_curriculum.json): held-out accuracy mean +- sd over
seeds at the evaluations; per sampler the final accuracy and the steps to reach uniform's final accuracy of the
same seed, as a share of uniform's own steps to it (``ads simulate``'s rule: the first evaluation at or above the
target; a seed that never gets there counts as the whole run, shown as ">="; "not reached" when no seed does),
and the same in prompts rolled out and in training wall time (``step_seconds``: rollouts, reference rollouts,
updates). The closing lines give ads-frontier's ratio and, for dots, dots+rr and dots-lite, steps and wall time to
uniform's final accuracy with their intervals over seeds. Each run is also a folder that
``ads compare OUT/runs/uniform-seed0 OUT/runs/ads-frontier-seed0`` reads.

Run: ``.venv/bin/python bench/grpo_curriculum.py [--seeds 0,1,2] [--steps 60] [--samplers ...] [--out DIR]
[--jobs 2]``; ``--smoke`` (or ``--quick``) is a smoke run (tiny sizes, 1 seed, 4 steps). Runs go ``--jobs`` at a
time, each in a process with one thread. A rerun reuses the policy, the artifact and every finished run in OUT
(a finished run has nothing left to train); an unfinished run starts again from the start (it checkpoints its
last step only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ads_lab import presets
from ads_lab.config.demo import DemoPolicyConfig, DemoTaskConfig
from ads_lab.demo.policy import build_policy
from ads_lab.demo.task import make_task, write_heldout, write_source

BASELINE = "uniform"
HEADLINE = "ads-frontier"
HELDOUT = "heldout"  # the held-out set's name in each run's eval.jsonl
# the bench's samplers by default, presets of ads_lab.presets (every preset on the build's artifact can run)
SAMPLERS = (
    "uniform",
    "ads",
    "ads-frontier",
    "dots",
    "dots+rr",
    "dots-lite",
    "dynamic",
    "ads-skip",
    "ads-frontier-skip",
)
RUNNABLE = tuple(name for name, found in presets.PRESETS.items() if presets.ARTIFACT not in found)
DOTS_CLOSING = ("dots", "dots+rr", "dots-lite")


@dataclass
class BenchConfig:
    out: Path = Path("bench-out/grpo_curriculum")
    seeds: tuple[int, ...] = (0, 1, 2)
    samplers: tuple[str, ...] = tuple(SAMPLERS)
    steps: int = 60
    eval_every: int = 5
    num_clusters: int = 8  # K, as the build names it (cluster.num_clusters)
    num_generations: int = 4
    max_completion_length: int = 12
    learning_rate: float = 3e-4
    jobs: int = 2  # runs at a time, each in its own process with one thread
    eval_samples: int = 2  # completions per held-out problem (validation.k)
    # The benchmark's sizes (larger than `ads demo`'s): 720 training rows, 300 held-out problems, 300 warm-up steps.
    task: DemoTaskConfig = field(
        default_factory=lambda: DemoTaskConfig(
            families=("max", "min", "sum"), train_per_cell=60, test_per_cell=25, warmup_per_cell=300
        )
    )
    policy: DemoPolicyConfig = field(default_factory=lambda: DemoPolicyConfig(warmup_steps=300, boxed_share=0.3))

    def quick(self) -> BenchConfig:
        """Smoke-run sizes: everything runs, nothing is measured."""
        return replace(
            self,
            seeds=self.seeds[:1],
            steps=4,
            eval_every=2,
            num_clusters=4,
            task=self.task.replaced(train_per_cell=4, test_per_cell=2, warmup_per_cell=4),
            policy=self.policy.replaced(warmup_steps=4, warmup_batch=8),
        )


def config_of(cfg: BenchConfig) -> dict[str, Any]:
    """The settings as grpo_curriculum.json records them (the task and policy sections as their fields)."""
    out: dict[str, Any] = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    return out | {"task": cfg.task.model_dump(mode="json"), "policy": cfg.policy.model_dump(mode="json")}


def prepare_predictor(cfg: BenchConfig, artifact: Path, embed_model: Path, log: Any = print) -> Path:
    """DOTS's predictor for the artifact, from source policies other than the trained one (reused when done)."""
    from ads_lab.studies.predictor import prepare_predictor as prepare

    return prepare(
        cfg.out,
        cfg.task,
        cfg.policy,
        str(artifact),
        str(embed_model),
        cfg.num_generations,
        cfg.max_completion_length,
        log=log,
    )


def prepare(cfg: BenchConfig, log: Any = print) -> tuple[Path, Path, Path]:
    """Held-out eval set, warmed-up policy and the built artifact (each reused from OUT when it is already there)."""
    from ads_core.config.build import BuildConfig
    from ads_core.pipeline.build import build

    task = make_task(cfg.task)
    log(f"task: {len(task.train)} train, {len(task.test)} held-out, {len(task.warmup)} warm-up problems")
    t0 = time.perf_counter()
    policy = build_policy(cfg.out / "policy", cfg.policy, cfg.task, task.warmup)
    log(f"policy: {policy} ({time.perf_counter() - t0:.0f} s)")
    source = write_source(task.train, cfg.out / "task" / "train.jsonl")
    build_cfg = BuildConfig(
        format={"name": "arith", "template": "plain"},
        score={"model": str(policy)},
        cluster={"num_clusters": cfg.num_clusters},
        report={"decontaminate": False, "map_iterations": 250},
    )
    t0 = time.perf_counter()
    result = build(str(source), str(cfg.out / "build"), build_cfg)
    log(f"artifact: {result.final_uri} ({time.perf_counter() - t0:.0f} s)")
    return write_heldout(task.test, cfg.out, HELDOUT), policy, Path(result.final_uri)


def run_one(
    cfg: BenchConfig, name: str, seed: int, artifact: Path, policy: Path, heldout: Path, predictor: Path | None = None
) -> str:
    """One GRPO run through ``ads_core.train.run.train`` with validation on the held-out set (step 0, every
    ``eval_every`` steps, the last); returns its run folder. A finished run is reused (nothing to train), an
    unfinished one starts again from its last checkpoint (the last step: so from the start)."""
    from ads_core.train.options import TrainConfig
    from ads_core.train.run import train

    run_dir = cfg.out / "runs" / f"{name}-seed{seed}"
    found = presets.preset(name)
    sampler = presets.resolve(found, seed, cfg.num_clusters)
    if sampler["kind"] == "dots":
        sampler["dots"]["predictor"] = str(predictor)
    train_cfg = TrainConfig(
        trainer="trl",
        model=str(policy),
        steps=cfg.steps,
        run_dir=str(run_dir),
        eval_sets=[str(heldout)],
        validation={"steps": cfg.eval_every, "limit": 0, "k": cfg.eval_samples},
        decontaminate="off",
        sampler=sampler,
        **found.get(presets.TRAIN, {}),
        trl=found.get(presets.TRAINER, {})
        | {
            "num_generations": cfg.num_generations,
            "max_completion_length": cfg.max_completion_length,
            "learning_rate": cfg.learning_rate,
            "seed": seed,
            "save_steps": cfg.steps,
            "keep_checkpoints": 1,
        },
    )
    train(str(artifact), train_cfg)
    return str(run_dir)


def run_summary(run: Any, seed: int, num_generations: int) -> dict[str, Any]:
    """What grpo_curriculum.json keeps of a run: its held-out curve and what it rolled out."""
    return {
        "seed": seed,
        "curve": [{"step": p.step, "accuracy": p.accuracy, "rollout_prompts": p.prompts} for p in run.curve(HELDOUT)],
        "prompts_per_step": run.steps[0]["completions"] // num_generations,
        "rollout_prompts": run.total_prompts,
        "informative_groups": sum(int(s.get("informative_groups", 0)) for s in run.steps),
        "seconds": sum(float(s.get("step_seconds", s.get("seconds", 0.0))) for s in run.steps),
    }


def _worker_init() -> None:
    """A worker process: one thread, and it dies with the bench (Linux), so a killed bench leaves no runs going."""
    import torch

    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_all(
    cfg: BenchConfig,
    jobs: list[tuple[str, int]],
    artifact: Path,
    policy: Path,
    heldout: Path,
    predictor: Path | None = None,
) -> Iterator[tuple[str, int, str]]:
    """(sampler, seed, run folder) of every run, ``cfg.jobs`` at a time in worker processes (in this one with 1),
    as they finish."""
    if cfg.jobs <= 1:
        for name, seed in jobs:
            yield name, seed, run_one(cfg, name, seed, artifact, policy, heldout, predictor)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(cfg.jobs, mp_context=context, initializer=_worker_init) as pool:
        futures = {
            pool.submit(run_one, cfg, name, seed, artifact, policy, heldout, predictor): (name, seed)
            for name, seed in jobs
        }
        for future in as_completed(futures):
            yield (*futures[future], future.result())


def parse_args(argv: list[str] | None = None) -> BenchConfig:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per run (default 60)")
    parser.add_argument(
        "--samplers",
        default=",".join(SAMPLERS),
        help=f"comma-separated presets (ads_lab.presets), from {', '.join(RUNNABLE)} (uniform is added)",
    )
    parser.add_argument("--out", type=Path, default=BenchConfig.out, help="output folder (default %(default)s)")
    parser.add_argument("--eval-every", type=int, default=None, help="held-out evaluation every N steps (default 5)")
    parser.add_argument(
        "--jobs", type=int, default=BenchConfig.jobs, help="runs at a time, one process each (%(default)s)"
    )
    parser.add_argument(
        "--smoke", "--quick", dest="smoke", action="store_true", help="smoke run: tiny sizes, first seed, 4 steps"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.samplers.split(",") if n.strip()]
    unknown = [n for n in names if n not in RUNNABLE]
    if unknown:
        parser.error(f"--samplers: unknown {', '.join(unknown)}; choose from {', '.join(RUNNABLE)}")
    samplers = tuple(dict.fromkeys([BASELINE, *names]))
    seeds = tuple(int(s) for s in args.seeds.split(","))
    cfg = BenchConfig(out=args.out, seeds=seeds, samplers=samplers, jobs=max(1, args.jobs))
    if args.smoke:
        cfg = cfg.quick()
    if args.steps is not None:
        cfg = replace(cfg, steps=args.steps)
    if args.eval_every is not None:
        cfg = replace(cfg, eval_every=args.eval_every)
    return cfg


def main(argv: list[str] | None = None) -> dict[str, Any]:
    cfg = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; one thread per process is also the fastest at these sizes
    try:
        return bench(cfg)
    finally:
        torch.set_num_threads(threads)


def bench(cfg: BenchConfig) -> dict[str, Any]:
    """Prepare, run every (sampler, seed), report with ``ads compare``'s code; returns what it writes to
    OUT/grpo_curriculum.json (the comparison itself goes to OUT/compare.json, .md and .png)."""
    from ads_core.evaluation.compare import load_run, ratio_text, summarize
    from ads_core.evaluation.compare_report import write_comparison

    started = time.perf_counter()
    cfg.out.mkdir(parents=True, exist_ok=True)
    heldout, policy, artifact = prepare(cfg)
    predictor = None
    if any(presets.PRESETS[n]["kind"] == "dots" for n in cfg.samplers):
        predictor = prepare_predictor(cfg, artifact, policy)
    jobs = [(name, seed) for seed in cfg.seeds for name in cfg.samplers]
    done: dict[tuple[str, int], Any] = {}
    for name, seed, folder in run_all(cfg, jobs, artifact, policy, heldout, predictor):
        run = done[name, seed] = load_run(folder, name=f"{name}-seed{seed}")
        first, last = run.curve(HELDOUT)[0], run.curve(HELDOUT)[-1]
        print(
            f"{name} seed {seed}: held-out accuracy {first.accuracy:.3f} -> {last.accuracy:.3f} after {last.step} "
            f"steps, {run.total_prompts} prompts rolled out",
            flush=True,
        )
    groups = {name: [done[name, seed] for seed in cfg.seeds] for name in cfg.samplers}
    comparison = write_comparison(groups, cfg.out)
    rows = summarize(groups, HELDOUT)
    print()
    print(comparison["markdown"])
    wall = time.perf_counter() - started
    results = {
        "config": json.loads(json.dumps(config_of(cfg), default=str)),
        "runs": {
            name: [run_summary(r, seed, cfg.num_generations) for r, seed in zip(runs, cfg.seeds, strict=True)]
            for name, runs in groups.items()
        },
        "summary": rows,
        "wall_seconds": wall,
    }
    (cfg.out / "grpo_curriculum.json").write_text(json.dumps(results, indent=1))
    paths = comparison["paths"]
    print(
        f"wall {wall:.0f} s; results {cfg.out / 'grpo_curriculum.json'}, table {paths['markdown']}, "
        f"plot {paths['plot']}"
    )
    head = next((r for r in rows if r["name"] == HEADLINE), None)
    if head is not None:
        print(
            f"{HEADLINE} vs {BASELINE}: steps to {BASELINE}'s final held-out accuracy = "
            f"{ratio_text(head, 'step_ratio')} of {BASELINE}'s ({head['reached']}/{head['runs']} seeds reached it)"
        )
    for row in (r for r in rows if r["name"] in DOTS_CLOSING):
        print(
            f"{row['name']} vs {BASELINE}: steps {ratio_text(row, 'step_ratio', True)}, wall time "
            f"{ratio_text(row, 'time_ratio', True)} of {BASELINE}'s to its final held-out accuracy "
            f"({row['reached']}/{row['runs']} seeds reached it)"
        )
    return results


if __name__ == "__main__":
    main()
