"""The in-process build and the Prefect flow run the same declared stages: the same OUT tree, file for file.
And the cache follows the model's content: weights changed in place make the next build rescore."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ads_core import storage
from ads_core.storage import manifest as mf


def tree(out: Path) -> dict[str, Any]:
    """Every file under OUT: data files by content hash; manifests as JSON with OUT-relative URIs, without
    their timestamp and measured speeds (the only fields that may differ between two builds of the same input
    into two folders) and the digest over them (each checked to match its manifest first)."""
    snapshot: dict[str, Any] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel.startswith(".lock/"):  # OUT's lock (named for OUT's location, recording its holder): not built
            continue
        if path.name == mf.MANIFEST_NAME:
            assert not mf.problems(mf.read(str(path.parent))), rel
            data = json.loads(path.read_text().replace(str(out), "OUT"))
            data.pop("created_at", None)
            data.pop("digest", None)
            for measured in ("seconds", "tokens_per_s"):  # how fast this machine was, not what was built
                data.get("extra", {}).pop(measured, None)
            snapshot[rel] = data
        else:
            snapshot[rel] = storage.content_hash(str(path))
    return snapshot


def test_in_process_build_writes_the_same_tree_as_the_flow(
    helpers: Any, prefect_api: Any, tiny_model: str, sample_source: Path, tmp_path: Path
):
    from ads_core.config.build import BuildConfig
    from ads_core.pipeline.build import build

    state, flow_result = helpers.run_build(sample_source, tmp_path / "flow", score__cache=False)  # both score
    assert state.is_completed(), state.message
    params = helpers.build_params(score__cache=False)
    cfg = BuildConfig(format={"name": params["dataset"]}, score=params["score"], cluster=params["cluster"])
    result = build(str(sample_source), str(tmp_path / "out"), cfg)
    flow_tree, local_tree = tree(tmp_path / "flow"), tree(tmp_path / "out")
    assert sorted(local_tree) == sorted(flow_tree)
    for rel in flow_tree:
        assert local_tree[rel] == flow_tree[rel], rel
    final_digest = mf.read(str(tmp_path / "out" / "final")).output_hash("train")
    assert final_digest == mf.read(str(tmp_path / "flow" / "final")).output_hash("train")
    assert result.final_uri == str(tmp_path / "out" / "final" / "train.parquet")


@pytest.mark.slow
def test_weights_changed_in_place_rescore_every_row(
    helpers: Any, prefect_api: Any, sample_source: Path, tiny_model: str, tmp_path: Path
):
    import torch
    from safetensors.torch import load_file, save_file

    model = tmp_path / "policy"
    shutil.copytree(tiny_model, model)
    out = tmp_path / "out"
    cache = str(tmp_path / "row-cache")  # its own: rows of these very weights may be cached from an earlier session
    _, first = helpers.run_build(sample_source, out, score__model=str(model), score__cache_uri=cache)
    before = storage.read_parquet(first["outputs"]["merge"]).column("difficulty").to_pylist()  # before it is replaced
    weights = model / "model.safetensors"
    size = weights.stat().st_size
    tensors = load_file(str(weights))
    gen = torch.Generator().manual_seed(0)
    tensors = {
        k: v + 0.05 * torch.randn(v.shape, generator=gen).to(v.dtype) if v.is_floating_point() else v
        for k, v in tensors.items()
    }  # "fine-tuned" in place
    save_file(tensors, str(weights), metadata={"format": "pt"})
    assert weights.stat().st_size == size  # same file sizes: a size-only fingerprint would miss it

    _, second = helpers.run_build(sample_source, out, score__model=str(model), score__cache_uri=cache)
    stages = second["stages"]
    assert stages["format"] == "Cached"
    assert stages["score-shard-0"] == stages["score-shard-1"] == "Completed"
    counts = mf.read(str(out / "scores")).counts
    assert counts["rows_scored"] == 60 and counts["rows_reused"] == 0  # nothing served from the row cache
    after = storage.read_parquet(second["outputs"]["merge"]).column("difficulty").to_pylist()
    assert sum(a != b for a, b in zip(after, before, strict=True)) > 50


def row_stats_stage() -> Any:
    """A stage declared only here: row counts per cluster of the final artifact, with a UI table."""
    import polars as pl

    from ads_core.stages.base import Stage, StageContext, UIItem

    def run(ctx: StageContext, _: int | None) -> mf.Manifest:
        final = pl.from_arrow(storage.read_parquet(ctx.uri("final"), columns=["cluster_id"]))
        counts = {str(k): n for k, n in final.group_by("cluster_id").len().sort("cluster_id").iter_rows()}
        uri = ctx.uri("row_stats")
        storage.write_json(uri, counts)
        manifest = mf.Manifest(
            stage="row-stats",
            inputs={"final": mf.input_entry(ctx.uri("final"))},
            outputs={"row_stats": mf.output_entry(uri)},
            config={},
            code_version="test",
        )
        mf.write(mf.stage_dir_of(uri), manifest)
        return manifest

    def ui(ctx: StageContext, manifest: mf.Manifest) -> list[Any]:
        rows = [{"cluster_id": k, "rows": n} for k, n in storage.read_json(manifest.output_uri("row_stats")).items()]
        return [UIItem("table", "row-stats", rows, "rows per cluster")]

    return Stage("row-stats", None, ("final",), {"row_stats": "row-stats/rows.json"}, "1", run, ui=ui)


def test_a_stage_added_to_the_declarations_runs_in_build_and_in_the_flow(
    helpers: Any, prefect_api: Any, tiny_model: str, sample_source: Path, tmp_path: Path, monkeypatch: Any
):
    """No other edit: the in-process build and the flow pick the new stage up from the list alone, the flow runs
    it through the generic task (a rerun is Cached) and publishes the UI table it declares."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from ads_core.config.build import BuildConfig
    from ads_core.pipeline import stages
    from ads_core.pipeline.build import build

    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, row_stats_stage()))
    params = helpers.build_params()
    cfg = BuildConfig(format={"name": params["dataset"]}, score=params["score"], cluster=params["cluster"])
    result = build(str(sample_source), str(tmp_path / "local"), cfg)
    assert "row-stats" in result.manifests
    state, flow_result = helpers.run_build(sample_source, tmp_path / "flow")
    assert state.is_completed(), state.message
    assert flow_result["stages"]["row-stats"] == "Completed"
    local = json.loads((tmp_path / "local" / "row-stats" / "rows.json").read_text())
    assert local == json.loads((tmp_path / "flow" / "row-stats" / "rows.json").read_text())
    assert sum(local.values()) == mf.read(str(tmp_path / "flow" / "final")).counts["rows"]
    _, again = helpers.run_build(sample_source, tmp_path / "flow")
    assert again["stages"]["row-stats"] == "Cached"
    key = f"ads-{params['dataset']}-row-stats".lower().replace("_", "-")
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    assert found and found[0].type == "table"


