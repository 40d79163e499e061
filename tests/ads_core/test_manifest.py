"""manifest.json: written beside every artifact, and trusted only while every output it lists is intact."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator

import fsspec
import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.ingest import convert as format_module
from ads_core.storage import manifest as mf


@pytest.fixture(params=["local", "memory"])
def stage_dir(request, tmp_path) -> Iterator[str]:
    if request.param == "local":
        yield str(tmp_path / "stage")
    else:
        uri = f"memory://ads-manifest-{uuid.uuid4().hex}/stage"
        yield uri
        fs = fsspec.filesystem("memory")
        if fs.exists(uri):
            fs.rm(uri, recursive=True)


def write_stage(stage_dir: str) -> mf.Manifest:
    """A stage with two outputs and an input, the way a real stage writes it: outputs first, manifest last."""
    source = storage.join(stage_dir + "-in", "a.jsonl")
    storage.write_bytes(source, b'{"question": "q", "answer": "1"}\n')
    table_uri = storage.join(stage_dir, "train.parquet")
    storage.write_parquet(table_uri, pa.table({"x": [1, 2, 3]}))
    notes_uri = storage.join(stage_dir, "notes.json")
    storage.write_json(notes_uri, {"ok": True})
    manifest = mf.Manifest(
        stage="test",
        inputs={"source": mf.input_entry(source)},
        outputs={"train": mf.output_entry(table_uri, rows=3), "notes": mf.output_entry(notes_uri)},
        config={"batch_rows": 10},
        code_version="0.0.0+test",
        counts={"rows_in": 3},
    )
    mf.write(stage_dir, manifest)
    return manifest


def test_write_then_read_round_trips(stage_dir):
    manifest = write_stage(stage_dir)
    assert storage.exists(storage.join(stage_dir, mf.MANIFEST_NAME))
    assert mf.read(stage_dir).to_dict() == manifest.to_dict()
    assert mf.read(stage_dir).output_hash("train") == storage.content_hash(storage.join(stage_dir, "train.parquet"))
    assert mf.read(stage_dir).outputs["train"]["rows"] == 3


def test_verify_returns_the_manifest_when_intact(stage_dir):
    manifest = write_stage(stage_dir)
    verified = mf.verify(stage_dir)
    assert verified is not None
    assert verified.to_dict() == manifest.to_dict()


def test_verify_rejects_a_changed_output(stage_dir):
    write_stage(stage_dir)
    storage.write_parquet(storage.join(stage_dir, "train.parquet"), pa.table({"x": [1, 2, 4]}))
    assert mf.verify(stage_dir) is None


def test_verify_rejects_a_deleted_output(stage_dir):
    write_stage(stage_dir)
    fs, path = storage.get_fs(storage.join(stage_dir, "notes.json"))
    fs.rm(path)
    assert mf.verify(stage_dir) is None


def test_verify_rejects_a_missing_manifest(stage_dir):
    assert mf.verify(stage_dir) is None


def test_verify_rejects_a_corrupt_manifest(stage_dir):
    write_stage(stage_dir)
    storage.write_bytes(storage.join(stage_dir, mf.MANIFEST_NAME), b'{"stage": "test", "outp')
    assert mf.verify(stage_dir) is None


@pytest.mark.parametrize("entry", [{"uri": "x"}, {"sha256": "sha256:00"}, "not-a-dict"])
def test_verify_rejects_a_malformed_output_entry(stage_dir, entry):
    manifest = write_stage(stage_dir)
    broken = dataclasses.replace(manifest, outputs={**manifest.outputs, "other": entry})
    storage.write_json(storage.join(stage_dir, mf.MANIFEST_NAME), broken.to_dict())
    assert mf.verify(stage_dir) is None


def test_from_dict_ignores_unknown_keys():
    data = {"stage": "s", "inputs": {}, "outputs": {}, "config": {}, "code_version": "v", "future_field": 1}
    assert mf.Manifest.from_dict(data).stage == "s"


def test_input_entry_hashes_a_directory_by_content(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"q": 1}\n')
    before = mf.input_entry(str(tmp_path))
    assert before == {"uri": str(tmp_path), "sha256": storage.tree_hash(str(tmp_path))}
    (tmp_path / "a.jsonl").write_text('{"q": 2}\n')
    assert mf.input_entry(str(tmp_path))["sha256"] != before["sha256"]
    assert mf.input_entry(str(tmp_path), sha256="sha256:given")["sha256"] == "sha256:given"


def test_created_at_is_an_utc_timestamp():
    manifest = mf.Manifest(stage="s", inputs={}, outputs={}, config={}, code_version="v")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", manifest.created_at)


def test_code_version_is_the_package_version_plus_the_explicit_stage_version():
    version = mf.version_of("format", format_module.VERSION)
    assert re.fullmatch(r"\d+\.\d+\.\d+\+format\.v\d+", version)
    assert mf.version_of("format", "3") != mf.version_of("format", "4") != mf.version_of("sort", "4")


def test_config_dict_accepts_dataclasses_dicts_and_none():
    assert mf.config_dict(format_module.FormatConfig(name="x"))["name"] == "x"
    assert mf.config_dict({"a": 1}) == {"a": 1}
    assert mf.config_dict(None) == {}


def test_a_manifest_written_from_a_relative_folder_names_absolute_files(tmp_path, monkeypatch):
    """Regression (issue 50): `bench/study.py --smoke` from a fresh clone's root wrote the DOTS predictor's manifest
    with paths relative to the working directory; read back by its absolute folder, it was 'not in this folder'."""
    monkeypatch.chdir(tmp_path)
    folder = "out/predictor"
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "weights.bin").write_bytes(b"w")
    entry = mf.Manifest(
        stage="s", inputs={}, outputs={"weights": mf.output_entry(f"{folder}/weights.bin")}, config={}, code_version="1"
    )
    mf.write(folder, entry)
    assert mf.read(folder).outputs["weights"]["uri"] == str(tmp_path / folder / "weights.bin")
    assert mf.why_not_intact(str(tmp_path / folder)) == (mf.read(folder), None)
    assert mf.why_not_intact(folder)[1] is None
    assert mf.anchored("s3://bucket/x") == "s3://bucket/x" and mf.anchored("/abs/x") == "/abs/x"
