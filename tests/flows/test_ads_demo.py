"""`ads demo --smoke` end to end, as a user runs it (the CLI in its own process, reporting to the session's Prefect
server): the task, the warmed-up policy, the real build, ADS and uniform trained through TRL with validation,
`ads compare`'s outputs in OUT/demo/, the printed table equal to compare.json's numbers, the whole demo in the
server (flow, build subflow, one task per run, the comparison artifact), a rerun that reuses everything, and the
second run trained alone in a fresh worker process giving the numbers it gave after the first (what --jobs 2
changes)."""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ads_core.common.gc_tuning import YOUNG_THRESHOLD

ADS = str(Path(sys.executable).with_name("ads"))


def _demo(out: Path, env: dict[str, str]) -> tuple[str, str]:
    """What `ads demo --smoke` printed on stdout (tables, verdict, plot) and on stderr (progress, run name)."""
    proc = subprocess.run(
        [ADS, "demo", "--smoke", "--out", str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def _reach_rows(printed: str) -> dict[str, list[str]]:
    """The printed reach table's rows (run -> its cells), the one after 'Steps and prompts rolled out to reach'."""
    block = printed.split("Steps and prompts rolled out to reach", 1)[1]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("run",) and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells
        elif rows and not line.startswith("|"):
            break
    return rows


@pytest.mark.slow  # the whole chain at smoke sizes: tokenizer, warm-up, build, 2 x 4 TRL steps, 6 validations
def test_the_smoke_demo_runs_the_whole_chain_and_prints_what_compare_json_holds(
    prefect_api: Any, ads_env: dict[str, str], helpers: Any, tmp_path: Path
):
    pytest.importorskip("trl")
    out = tmp_path / "out"
    env = prefect_api.env(**ads_env)
    printed, notes = _demo(out, env)
    demo = out / "demo"
    for name in ("compare.png", "compare.md", "compare.json", "build/final/train.parquet", "policy/config.json"):
        assert (demo / name).is_file(), name
    assert (demo / "compare.png").stat().st_size > 1000
    result = json.loads((demo / "compare.json").read_text())
    assert result["baseline"] == "uniform" and result["groups"] == {"uniform": ["uniform-seed0"], "ads": ["ads-seed0"]}
    for run in ("uniform-seed0", "ads-seed0"):  # validated at 0, 2 and 4 on the held-out set
        records = [json.loads(x) for x in (demo / "runs" / run / "eval.jsonl").read_text().splitlines()]
        assert [(r["step"], r["set"]) for r in records] == [(0, "heldout"), (2, "heldout"), (4, "heldout")]

    # the printed tables are compare.md, and their numbers are compare.json's
    assert (demo / "compare.md").read_text().strip() in printed
    rows = _reach_rows(printed)
    for row in result["reach"]["heldout"]:
        cells = rows[row["name"]]
        assert cells[1] == f"{row['final_mean']:.3f}" and cells[2] == f"{row['reached']}/{row['runs']}"
    for run in result["runs"]:
        final = run["final"]["heldout"]
        sampler = run["name"].split("-seed")[0]  # the row says what the run is: sampler, trainer, model, seed
        row = rf"^\| {re.escape(run['name'])} \| {sampler} \| trl \| [^|\n]+ \| 0 \| {final['mean_at_k']:.3f} \["
        assert re.search(row, printed, re.M), printed
    assert 0 < result["runs"][0]["final"]["heldout"]["mean_at_k"] < 1  # the warmed-up policy solves some
    uniform = next(r for r in result["reach"]["heldout"] if r["name"] == "uniform")
    assert f"final accuracy uniform: {uniform['final_mean']:.3f}" in printed
    # one seed: no winner named, and the line says how many seeds a verdict needs (ads_core.evaluation.paired);
    # said once, in `ads compare`'s Verdict section
    assert printed.count("no verdict at 1 seed(s): ads - uniform = ") == 1
    assert "\n- no verdict at 1 seed(s): ads - uniform = " in printed
    assert "a verdict needs at least 5 paired seeds" in printed
    # stdout is not a terminal: a line per phase and per training step, written as the demo goes (issue 45)
    lines = printed.splitlines()
    assert any(line.startswith("demo: warming up the policy (supervised steps): ") for line in lines), lines[:20]
    for run in ("uniform-seed0", "ads-seed0"):
        steps = [line.split("  ")[0] for line in lines if line.startswith(f"{run}: step ")]
        assert steps == [f"{run}: step {i}/4" for i in (1, 2, 3, 4)], lines
    plot_line = next(line for line in printed.splitlines() if line.startswith("plot: "))
    assert Path(plot_line.removeprefix("plot: ")).resolve() == (demo / "compare.png").resolve()

    # the whole demo is in the server: the flow, its build subflow, a task per run, the comparison artifact
    name = re.search(r"^run (demo-\d{8}-\d{6})", notes, re.M).group(1)
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        (flow_run,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run.id]))
        )
    assert flow_run.state.is_completed()
    assert [c.name.startswith("build-arith-") for c in children] == [True]
    tasks = {t.name for t in helpers.task_runs(flow_run.id)}
    assert {"train-uniform-seed0", "train-ads-seed0"} <= tasks
    keys = {a.key for a in helpers.artifacts_of(flow_run.id)}
    assert {"ads-demo-compare", "ads-demo-uniform-seed0", "ads-demo-ads-seed0"} <= keys

    # a rerun reuses the policy, the build and both runs, and prints the same numbers
    stamps = {p: p.stat().st_mtime_ns for p in (demo / "runs").rglob("eval.jsonl")}
    again, _ = _demo(out, env)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert _reach_rows(again) == rows

    # what --jobs 2 changes: a run trained in a fresh worker process, not after another run in the same one. The
    # demo's one worker (smoke: jobs=1) trained uniform, then ads; ads alone in a fresh worker gives its numbers
    # exactly (nothing a run leaves in its process reaches the next)
    from ads_lab.config.demo import DemoConfig
    from ads_lab.demo import runs

    base = DemoConfig(out=str(out), smoke=True).effective()
    assert base.jobs == 1
    prepared = runs.prepare(base)  # reused: the policy and the sets the demo wrote
    artifact = str(demo / "build" / "final" / "train.parquet")
    cfg = base.replaced(out=str(tmp_path / "fresh"))
    with runs.workers(1) as pool:
        alone = pool.submit(runs.train_run, cfg, runs.CANDIDATE, 0, artifact, prepared.policy, prepared.heldout)
        assert _numbers(Path(alone.result())) == _numbers(demo / "runs" / "ads-seed0")
        # a worker collects garbage as the `ads` commands do (ads_core/common/gc_tuning.py)
        assert pool.submit(gc.get_threshold).result()[0] == YOUNG_THRESHOLD


def _numbers(run: Path) -> tuple[list[Any], list[Any]]:
    """A run's held-out accuracies and its per-step rewards, exactly as written."""
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (run / "steps.jsonl").read_text().splitlines()]
    return [(r["step"], r["set"], r["mean_at_k"]) for r in evals], [(s["step"], s["rewards"]) for s in steps]
