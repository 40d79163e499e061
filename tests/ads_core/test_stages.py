"""The declared stages: their content keys, the model fingerprint, and the in-process build's OUT tree."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.config.build import STAGE_NAMES, BuildConfig
from ads_core.models.fingerprint import MEMO_NAME
from ads_core.models.tiny import model_fingerprint
from ads_core.pipeline import stage_keys as keys
from ads_core.pipeline import stages
from ads_core.pipeline.resolve import resolve
from ads_core.stages.base import StageContext
from ads_core.storage import manifest as mf


def write_artifact(ctx: StageContext, name: str, rows: int) -> str:
    """A stage output with its manifest, as the stages write them."""
    uri = ctx.uri(name)
    storage.write_parquet(uri, pa.table({"x": list(range(rows))}))
    mf.write(
        mf.stage_dir_of(uri),
        mf.Manifest(stage=name, inputs={}, outputs={name: mf.output_entry(uri, rows)}, config={}, code_version="test"),
    )
    return uri


@pytest.fixture
def ctx(tmp_path: Path) -> StageContext:
    source = tmp_path / "data.jsonl"
    source.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    return stages.context(resolve(str(source), str(tmp_path / "out")), BuildConfig())


def test_the_stage_list_is_declared_once_in_order():
    assert tuple(s.name for s in stages.STAGES) == STAGE_NAMES
    produced = {"source"}
    for stage in stages.STAGES:  # every input is produced by an earlier stage
        assert set(stage.inputs) <= produced, stage.name
        produced |= set(stage.outputs)
        assert stage.version and stage.outputs


def test_cluster_key_follows_input_content_and_its_own_section(ctx: StageContext):
    cluster = stages.stages_by_name()["cluster"]
    write_artifact(ctx, "scores", 5)
    key = keys.stage_key(cluster, ctx)
    assert key == keys.stage_key(cluster, ctx)
    write_artifact(ctx, "scores", 6)  # other scores
    changed = keys.stage_key(cluster, ctx)
    assert changed != key
    other_k = dataclasses.replace(ctx, config=ctx.config.with_overrides({"cluster.num_clusters": 5}))
    assert keys.stage_key(cluster, other_k) != changed
    other_template = dataclasses.replace(ctx, config=ctx.config.with_overrides({"format.template": "plain"}))
    assert keys.stage_key(cluster, other_template) == changed  # another section: not this stage's business
    assert keys.stage_key(dataclasses.replace(cluster, version="99"), ctx) != changed  # a bumped version
    shutil.copytree(ctx.out, ctx.out + "-elsewhere")  # the same inputs in another OUT: the same content key
    elsewhere = dataclasses.replace(ctx, out=ctx.out + "-elsewhere")
    assert keys.stage_key(cluster, elsewhere) == changed


def test_format_key_follows_the_source_content(ctx: StageContext):
    fmt = stages.stages_by_name()["format"]
    key = keys.stage_key(fmt, ctx)
    Path(ctx.source).write_text('{"question": "1+2?", "answer": "#### 3"}\n')
    assert keys.stage_key(fmt, ctx) != key
    assert keys.source_digest("some-org/some-dataset") == "id:some-org/some-dataset"


def test_shard_keys_differ_per_shard_and_with_the_model(
    ctx: StageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\x00" * 64)
    ctx = dataclasses.replace(ctx, config=ctx.config.with_overrides({"score.model": str(model), "score.num_shards": 2}))
    write_artifact(ctx, "formatted", 4)
    score = stages.stages_by_name()["score"]
    shard_keys = [keys.stage_key(score, ctx, i) for i in range(2)]
    assert shard_keys[0] != shard_keys[1]
    (model / "model.safetensors").write_bytes(b"\x01" * 64)  # fine-tuned in place, same size
    assert keys.stage_key(score, ctx, 0) != shard_keys[0]


def test_the_model_stage_builds_a_missing_preset_with_progress_then_only_fingerprints_it(
    ctx: StageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The default model is its own step: built (tokenizer, then training steps, each with progress) when it is
    missing, and its key says so, so the build of a fresh machine never hides in the first score shard."""
    from contextlib import contextmanager

    from ads_core import models
    from ads_core.models import tiny

    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    small = models.TinyModelSpec(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
        tokenizer_vocab=300, pad_vocab_to=300, max_position_embeddings=512, train_steps=3, train_batch=2,
    )  # fmt: skip
    monkeypatch.setitem(models.TINY_PRESETS, "tiny", small)
    lines = tiny._training_lines
    monkeypatch.setattr(tiny, "_training_lines", lambda: lines(extra_lines=0))  # a quick tokenizer
    seen: list[tuple[str, int | None, str, int]] = []

    @contextmanager
    def recording(description: str, total: int | None, unit: str = "rows"):
        seen.append((description, total, unit, 0))

        def advance(n: int) -> None:
            d, t, u, done = seen[-1]
            seen[-1] = (d, t, u, done + n)

        yield advance

    stage = stages.stages_by_name()["model"]
    assert STAGE_NAMES.index("model") < STAGE_NAMES.index("score")
    absent = keys.stage_key(stage, ctx)
    assert not models.is_built(models.cached_model_dir("tiny"))  # computing the key built nothing
    ctx.progress = recording
    manifest = keys.run_stage(stage, ctx, None, absent)
    assert seen[:2] == [
        ("building the tiny model: tokenizer", None, "steps", 0),
        ("building the tiny model: training", 3, "steps", 3),  # one advance per training step
    ]
    assert manifest.counts == {"built": 1} and manifest.extra["path"] == str(models.cached_model_dir("tiny"))
    written = storage.read_json(ctx.uri("model"))
    assert written == {"model": "default", "preset": "tiny", "fingerprint": model_fingerprint("default")}
    built = keys.stage_key(stage, ctx)
    assert built != absent and keys.reusable(stage, ctx, None, built) is None  # the model is there now
    seen.clear()
    again = keys.run_stage(stage, ctx, None, built)
    assert again.counts == {"built": 0} and [s[0] for s in seen] == ["fingerprinting the model default"]
    assert keys.reusable(stage, ctx, None, built) is not None


