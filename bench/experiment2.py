"""Experiment 2 of docs/study.md, end to end and resumable: does ADS's mechanism work where its premise holds?

One command runs it all, each part a run of the ``ads-study`` Prefect flow (finished runs are reused, so a killed
experiment run again continues where it was and gives the same numbers):

1. the gates: the task (four learnable arithmetic families with worked solutions, one out of reach), the warmed-up
   policy, the start regime (G samples per training problem) and the artifact built by the real pipeline, checked
   against the declared gates before any GRPO run; a failed gate tries the declared fallback, else voids the
   experiment (exit 3);
2. the pilot (seeds 2000-2004; uniform, ADS as published, the oracle): the viability gate (uniform learns), then
   the declared rules set N, the static arm's share and the accuracy target (OUT/pilot/rules.json);
3. the eight arms on N reported seeds (3000..), analysed with the declared decision rule (OUT/results.md,
   OUT/per_seed.csv, OUT/experiment2.json, plots);
4. the knob sweep on its own seeds (OUT/sweep/results.md): every cell reported, none chosen.

Sizes: the declared one (default); ``--pilot`` (steps 1-2 only); ``--smoke`` (everything at tiny sizes, 2 seeds:
the suite's check that it all runs; it measures nothing). ``--gates-only``: step 1 only.

Run: ``.venv/bin/python bench/experiment2.py [--smoke | --pilot | --gates-only] [--jobs 2] [--dask ADDR] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ads_core.common.gc_tuning import tune_gc_for_batch_work
from ads_lab.config import experiment2 as e2
from ads_lab.config.study import StudyConfig
from ads_lab.studies.study import safe

VOID = 3  # exit status of an experiment a gate voided


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="tiny sizes: runs everything, measures nothing")
    size.add_argument("--pilot", action="store_true", help="the gates and the pilot only")
    size.add_argument("--gates-only", action="store_true", help="the gates only (no GRPO run)")
    parser.add_argument("--out", default=None, help="output folder (default bench-out/experiment2[-smoke])")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time without Dask (default 2)")
    parser.add_argument("--dask", default=None, help="local, or a Dask scheduler address: spread the runs over it")
    return parser.parse_args(argv)


def sized(cfg: StudyConfig, smoke: bool) -> StudyConfig:
    return e2.smoke(cfg) if smoke else cfg


def gated(run: Any, cfg: StudyConfig, sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Run the flow (it checks the gates again before any GRPO run); a failed gate ends the experiment."""
    result = run(cfg, {n: sections[n] for n in cfg.samplers}).result["result"]
    if result.get("trained") is False:
        void(cfg, result["gates"])
    return result


def void(cfg: StudyConfig, checked: dict[str, Any]) -> None:
    """Report the failed gates (OUT/gates.json) and stop: the experiment is void (exit 3)."""
    report = Path(cfg.out) / "gates.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(checked, indent=1, default=str))
    for g in checked["gates"]:
        if not g["passed"]:
            print(f"gate FAILED: {g['gate']}: {g['rule']}; measured {g['measured']}", flush=True)
    print(f"the experiment is void: a gate failed before any GRPO run (report: {report})", flush=True)
    raise SystemExit(VOID)


def choose_regime(base: StudyConfig, smoke: bool) -> tuple[StudyConfig, dict[str, Any]]:
    """The declared warm-up, else the declared fallbacks in order (e2.GATE_FALLBACKS), measured before any GRPO run;
    the first whose gates all pass is the experiment's. Each is recorded in OUT/gates-<steps>.json."""
    tried = []
    for steps in (base.policy.warmup_steps, *e2.GATE_FALLBACKS):
        cfg = sized(base.replaced(policy=base.policy.replaced(warmup_steps=steps)), smoke)
        checked = gates_only(cfg)
        (Path(cfg.out) / f"gates-{cfg.policy.warmup_steps}.json").write_text(json.dumps(checked, indent=1, default=str))
        tried.append(checked)
        if checked["passed"] or smoke:
            return base.replaced(policy=base.policy.replaced(warmup_steps=steps)), checked
    void(base, {"tried": tried, "gates": tried[-1]["gates"]})
    raise AssertionError  # unreachable: void exits


def pilot_rules(cfg: StudyConfig) -> dict[str, Any]:
    """The pilot's runs through the declared rules (ads_lab.studies.experiment2.pilot_rules); written once."""
    from ads_core.evaluation.paired import paired_verdict
    from ads_lab.studies.experiment2 import pilot_rules as rules
    from ads_lab.studies.study import load_study_groups, run_cost

    groups = load_study_groups(cfg)
    learnable = [f"heldout-{f}" for f in cfg.task.families if f not in cfg.unreachable]
    from ads_core.evaluation.compare import AVERAGE

    gains = [
        r.curve(AVERAGE, learnable)[-1].accuracy - r.curve(AVERAGE, learnable)[0].accuracy for r in groups["uniform"]
    ]
    viability = paired_verdict("final", "step 0", gains)
    cost = [run_cost(cfg, n, s).get("cpu_seconds", 0.0) for n in cfg.samplers for s in cfg.seeds]
    rows = cfg.task.train_per_cell * 4 * len(cfg.task.families)
    out = {"viability": viability, "uniform_learns": viability["winner"] == "final"}
    out |= rules(groups, learnable, rows, cost)
    return out