def test_a_relative_source_and_no_dataset_name_resolve_as_in_the_flow(
    helpers: Any, prefect_api: Any, tiny_model: str, sample_source: Path, tmp_path: Path, monkeypatch: Any
):
    """build() resolves SOURCE, the dataset name and OUT as the flow does: a relative source is made absolute
    (the rows record where they came from), the name comes from the file, OUT defaults to ads-out/<name>."""
    from ads_core.config.build import BuildConfig
    from ads_core.pipeline.build import build

    params = helpers.build_params()
    flow_params = {k: v for k, v in params.items() if k != "dataset"}  # no name: both derive it from SOURCE
    from ads_prefect.flows.ads_build import ads_build

    source = tmp_path / "data" / sample_source.name  # a folder of this test's (OUT goes beside the source)
    source.parent.mkdir()
    shutil.copy(sample_source, source)
    flow_result = ads_build(source=str(source), out=str(tmp_path / "flow"), **flow_params)
    monkeypatch.chdir(source.parent)
    cfg = BuildConfig(score=params["score"], cluster=params["cluster"])
    result = build(source.name, None, cfg)  # relative source, default OUT under the working directory
    assert result.dataset == flow_result["dataset"] == source.stem
    assert result.out == str(source.parent / "ads-out" / source.stem)
    local = helpers.read_final(result.final_uri)
    files = set(local["extra_info"].struct.field("source_file").to_list())
    assert files == {source.name}  # relative to the source: the artifact does not depend on where it sits
    helpers.assert_same_rows(local, helpers.read_final(flow_result["final_uri"]))
    assert set(helpers.read_final(flow_result["final_uri"])["extra_info"].struct.field("source_file")) == files
