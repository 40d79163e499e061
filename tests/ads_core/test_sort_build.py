"""The sort stage's invariants, and the whole in-process build on real data."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core import storage
from ads_core.config.build import BuildConfig, ClusterConfig, ScoreConfig
from ads_core.pipeline.build import build
from ads_core.stages.sort import InvariantError, check_invariants, sort_rows


def _frames(difficulties: list[float], clusters: list[int]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    n = len(difficulties)
    ids = [1000 + 7 * i for i in range(n)]
    formatted = pl.DataFrame(
        {
            "data_source": ["t"] * n,
            "extra_info": [{"index": i, "sample_id": s, "question": f"q{i}"} for i, s in enumerate(ids)],
            "sample_id": ids,
        }
    )
    scores = pl.DataFrame({"sample_id": ids, "difficulty": difficulties, "truncated": [False] * n})
    assignments = pl.DataFrame({"sample_id": ids, "cluster_id": clusters}, schema_overrides={"cluster_id": pl.Int32})
    return formatted, scores, assignments


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0]), st.integers(0, 4)), min_size=1, max_size=60))
def test_sorted_rows_meet_the_invariants(pairs):
    formatted, scores, assignments = _frames([p[0] for p in pairs], [p[1] for p in pairs])
    df = sort_rows(formatted, scores, assignments)
    check_invariants(df, formatted.height)
    # ties in difficulty are broken by sample_id, so the order is fully determined
    keys = df.select("cluster_id", "difficulty", "sample_id").rows()
    assert keys == sorted(keys)
    info = df["extra_info"].struct.unnest()
    assert (info["cluster_id"] == df["cluster_id"]).all()
    assert (info["rank_in_cluster"] == df["rank_in_cluster"]).all()
    assert (info["difficulty"] == df["difficulty"]).all()
    assert info["index"].to_list() == list(range(df.height))
    assert info["question"].null_count() == 0  # the original extra_info fields survive


def test_broken_tables_are_refused():
    formatted, scores, assignments = _frames([1.0, 2.0, 3.0], [0, 0, 1])
    df = sort_rows(formatted, scores, assignments)
    with pytest.raises(InvariantError, match="rows"):
        check_invariants(df, 4)
    swapped = df.with_columns(pl.Series("difficulty", [2.0, 1.0, 3.0]))
    with pytest.raises(InvariantError, match="invariants"):
        check_invariants(swapped, 3)
    gap = df.with_columns(pl.Series("rank_in_cluster", [0, 2, 0]))
    with pytest.raises(InvariantError):
        check_invariants(gap, 3)
    with pytest.raises(InvariantError, match="no score"):
        sort_rows(formatted, scores.head(2), assignments)


def test_build_on_math500_end_to_end(tmp_path: Path, data_dir: Path, tiny_model_dir: Path):
    cfg = BuildConfig(score=ScoreConfig(max_length=256, num_shards=2), cluster=ClusterConfig(num_clusters=16))
    result = build(str(data_dir / "math500" / "test.jsonl"), str(tmp_path), cfg)
    final = pl.from_arrow(storage.read_parquet(result.final_uri))
    check_invariants(final, 500)
    assert final["cluster_id"].n_unique() == 16
    expected = {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
        "sample_id",
        "cluster_id",
        "rank_in_cluster",
        "cluster_size",
        "difficulty",
    }
    assert expected <= set(final.columns)
    assert result.manifest("final").extra["policy_model"] == str(tiny_model_dir)
    # the ground truth survives formatting, scoring, clustering and sorting
    answers = dict(zip(final["sample_id"], final["reward_model"].struct.field("ground_truth"), strict=True))
    formatted = pl.from_arrow(storage.read_parquet(result.manifest("formatted").output_uri("train")))
    assert answers == dict(
        zip(formatted["sample_id"], formatted["reward_model"].struct.field("ground_truth"), strict=True)
    )


@pytest.mark.slow  # a real `ads build` process: imports, a temporary Prefect server, 300 rows
def test_ads_build_cli_with_no_arguments(tmp_path: Path, tiny_model_dir: Path, prefect_home_copy: Any):
    """A real process, as users run it, with no Prefect setup: ephemeral mode, its temporary server's home under
    the ADS cache dir (not HOME), logging to real streams until exit; the last line names the run.

    It runs as the setup's `ads build` would run a second time: the setup's model, scored rows and migrated
    Prefect database are copied in when there are any (a fresh database is `ads server`'s test, tests/browser)."""
    cache, home, work = tmp_path / "cache", tmp_path / "home", tmp_path / "work"
    shutil.copytree(tiny_model_dir, cache / "models" / tiny_model_dir.name)  # the default model, not rebuilt
    setup = tiny_model_dir.parents[1]
    if (setup / "score-cache").is_dir():  # the rows the setup's `ads build` scored
        shutil.copytree(setup / "score-cache", cache / "score-cache")
    prefect_home_copy(setup / "prefect", cache / "prefect")  # its Prefect database, migrated, if there is one
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(COLUMNS="200", ADS_CACHE_DIR=str(cache), HOME=str(home))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ads")), "build"],  # exactly the setup's build: its rows are cached
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    final = pl.from_arrow(storage.read_parquet(str(work / "ads-out" / "gsm8k_sample" / "final" / "train.parquet")))
    check_invariants(final, 300)
    assert "difficulty" in output and "clusters" in output and "ephemeral mode" in output
    assert "Traceback" not in output and "Logging error" not in output
    assert (work / "ads-out" / "gsm8k_sample" / "report" / "build_report.png").is_file()
    assert not (home / ".prefect").exists()
    last = output.strip().splitlines()[-1]  # not Prefect's "Stopping temporary server", printed at exit before
    assert last.startswith("run build-gsm8k_sample-") and "ephemeral mode" in last, output[-2000:]
    run_name = last.split()[1]
    with sqlite3.connect(cache / "prefect" / "prefect.db") as db:  # the run is recorded in the cache dir's home
        states = db.execute("SELECT state_type FROM flow_run WHERE name = ?", (run_name,)).fetchall()
    assert states == [("COMPLETED",)], (run_name, states)


def test_ads_build_bad_source_is_one_error_line(tmp_path: Path):
    result = CliRunner().invoke(app, ["build", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output


def test_the_same_source_in_two_folders_builds_the_same_artifact(tmp_path: Path, data_dir: Path, tiny_model_dir: Path):
    """Regression (issue 50): rows recorded the source's absolute path, so the same content in two folders gave two
    artifact hashes and two stage keys. Where the source sits is provenance, recorded in the format manifest."""
    rows = (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:24]
    cfg = BuildConfig(score=ScoreConfig(max_length=128), cluster=ClusterConfig(num_clusters=2))
    results = []
    for folder in ("here", "there/deeper"):
        source = tmp_path / folder / "math.jsonl"
        source.parent.mkdir(parents=True)
        source.write_text("\n".join(rows) + "\n")
        results.append(build(str(source), str(tmp_path / "out" / folder.replace("/", "-")), cfg))
    finals = [r.manifest("final") for r in results]
    assert [m["sha256"] for m in finals[0].outputs.values()] == [m["sha256"] for m in finals[1].outputs.values()]
    for stage in ("formatted", "scores", "final"):
        keys = [r.manifest(stage).extra["stage_key"] for r in results]
        assert keys[0] == keys[1], stage
    sources = [r.manifest("formatted").inputs["source"]["uri"] for r in results]
    assert sources == [str(tmp_path / "here" / "math.jsonl"), str(tmp_path / "there/deeper" / "math.jsonl")]