def gates_only(cfg: StudyConfig) -> dict[str, Any]:
    """The task, the policy, the start regime and the build (in this process, no Prefect), and the gates."""
    from ads_core.pipeline.build import build
    from ads_lab.demo.runs import fixed_threads
    from ads_lab.demo.task import make_task
    from ads_lab.studies.experiment2 import gates
    from ads_lab.studies.study import build_config, prepare_study

    prepared = prepare_study(cfg)
    with fixed_threads():
        build(prepared.source, str(Path(cfg.out) / "build"), build_config(cfg, prepared.policy))
    return gates(
        cfg, prepared.start, str(Path(cfg.out) / "build" / "final" / "train.parquet"), make_task(cfg.task).train
    )


def viable_pilot(run: Any, base: StudyConfig, smoke: bool) -> tuple[StudyConfig, dict[str, Any]] | None:
    """The pilot at the declared learning rate, then at each declared fallback (e2.VIABILITY_FALLBACKS) until uniform
    learns (the viability gate); a failed attempt's runs and results are moved to OUT/pilot-attempts/lr<rate>/ (kept,
    never deleted) before the next. Returns the viable config and the pilot's rules, or None (void)."""
    import shutil

    for rate in (base.learning_rate, *e2.VIABILITY_FALLBACKS):
        cfg = base.replaced(learning_rate=rate)
        pilot = sized(e2.pilot(cfg), smoke)
        kept = Path(cfg.out) / "pilot-attempts" / f"lr{rate:g}"
        if (kept / "pilot" / "rules.json").is_file():  # an attempt that failed the gate earlier
            print(f"pilot at learning rate {rate:g}: failed the viability gate earlier ({kept})", flush=True)
            continue
        gated(run, pilot, e2.ARMS)
        rules_file = Path(pilot.out) / pilot.report / "rules.json"
        if rules_file.is_file():
            rules = json.loads(rules_file.read_text())
        else:
            rules = pilot_rules(pilot)
            rules_file.write_text(json.dumps(rules, indent=1, default=str))
        print(f"pilot at learning rate {rate:g}: {json.dumps({k: v for k, v in rules.items() if k != 'viability'})}")
        print(f"viability gate: {rules['viability']['text']}", flush=True)
        if rules["uniform_learns"] or smoke:
            return cfg, rules
        (kept / "runs").mkdir(parents=True, exist_ok=True)
        for name in pilot.samplers:
            for seed in pilot.seeds:
                folder = Path(cfg.out) / "runs" / f"{safe(name)}-seed{seed}"
                if folder.exists():
                    shutil.move(str(folder), str(kept / "runs" / folder.name))
        shutil.move(str(Path(pilot.out) / pilot.report), str(kept / "pilot"))
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    out = args.out or ("bench-out/experiment2-smoke" if args.smoke else "bench-out/experiment2")
    base = e2.experiment2(out=str(Path(out).resolve())).replaced(jobs=max(1, args.jobs), dask=args.dask)
    Path(base.out).mkdir(parents=True, exist_ok=True)
    base, checked = choose_regime(base, args.smoke)
    print(
        f"gates ({'passed' if checked['passed'] else 'not enforced: --smoke'}), warm-up "
        f"{base.policy.warmup_steps} steps: {json.dumps(checked['gates'], default=str)}",
        flush=True,
    )
    if args.gates_only:
        return 0
    from ads_lab.flows.launch import study_session
    from ads_lab.flows.workers import worker_pool

    with study_session() as run, worker_pool(base.jobs if not base.dask else 0):
        found = viable_pilot(run, base, args.smoke)
        if found is None:
            print(
                "the experiment is void: uniform does not learn in the pilot at any declared learning rate", flush=True
            )
            return VOID
        base, rules = found
        if args.pilot:
            return 0
        arms = {name: dict(section) for name, section in e2.ARMS.items()}
        arms["easiest"] = {**arms["easiest"], "easiest": {"share": rules["easiest_share"]}}
        n = 1 if args.smoke else int(rules["seeds"])
        main_cfg = sized(base, args.smoke).replaced(
            seeds=e2.reported_seeds(n), accuracy_target=rules["accuracy_target"]
        )
        result = gated(run, main_cfg, arms)
        sweep_cfg = sized(e2.sweep(base), args.smoke).replaced(accuracy_target=rules["accuracy_target"])
        sweep = gated(run, sweep_cfg, e2.SWEEP)
    print()
    print(result["markdown"])
    print(f"sweep: {sweep['paths']['results']}")
    print(f"wall {time.perf_counter() - started:.0f} s; results {result['paths']['results']}", flush=True)
    return 0


if __name__ == "__main__":
    tune_gc_for_batch_work()  # as the `ads` commands do (ads_core/common/gc_tuning.py)
    sys.exit(main())