def test_model_fingerprint_hashes_weight_content_and_memoises_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m"
    model.mkdir()
    weights = model / "model.safetensors"
    (model / "config.json").write_text('{"hidden_size": 8}')
    weights.write_bytes(b"a" * 1000)
    first = model_fingerprint(str(model))
    assert (tmp_path / "cache" / MEMO_NAME).is_file()
    assert model_fingerprint(str(model)) == first
    stat = weights.stat()
    weights.write_bytes(b"b" * 1000)  # same size; rewritten, so a new mtime
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert model_fingerprint(str(model)) != first
    # While size and mtime are unchanged, the memoised digest is used and the file is not read again.
    reads: list[str] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: reads.append(str(p)) or real_open(p, *a, **k))
    model_fingerprint(str(model))
    assert str(weights) not in reads
    assert model_fingerprint("org/not-cached-model").startswith("hub:org/not-cached-model")


def test_run_stage_stamps_its_key_and_reusable_checks_it(ctx: StageContext):
    merge = stages.stages_by_name()["merge"]
    ctx = dataclasses.replace(ctx, config=ctx.config.with_overrides({"score.num_shards": 1}))
    formatted = write_artifact(ctx, "formatted", 0)
    shard = ctx.uri("score_shard", 0)
    storage.write_parquet(shard, pa.table({"sample_id": pa.array([], pa.int64())}))
    mf.write(
        mf.stage_dir_of(shard),
        mf.Manifest(
            stage="s",
            inputs={},
            outputs={"scores": mf.output_entry(shard)},
            config={},
            code_version="t",
            counts={"rows_scored": 0},
        ),
    )
    assert keys.reusable(merge, ctx, None, keys.stage_key(merge, ctx)) is None  # no merge output yet
    fake = mf.Manifest(stage="merge", inputs={}, outputs={}, config={"num_shards": 1}, code_version="t")
    uri = ctx.uri("scores")

    def run(c: StageContext, _: int | None) -> mf.Manifest:
        storage.write_parquet(uri, pa.table({"x": [1]}))
        fake.outputs = {"scores": mf.output_entry(uri)}
        mf.write(mf.stage_dir_of(uri), fake)
        return fake

    stub = dataclasses.replace(merge, run=run)
    key = keys.stage_key(stub, ctx)
    manifest = keys.run_stage(stub, ctx, None, key)
    assert manifest.extra["stage_key"] == key
    assert keys.reusable(stub, ctx, None, key) is not None
    other = dataclasses.replace(stub, version="99")
    assert keys.reusable(other, ctx, None, keys.stage_key(other, ctx)) is None  # another key
    storage.write_parquet(formatted, pa.table({"x": [1, 2]}))  # the input changed (its manifest now lies)
    Path(mf.stage_dir_of(formatted), "manifest.json").unlink()
    assert keys.reusable(stub, ctx, None, keys.stage_key(stub, ctx)) is None


def test_force_from_selects_that_stage_and_every_later_one():
    from ads_core.config.build import RunConfig

    assert stages.stages_from("cluster") == {"cluster", "sort", "report"}
    assert stages.stages_from("model") == set(STAGE_NAMES) - {"format"}
    assert stages.stages_from(None) == stages.stages_from("none") == set()
    # a plain choice (a dropdown in the Prefect UI): none or a stage name; null, the old default, still means none
    assert RunConfig().force_from == RunConfig(force_from=None).force_from == "none"
    schema = RunConfig.model_json_schema()["properties"]["force_from"]
    assert schema["enum"] == ["none", *STAGE_NAMES] and "anyOf" not in schema
    with pytest.raises(ValueError, match="force_from"):
        RunConfig(force_from="scoring")


def test_run_result_storage_of_the_removed_prefect_cache_is_refused_in_one_line():
    """Deployments and YAML files may still set it: they get one line saying why, not a silently ignored key."""
    from pydantic import ValidationError

    from ads_core.config.base import error_line
    from ads_core.config.build import BuildConfig

    with pytest.raises(ValidationError) as refused:
        BuildConfig.model_validate({"run": {"result_storage": "remote-file-system/ads-results"}})
    assert error_line(refused.value) == (
        "run: result_storage is no longer an option: OUT's manifests are the build's one cache and Prefect keeps no "
        "records; remove it"
    )
