"""A build is described by what it read, and nothing it wrote is trusted on reuse unless it checks out.

The attacks, each on the in-process build of 24 rows with the tiny model:
- rows appended to the source after the build hashed it (another job still writing), then the file cut back: the
  rebuild must give exactly the cut-back rows, never the rows that are gone;
- `formatted/manifest.json` counts edited (by hand, and with the digest recomputed): the stage is recomputed;
- `final/manifest.json`'s `policy_model` edited: `ads train --dry-run` refuses the manifest and never shows that
  model, and the build recomputes the stage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.sources import source_digest
from ads_core.pipeline.build import BuildResult, StageEvent, build
from ads_core.pipeline.resolve import resolve
from ads_core.pipeline.stage_keys import stage_key
from ads_core.pipeline.stages import context
from ads_core.stages import format as format_stage
from ads_core.storage import manifest as mf


def run(source: Path, out: Path, cfg: Any, progress: Any = None) -> tuple[BuildResult, dict[str, bool]]:
    """The build, and for each stage run whether it was reused."""
    reused: dict[str, bool] = {}

    def note(event: StageEvent) -> None:
        reused[event.stage.label(event.shard)] = event.reused

    return build(str(source), str(out), cfg, progress=progress, on_stage=note), reused


def sample_ids(uri: str) -> list[int]:
    return sorted(pl.read_parquet(uri, columns=["sample_id"])["sample_id"].to_list())


def appending_when(stage: str, path: Path, extra: str) -> Callable[..., Any]:
    """A progress factory that appends EXTRA to PATH when STAGE starts: after the build computed its keys."""

    @contextmanager
    def factory(description: str, _: int | None, unit: str = "rows") -> Iterator[None]:
        if description.startswith(stage):
            with path.open("a") as fh:
                fh.write(extra)
        yield None

    return factory


def test_rows_appended_during_a_build_then_cut_back_are_gone_from_the_rebuild(
    tmp_path: Path, tiny_build_config: Any, tiny_sample_lines: list[str]
):
    source, out = tmp_path / "src.jsonl", tmp_path / "out"
    kept, appended = tiny_sample_lines[:16], tiny_sample_lines[16:]
    source.write_text("\n".join(kept) + "\n")
    cut_back = source.read_bytes()

    before = source_digest(str(source))
    first, _ = run(source, out, tiny_build_config, appending_when("format", source, "\n".join(appended) + "\n"))
    assert first.manifest("final").counts["rows"] == 24  # it read the appended rows ...
    recorded = first.manifest("formatted").inputs["source"]["sha256"]
    assert recorded == source_digest(str(source)) != before  # ... and is keyed by the bytes it read
    ctx = context(resolve(str(source), str(out)), tiny_build_config)
    formatted = first.manifest("formatted")
    assert formatted.extra["stage_key"] == stage_key(format_stage.STAGE, ctx)  # the key of the file as read
    assert first.manifest("formatted").extra["stage_key"] != stage_key(format_stage.STAGE, ctx, source=before)

    source.write_bytes(cut_back)  # the writer's job is rolled back
    second, reused = run(source, out, tiny_build_config)
    assert reused["format"] is False  # not Cached under the key of the file as it was before the append
    reference = format_dataset(str(source), str(tmp_path / "reference")).output_uri("train")
    assert sample_ids(second.final_uri) == sample_ids(reference)  # exactly the cut-back rows
    assert second.manifest("final").counts["rows"] == 16
    assert second.manifest("formatted").inputs["source"]["sha256"] == source_digest(str(source)) == before

    third, reused = run(source, out, tiny_build_config)
    assert all(reused.values()), reused  # an unchanged source stays Cached
    assert third.manifest("final").output_hash("train") == second.manifest("final").output_hash("train")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, tiny_build_config: Any, tiny_sample_lines: list[str]) -> Any:
    """One built OUT; each test below first rebuilds it (cheap when every stage is reused, self-healing if not)."""
    root = tmp_path_factory.mktemp("trust")
    (root / "src.jsonl").write_text("\n".join(tiny_sample_lines) + "\n")
    run(root / "src.jsonl", root / "out", tiny_build_config)
    return root


def edit_json(path: Path, change: Callable[[dict[str, Any]], None], redigest: bool = False) -> None:
    data = json.loads(path.read_text())
    change(data)
    if redigest:  # a careful forger: the digest matches the edited content
        data["digest"] = mf.content_digest(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("redigest", [False, True])
def test_edited_format_counts_are_recomputed_not_reported(built: Path, tiny_build_config: Any, redigest: bool):
    source, out = built / "src.jsonl", built / "out"
    run(source, out, tiny_build_config)
    truth = mf.read(str(out / "formatted")).counts

    def lie(data: dict[str, Any]) -> None:
        data["counts"].update(rows_in=1000, rows_out=250)

    edit_json(out / "formatted" / "manifest.json", lie, redigest)
    assert mf.verify(str(out / "formatted")) is None
    result, reused = run(source, out, tiny_build_config)
    assert reused["format"] is False and result.manifest("formatted").counts == truth
    assert reused["score-shard-0"] and reused["sort"]  # the same bytes again: nothing later recomputes
    assert mf.verify(str(out / "formatted")) is not None


def train_dry_run(out: Path, tmp_path: Path) -> Any:
    args = ["train", str(out / "final" / "train.parquet"), "--trainer", "trl", "--dry-run", "--no-eval"]
    return CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "run")])


def planned_model(out: Path) -> str:
    """The policy `ads train` would train (what its dry run resolves when --model is not given)."""
    from ads_core.train.options import TrainConfig
    from ads_core.train.plan import plan_training

    cfg = TrainConfig(trainer="trl", eval_sets=[])
    return plan_training(str(out / "final" / "train.parquet"), cfg, materialize=False).model


def test_an_edited_policy_model_is_never_trained_and_the_build_recomputes_it(
    built: Path, tiny_build_config: Any, tmp_path: Path
):
    source, out = built / "src.jsonl", built / "out"
    run(source, out, tiny_build_config)
    real = mf.read(str(out / "final")).extra["policy_model"]
    assert planned_model(out) == real
    copied = tmp_path / "synced-elsewhere"  # an OUT copied to another place keeps its manifest's trust
    (copied / "final").mkdir(parents=True)
    for name in ("train.parquet", "manifest.json"):
        (copied / "final" / name).write_bytes((out / "final" / name).read_bytes())
    assert planned_model(copied) == real

    edited = str(tmp_path / "someone-elses-model")
    edit_json(out / "final" / "manifest.json", lambda d: d["extra"].update(policy_model=edited))
    result = train_dry_run(out, tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert str(out / "final" / "manifest.json") in line and "not trusted" in line
    assert edited not in result.output

    rebuilt, reused = run(source, out, tiny_build_config)
    assert reused["sort"] is False and rebuilt.manifest("final").extra["policy_model"] == real
    assert planned_model(out) == real and train_dry_run(out, tmp_path).exit_code == 0

    # a forger who also recomputes the digest: the build still compares the field with its own config
    edit_json(out / "final" / "manifest.json", lambda d: d["extra"].update(policy_model=edited), redigest=True)
    rebuilt, reused = run(source, out, tiny_build_config)
    assert reused["sort"] is False and rebuilt.manifest("final").extra["policy_model"] == real


def test_a_final_manifest_that_lists_other_rows_is_refused_by_training(
    built: Path, tiny_build_config: Any, tmp_path: Path
):
    source, out = built / "src.jsonl", built / "out"
    run(source, out, tiny_build_config)

    def other_build(data: dict[str, Any]) -> None:
        data["outputs"]["train"]["rows"] += 1
        data["counts"]["rows"] += 1

    edit_json(out / "final" / "manifest.json", other_build, redigest=True)
    result = train_dry_run(out, tmp_path)
    assert result.exit_code == 2 and "not trusted" in result.stderr and "rows" in result.stderr
    run(source, out, tiny_build_config)  # heals it for the next test
    assert mf.verify(str(out / "final")) is not None
