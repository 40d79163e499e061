"""The executor interface: `execute` runs the declared stages in order through any executor, owns force_from and
tears each stage's set-up state down after its runs, also when a run fails. No model, no Prefect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ads_core.config.build import BuildConfig, RunConfig
from ads_core.config.stage_order import BUILD_STAGES, STAGE_NAMES
from ads_core.pipeline import lifecycle
from ads_core.pipeline import stages as declared
from ads_core.pipeline.executor import execute
from ads_core.stages.base import Stage, StageContext


def fake(name: str) -> Stage:
    return Stage(name, None, (), {f"{name}-out": f"{name}/x.json"}, "1", run=lambda ctx, shard: None)


class Recording:
    """An executor that records what it was asked to run; it fails on the stage named `fail_on`."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, str, bool]] = []
        self.fail_on = fail_on

    def run(self, stage: Stage, ctx: StageContext, force: bool) -> str:
        self.calls.append(("run", stage.name, force))
        if stage.name == self.fail_on:
            raise RuntimeError(f"{stage.name} failed")
        return f"{stage.name} done"

    def finished(self, stage: Stage, ctx: StageContext) -> None:
        self.calls.append(("finished", stage.name, False))


@pytest.fixture
def three(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(declared, "STAGES", tuple(fake(n) for n in ("a", "b", "c")))
    torn: list[str] = []
    monkeypatch.setattr(lifecycle, "teardown", lambda stage: torn.append(stage.name))
    return torn


def context(force_from: str = "none") -> StageContext:
    cfg = BuildConfig.model_construct(run=RunConfig.model_construct(force_from=force_from))
    return StageContext(source="", out="/tmp/x", dataset="d", config=cfg, layout={})


def test_execute_runs_the_list_in_order_and_forces_from_the_named_stage(three: list[str]):
    executor = Recording()
    assert execute(executor, context("b")) == {"a": "a done", "b": "b done", "c": "c done"}
    assert executor.calls == [
        ("run", "a", False),
        ("finished", "a", False),
        ("run", "b", True),
        ("finished", "b", False),
        ("run", "c", True),
        ("finished", "c", False),
    ]
    assert three == ["a", "b", "c"]  # each stage's state torn down after its runs


def test_a_failed_stage_is_torn_down_and_nothing_after_it_runs(three: list[str]):
    executor = Recording(fail_on="b")
    with pytest.raises(RuntimeError, match="b failed"):
        execute(executor, context())
    assert [c[1] for c in executor.calls if c[0] == "run"] == ["a", "b"]
    assert three == ["a", "b"]


def test_the_declared_list_is_the_one_order_and_the_force_from_choices():
    assert tuple(s.name for s in declared.STAGES) == STAGE_NAMES == tuple(n for n, _ in BUILD_STAGES)
    assert RunConfig.model_json_schema()["properties"]["force_from"]["enum"] == ["none", *STAGE_NAMES]


def test_a_list_entry_that_declares_another_stage_is_refused():
    with pytest.raises(TypeError, match="lists 'sorted' at ads_core.stages.sort:STAGE"):
        declared.load("sorted", "ads_core.stages.sort:STAGE")


def test_a_sharded_stage_says_its_count_and_the_context_follows(monkeypatch: pytest.MonkeyPatch):
    sharded = Stage(
        "parts", None, (), {"part": "parts/{shard}/p.json"}, "1", run=lambda ctx, s: None, shard_count=lambda c: 3
    )
    monkeypatch.setattr(declared, "STAGES", (sharded,))
    ctx = declared.stage_context("", "/tmp/x", "d", BuildConfig())
    assert sharded.shards(ctx) == [0, 1, 2]
    assert ctx.shard_uris("part")[-1].endswith("parts/shard-00002-of-00003/p.json")
    assert fake("one").shards(ctx) == [None]


def test_the_in_process_build_holds_outs_lock_like_the_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, three: list[str]
):
    """Issue 41: `build()` took no OUT lock while the flow did, so a library build and `ads build` into one OUT
    could publish over each other."""
    from ads_core.locks.manager import LockWaitTimeout, out_lock_key, owning
    from ads_core.locks.store import DirLockStore
    from ads_core.pipeline.build import build

    monkeypatch.setenv("ADS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("ADS_LOCK_WAIT_S", "1")
    out, store = str(tmp_path / "out"), DirLockStore(tmp_path / "locks")
    seen: list[dict[str, object]] = []

    def look(ctx: StageContext, shard: int | None) -> str:
        newest = store.newest(out_lock_key(out))
        seen.append({} if newest is None else newest.record)
        return "a manifest"

    monkeypatch.setattr(declared, "STAGES", (Stage("a", None, (), {"a-out": "a/x.json"}, "1", run=look),))
    monkeypatch.setattr("ads_core.pipeline.build.run_stage", lambda stage, ctx, shard, key: stage.run(ctx, shard))
    monkeypatch.setattr("ads_core.pipeline.build.stage_key", lambda stage, ctx, shard: "k")
    build(str(tmp_path / "data.jsonl"), out, BuildConfig(), reuse=False)
    assert [(r["holder"], r["pid"], r.get("released")) for r in seen] == [(f"build:{os.getpid()}", os.getpid(), None)]
    newest = store.newest(out_lock_key(out))
    assert newest is not None and newest.record["released"] is True  # given back at the end
    with owning(out, "flow-run:another"):  # a flow holds OUT: the in-process build waits, then gives up
        with pytest.raises(LockWaitTimeout, match="flow-run:another"):
            build(str(tmp_path / "data.jsonl"), out, BuildConfig(), reuse=False)
    assert len(seen) == 1
