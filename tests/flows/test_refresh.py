"""Incremental refresh through the `ads-build` flow: only new or edited rows are scored, untouched rows keep
their difficulty bit for bit and their cluster id, and unchanged content costs no scoring at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ads_core import storage
from ads_core.common import defaults
from ads_core.storage import manifest as mf


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    return helpers


def sample_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    lines = Path(defaults.sample_path()).read_text().splitlines()[start : start + n]
    return [json.loads(line) for line in lines]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scores_by_id(out: Path) -> dict[int, tuple[float, list[float]]]:
    table = storage.read_parquet(str(out / "scores" / "scores.parquet")).to_pylist()
    return {r["sample_id"]: (r["difficulty"], r["embedding"]) for r in table}


def clusters_by_id(out: Path) -> dict[int, int]:
    df = pl.read_parquet(out / "clusters" / "assignments.parquet", columns=["sample_id", "cluster_id"])
    return dict(zip(df["sample_id"].to_list(), df["cluster_id"].to_list(), strict=True))


@pytest.fixture(scope="module")
def refreshed(h: Any, prefect_api: Any, tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 60-row build, then a refresh with 1 row deleted, 1 solution edited and 3 rows appended."""
    root = tmp_path_factory.mktemp("refresh")
    cache = {"score__cache_uri": str(root / "score-cache")}
    rows = sample_rows(60)
    source = write_rows(root / "data.jsonl", rows)
    out = root / "out"
    _, cold = h.run_build(source, out, **cache)
    before = {"scores": scores_by_id(out), "clusters": clusters_by_id(out)}

    edited = dict(rows[10])
    edited["answer"] = edited["answer"].replace("####", "So the answer is as computed.\n####")
    new_rows = rows[:5] + rows[6:10] + [edited] + rows[11:] + sample_rows(3, start=60)  # row 5 deleted
    write_rows(source, new_rows)
    _, refresh = h.run_build(source, out, **cache)
    return {
        "root": root,
        "out": out,
        "source": source,
        "cache": cache,
        "cold": cold,
        "refresh": refresh,
        "before": before,
        "edited_question": edited["question"],
    }


def test_a_refresh_scores_exactly_the_edited_and_appended_rows(refreshed: dict[str, Any]):
    out = refreshed["out"]
    counts = mf.read(str(out / "scores")).counts
    assert counts["rows_scored"] == 4  # 1 edited + 3 appended
    assert counts["rows_scored"] + counts["rows_reused"] == mf.read(str(out / "formatted")).counts["rows_out"] == 62
    summary = refreshed["refresh"]["refresh"]
    assert (summary["rows_added"], summary["rows_removed"], summary["rows_changed"]) == (3, 1, 1)
    assert summary["rows_scored"] == 4 and summary["rows_reused"] == 58
    assert any(
        line.startswith("refresh: 62 rows: 3 added, 1 removed, 1 edited")
        for line in refreshed["refresh"]["summary_lines"]
    )


def test_untouched_rows_keep_their_scores_bit_for_bit_and_their_cluster_ids(refreshed: dict[str, Any]):
    from ads_core.common.text import sample_id_of

    before, after = refreshed["before"], scores_by_id(refreshed["out"])
    edited = sample_id_of(refreshed["edited_question"])
    untouched = [sid for sid in before["scores"] if sid in after and sid != edited]
    assert len(untouched) == 58
    assert all(after[sid] == before["scores"][sid] for sid in untouched)  # exact: floats and embeddings
    assert after[edited][0] != before["scores"][edited][0]
    clusters = clusters_by_id(refreshed["out"])
    common = [sid for sid in before["clusters"] if sid in clusters]
    kept = sum(clusters[sid] == before["clusters"][sid] for sid in common) / len(common)
    assert kept >= 0.95
    refresh = mf.read(str(refreshed["out"] / "clusters")).extra["refresh"]
    assert refresh["path"] == "warm_start" and refresh["kept_id_share"] >= 0.95


def test_a_no_change_rerun_and_the_same_content_elsewhere_score_nothing(h: Any, refreshed: dict[str, Any]):
    _, rerun = h.run_build(refreshed["source"], refreshed["out"], **refreshed["cache"])
    assert set(rerun["stages"].values()) == {"Cached"}
    assert rerun["refresh"]["rows_scored"] == 0 and rerun["refresh"]["rows_added"] == 0

    moved = refreshed["root"] / "elsewhere" / "copy.jsonl"
    moved.parent.mkdir()
    shutil.copy(refreshed["source"], moved)
    _, other = h.run_build(moved, refreshed["out"], **refreshed["cache"])
    assert other["refresh"]["rows_scored"] == 0
    assert (other["refresh"]["rows_added"], other["refresh"]["rows_removed"], other["refresh"]["rows_changed"]) == (
        0,
        0,
        0,
    )
    refresh = mf.read(str(refreshed["out"] / "clusters")).extra["refresh"]
    assert refresh["path"] == "warm_start" and refresh["kept_id_share"] >= 0.95  # the same rows, the same ids


def test_a_corrupt_cache_part_is_detected_and_its_rows_rescored(h: Any, refreshed: dict[str, Any], tmp_path: Path):
    parts = sorted(Path(refreshed["cache"]["score__cache_uri"]).rglob("part-*.parquet"))
    assert parts
    for part in parts:
        part.write_bytes(part.read_bytes()[:-10] + b"0123456789")  # same size, other bytes
    out = tmp_path / "out"
    _, result = h.run_build(refreshed["source"], out, **refreshed["cache"])
    assert result["refresh"]["rows_scored"] == 62  # nothing trusted from the damaged parts
    assert not any(p.exists() for p in parts)
