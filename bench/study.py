"""The study of docs/study.md, end to end: uniform (GRPO) vs ADS (reference and frontier windows) vs DOTS (its
predictor) vs DOTS+RR vs dynamic sampling, from the same warmed-up policy, paired by seed.

What runs. The study's task (``ads_lab.config.study``: five arithmetic families, one of them beyond the tiny
policy, 320 training problems, 300 held-out ones in five per-family eval sets), the warmed-up tiny policy, the
artifact built by the real pipeline (scored in float32), then every (sampler, seed) GRPO run through
``ads_core.train.run.train`` with TRL, validated on the held-out sets as it trains. The runs are tasks of the
``ads-study`` Prefect flow: ``--jobs`` at a time in local one-thread processes, or over a Dask cluster with
``--dask local`` or ``--dask tcp://HOST:8786`` (as ``ads build --run.dask`` spreads score shards), so that more
machines run more seeds. Samplers are the presets of ``ads_lab.presets`` (the one table of names that
``bench/grpo_curriculum.py``, Experiment 2 and ``ads simulate`` use); for ``dots`` and ``dots+rr`` the flow first
trains DOTS's predictor for the study's artifact (``ads_lab.studies.predictor``: source policies other than the
trained one), once, reused by every run.

What it writes to OUT: every run folder (``runs/<sampler>-seed<n>``, which ``ads compare`` reads), ``ads
compare``'s compare.md, compare.json and compare.png, window_traces.png and .csv for the ADS runs, results.md
(one table: final accuracy, the paired difference against uniform with its bootstrap interval, steps, rollouts
and wall time to uniform's final accuracy, informative groups, the per-family table, the start regime, the
decision) and study.json. A rerun reuses the policy, the build and every finished run; a killed run is trained
again from its start, so a killed study run again gives the same result.

Sizes: the declared one (default: seeds 1000-1015, 80 steps); ``--pilot`` (seeds 900-903; uniform, ads,
ads-frontier: the spread that sizes the study); ``--smoke`` (tiny, 2 seeds, 2 steps: the suite's check that
everything runs; it measures nothing). Any other seeds or steps are not the declared study and are labelled so.

Run: ``.venv/bin/python bench/study.py [--pilot | --smoke] [--jobs 2] [--dask local] [--out DIR]``;
``--start-only`` warms up the policy and prints the step-0 shares of the training set, and nothing else.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ads_core.common.gc_tuning import tune_gc_for_batch_work
from ads_lab.config.study import REPORTED_SEEDS, StudyConfig


def named_samplers() -> dict[str, dict[str, Any]]:
    """The sampler presets by name (``ads_lab.presets``: each a TrainConfig.sampler section with its extras,
    DOTS+RR's replay under `trl`)."""
    from ads_lab.presets import PRESETS, preset

    return {name: preset(name) for name in PRESETS}


def available(names: tuple[str, ...], known: dict[str, Any]) -> tuple[tuple[str, ...], list[str]]:
    """The names that run here, and a line for each that does not."""
    runnable, notes = [], []
    for name in names:
        if name in known:
            runnable.append(name)
        else:
            notes.append(f"{name}: not a sampler name of ads_lab.presets; skipped")
    return tuple(runnable), notes


def seeds_of(text: str) -> tuple[int, ...]:
    """'1000,1001' or '1000-1026' -> the seeds."""
    if "-" in text.strip("-") and "," not in text:
        first, last = (int(x) for x in text.split("-"))
        return tuple(range(first, last + 1))
    return tuple(int(s) for s in text.split(","))


def power_rule_seeds(seeds: tuple[int, ...]) -> bool:
    """The declared seeds at another N: 1000, 1001, ... with N >= 16 (docs/study.md's Power rule)."""
    first = REPORTED_SEEDS[0]
    return len(seeds) >= len(REPORTED_SEEDS) and seeds == tuple(range(first, first + len(seeds)))


def parse_args(argv: list[str] | None = None) -> tuple[StudyConfig, list[str]]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", "--quick", dest="smoke", action="store_true", help="tiny: runs, measures nothing")
    size.add_argument("--pilot", action="store_true", help="the pilot: seeds 900-903, uniform and both ADS windows")
    parser.add_argument(
        "--start-only", action="store_true", help="only warm up the policy and print the step-0 shares (no GRPO)"
    )
    parser.add_argument("--out", default=None, help="output folder (default bench-out/study[-pilot|-smoke])")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time without Dask (default 2)")
    parser.add_argument("--dask", default=None, help="local, or a Dask scheduler address: spread the runs over it")
    parser.add_argument("--dask-workers", type=int, default=None, help="workers of a local Dask cluster")
    parser.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds, or FIRST-LAST; 1000-(1000+N-1) with N >= 16 is the declared study at the "
        "pilot's power rule's N (docs/study.md), any other set is not",
    )
    parser.add_argument("--samplers", default=None, help="comma-separated sampler names (uniform is added)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (not the declared study)")
    args = parser.parse_args(argv)
    cfg = StudyConfig()
    kind = "study"
    if args.smoke:
        cfg, kind = cfg.smoke(), "smoke"
    elif args.pilot:
        cfg, kind = cfg.pilot(), "pilot"
    changes: dict[str, Any] = {"jobs": max(1, args.jobs), "dask": args.dask, "dask_workers": args.dask_workers}
    notes = []
    if args.seeds:
        changes["seeds"] = seeds_of(args.seeds)
        if not power_rule_seeds(changes["seeds"]):
            notes.append("seeds changed: not the declared study")
    if args.steps:
        changes["steps"] = args.steps
        notes.append("steps changed: not the declared study")
    names = cfg.samplers
    if args.samplers:
        names = tuple(dict.fromkeys(["uniform", *(n.strip() for n in args.samplers.split(",") if n.strip())]))
    runnable, skipped = available(names, named_samplers())
    changes["samplers"] = runnable
    out = args.out or ("bench-out/study" if kind == "study" else f"bench-out/study-{kind}")
    changes["out"] = str(Path(out).resolve())  # runs in worker processes and manifests name it from anywhere
    return cfg.replaced(**changes), notes + skipped + (["start only"] if args.start_only else [])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    cfg, notes = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for note in notes:
        print(f"note: {note}", flush=True)
    if "start only" in notes:
        return start_only(cfg)
    known = named_samplers()
    sections = {name: known[name] for name in cfg.samplers}
    from ads_lab.flows.launch import run_study

    started = time.perf_counter()
    run = run_study(cfg, sections)
    result = run.result["result"]
    print()
    print(result["markdown"])
    print(
        f"wall {time.perf_counter() - started:.0f} s; results {result['paths']['results']}, "
        f"plot {result['paths']['plot']}, window traces {result['paths']['window_traces'].get('png', 'none')}",
        flush=True,
    )
    return result


def start_only(cfg: StudyConfig) -> dict[str, Any]:
    """The task, the warmed-up policy and the step-0 shares (what docs/study.md's start regime states), no GRPO."""
    from ads_lab.studies.start import shares_table
    from ads_lab.studies.study import prepare_study

    started = time.perf_counter()
    prepared = prepare_study(cfg)
    print(f"task: {prepared.counts}; policy {prepared.policy}")
    print(shares_table(prepared.start))
    print(f"wall {time.perf_counter() - started:.0f} s")
    return prepared.start


if __name__ == "__main__":
    tune_gc_for_batch_work()  # as the `ads` commands do (ads_core/common/gc_tuning.py)
    main()
