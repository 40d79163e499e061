"""Eval sets in verl's schema from the packaged copies (ads_core/data/eval), and the decontamination check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.common.errors import InputError
from ads_core.common.text import normalize_question
from ads_core.config.build import FormatConfig
from ads_core.evaluation.sets import catalog as ev
from ads_core.evaluation.sets import decontam
from ads_core.evaluation.sets.writer import write_eval_sets
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.schema import OUTPUT_SCHEMA, TEMPLATES
from ads_core.train.reward import compute_score


def packaged_rows(name: str) -> list[dict]:
    path = ev.packaged_data_dir() / ev.EVAL_SETS[name]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_writes_the_four_packaged_sets_in_verl_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ADS_EVAL_DATA_DIR", raising=False)
    results = write_eval_sets(str(tmp_path))  # the packaged sets
    assert {k: v.rows for k, v in results.items()} == {"math500": 500, "aime24": 30, "aime25": 30, "amc23": 40}
    for name in results:
        table = pq.read_table(tmp_path / "eval" / f"{name}.parquet")
        assert table.schema.equals(OUTPUT_SCHEMA, check_metadata=False)
        assert set(table.column("data_source").to_pylist()) == {name}  # verl groups val metrics by it
        row = table.slice(0, 1).to_pylist()[0]
        assert row["prompt"][0]["role"] == "user" and row["prompt"][0]["content"].endswith("<think>")
        assert row["extra_info"]["split"] == "test"
        # the reward accepts each set's own ground truth
        assert (
            compute_score(
                name, f"\\boxed{{{row['reward_model']['ground_truth']}}}", row["reward_model"]["ground_truth"]
            )["acc"]
            == 1.0
        )
    amc = pq.read_table(tmp_path / "eval" / "amc23.parquet").slice(0, 1).to_pylist()[0]
    assert amc["reward_model"]["ground_truth"] == "27"  # 27.0 in the file
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    assert manifest["template_string"] == TEMPLATES["ads_think"] and set(manifest["sets"]) == set(results)
    assert ev.existing_eval_sets(str(tmp_path)) == {k: str(tmp_path / "eval" / f"{k}.parquet") for k in sorted(results)}


def test_the_packaged_sets_ship_inside_the_package_with_license_notes():
    import ads_core

    base = ev.packaged_data_dir()
    assert base.is_relative_to(Path(ads_core.__file__).parent)  # travels with the package, not the checkout
    readme = (base / "README.md").read_text()
    assert all(f"`{path}`" in readme for path in ev.EVAL_SETS.values())
    assert "MIT License" in (base / "math500" / "LICENSE").read_text() and "public competition problems" in readme
    for name, count in {"math500": 500, "aime24": 30, "amc23": 40}.items():
        rows = packaged_rows(name)
        assert len(rows) == count and all(r["problem"].strip() and str(r["answer"]).strip() for r in rows)


def test_the_packaged_sets_format_like_the_publishers_files(tmp_path: Path, shared_data: Path):
    """The trimmed AIME/AMC copies (no solutions) give the same questions and ground truths as the originals."""
    ours = write_eval_sets(str(tmp_path / "ours"))
    theirs = write_eval_sets(str(tmp_path / "theirs"), data_dir=shared_data)
    for name in ev.EVAL_SETS:
        a, b = pq.read_table(ours[name].uri).to_pylist(), pq.read_table(theirs[name].uri).to_pylist()
        assert [(r["prompt"], r["reward_model"], r["sample_id"]) for r in a] == [
            (r["prompt"], r["reward_model"], r["sample_id"]) for r in b
        ], name


def test_the_cli_works_from_anywhere(tmp_path: Path):
    """A fresh install: cwd with no ../shared, no ADS_EVAL_DATA_DIR; all three sets with their row counts."""
    cwd = tmp_path / "elsewhere" / "project"
    cwd.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "ADS_EVAL_DATA_DIR"}
    code = "from ads_cli.main import app; app()"
    done = subprocess.run(
        [sys.executable, "-c", code, "eval-sets", "--out", "out"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    counts = {n: pq.read_metadata(cwd / "out" / "eval" / f"{n}.parquet").num_rows for n in ev.EVAL_SETS}
    assert counts == {"math500": 500, "aime24": 30, "aime25": 30, "amc23": 40}
    manifest = json.loads((cwd / "out" / "eval" / "manifest.json").read_text())
    assert {k: v["rows"] for k, v in manifest["sets"].items()} == counts
    assert all(Path(v["source"]).is_relative_to(ev.packaged_data_dir()) for v in manifest["sets"].values())


def test_the_data_dir_can_be_overridden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    mine = tmp_path / "mine" / "aime24"
    mine.mkdir(parents=True)
    (mine / "test.jsonl").write_text(json.dumps({"problem": "What is 2+3?", "answer": "5"}) + "\n")
    monkeypatch.setenv("ADS_EVAL_DATA_DIR", str(tmp_path / "mine"))
    assert write_eval_sets(str(tmp_path / "a"), names=["aime24"])["aime24"].rows == 1
    # --data-dir beats the environment
    assert write_eval_sets(str(tmp_path / "b"), names=["aime24"], data_dir=ev.packaged_data_dir())["aime24"].rows == 30
    monkeypatch.setenv("ADS_EVAL_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="ADS_EVAL_DATA_DIR=.*nowhere is not a directory"):
        write_eval_sets(str(tmp_path / "c"), names=["aime24"])


def test_uses_the_training_template_and_user_paths(tmp_path: Path):
    gsm = ev.packaged_data_dir().parent / "gsm8k_sample.jsonl"
    format_dataset(str(gsm), str(tmp_path), FormatConfig(template="boxed"))
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n")
    results = write_eval_sets(str(tmp_path), sources={"tiny": str(mine)}, names=["aime24"])
    assert set(results) == {"tiny", "aime24"}
    row = pq.read_table(results["tiny"].uri).to_pylist()[0]
    assert row["prompt"][0]["content"] == TEMPLATES["boxed"].replace("{question}", "What is 1+1?")


def test_bad_requests_are_input_errors(tmp_path: Path):
    with pytest.raises(InputError, match="unknown eval set"):
        write_eval_sets(str(tmp_path), names=["gpqa"])
    with pytest.raises(InputError, match=r"eval set 'minerva' not found: minerva: Minerva Math .* put it at DATA/"):
        write_eval_sets(str(tmp_path), names=["minerva"], data_dir=tmp_path)  # never shipped: CC BY-NC-SA
    with pytest.raises(InputError, match="lowercase"):
        write_eval_sets(str(tmp_path), sources={"Bad Name": "x.jsonl"})


def test_decontamination_reports_and_drops_matching_rows(tmp_path: Path):
    write_eval_sets(str(tmp_path), names=["math500", "amc23"])
    math = packaged_rows("math500")[:3]
    rows = [
        {"problem": "  " + math[0]["problem"].upper() + " ", "answer": math[0]["answer"]},  # case/space only
        {"problem": math[1]["problem"], "answer": "x"},
        {"problem": "A fresh question about 17 apples?", "answer": "17"},
    ]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train = tmp_path / "train_out"
    format_dataset(str(src), str(train), FormatConfig(name="mine"))
    train_uri = str(train / "formatted" / "train.parquet")
    assert normalize_question(rows[0]["problem"]) == normalize_question(math[0]["problem"])

    report = decontam.decontaminate(train_uri, ev.existing_eval_sets(str(tmp_path)))
    assert report.matches == {"amc23": 0, "math500": 2} and report.rows == [0, 1] and report.output_uri is None
    clean = tmp_path / "clean.parquet"
    report = decontam.decontaminate(train_uri, ev.existing_eval_sets(str(tmp_path)), drop_to=str(clean))
    kept = pq.read_table(clean)
    assert kept.num_rows == 1 and kept.column("extra_info").to_pylist()[0]["question"].startswith("A fresh")


def test_eval_sets_cli_with_decontamination(tmp_path: Path):
    final = tmp_path / "final"
    final.mkdir()
    aime = packaged_rows("aime24")
    near = "From a practice sheet: " + aime[3]["problem"].replace("Find", "Determine", 1)  # not an exact copy
    questions = [aime[0]["problem"], "unrelated", near]
    pq.write_table(pa.table({"extra_info": [{"question": q} for q in questions]}), final / "train.parquet")
    result = CliRunner().invoke(app, ["eval-sets", "--out", str(tmp_path), "--names", "aime24,amc23", "--drop"])
    assert result.exit_code == 0, result.output
    assert "2 of 3 training rows match" in result.output
    assert "aime24: 2 (exact 1, 13-gram 1)" in result.output and "row 2 ~ aime24 row 3 (ngram" in result.output
    report = json.loads((tmp_path / "eval" / ev.REPORT_NAME).read_text())
    assert report["matches"] == {"aime24": 2, "amc23": 0} and report["rows"] == [0, 2]
    assert [(h["row"], h["eval_row"], h["method"]) for h in report["hits"]["aime24"]] == [
        (0, 0, "exact"),
        (2, 3, "ngram"),
    ]
    assert report["hits"]["aime24"][1]["train_text"] == near
    assert pq.read_metadata(tmp_path / "eval" / "train_decontaminated.parquet").num_rows == 1
    rejects = pq.read_table(tmp_path / "eval" / "train_decontaminated.rejects.parquet").to_pylist()
    assert [(r["source_row"], r["reason"]) for r in rejects] == [(0, "contaminated"), (2, "contaminated")]
    assert set(ev.existing_eval_sets(str(tmp_path))) == {"aime24", "amc23"}  # the cleaned copy isn't an eval set


def test_train_eval_set_takes_what_ads_eval_takes(tmp_path: Path):
    from ads_core.train.artifact import ArtifactError, ArtifactInfo
    from ads_core.train.plan import resolve_eval_sets

    raw = tmp_path / "held.jsonl"
    raw.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(3))
    )
    info = ArtifactInfo(str(tmp_path / "train.parquet"), 3, 1, 3, 3.0, 3, None, None)
    found = resolve_eval_sets([str(raw), f"mine={raw}"], info, str(tmp_path / "run" / "data"))
    assert sorted(found) == ["held", "mine"]
    assert found["held"] == str(tmp_path / "run" / "data" / "eval" / "held.parquet")
    table = pq.read_table(found["mine"])
    assert table.column("data_source").to_pylist() == ["mine"] * 3
    assert [rm["ground_truth"] for rm in table.column("reward_model").to_pylist()] == ["1", "2", "3"]
    with pytest.raises(ArtifactError, match=r"eval set nope=.*/missing.jsonl: no such file"):
        resolve_eval_sets([f"nope={tmp_path / 'missing.jsonl'}"], info, None)
