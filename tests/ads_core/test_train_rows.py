"""Rows checked before training (issue: training that never loses a step, group 5): each bad row from the attack
list is refused by `ads train --dry-run` in one line naming the row and the field, exit 2; a good artifact passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.train.artifact import ArtifactError, validate_artifact
from ads_core.train.rows_check import RowError, check_sampler_columns

CLUSTERS = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2]
RANKS = [0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4]


def rows(**change: Any) -> dict[str, list[Any]]:
    """Columns of a valid 12-row artifact (3 clusters of 3, 4 and 5 rows), with CHANGE applied."""
    n = len(CLUSTERS)
    cols: dict[str, list[Any]] = {
        "data_source": ["t"] * n,
        "prompt": [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(n)],
        "reward_model": [{"style": "rule", "ground_truth": str(i + 1)} for i in range(n)],
        "extra_info": [{"sample_id": 100 + i, "index": i, "cluster_id": c} for i, c in enumerate(CLUSTERS)],
        "sample_id": [100 + i for i in range(n)],
        "cluster_id": list(CLUSTERS),
        "rank_in_cluster": list(RANKS),
        "cluster_size": [CLUSTERS.count(c) for c in CLUSTERS],
    }
    cols.update(change)
    return cols


def write(tmp_path: Path, cols: dict[str, list[Any]], name: str = "train.parquet") -> Path:
    types = {"sample_id": pa.int64(), "cluster_id": pa.int64(), "cluster_size": pa.int64()}
    rank_type = pa.float64() if any(isinstance(r, float) for r in cols["rank_in_cluster"]) else pa.int64()
    table = pa.table(
        {k: pa.array(v, type=rank_type if k == "rank_in_cluster" else types.get(k)) for k, v in cols.items()}
    )
    path = tmp_path / name
    pq.write_table(table, path)
    return path


def dry_run(artifact: Path, tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["train", str(artifact), "--dry-run", "--model", str(tmp_path), "--run-dir", str(tmp_path / "run")]
    )
    return result.exit_code, result.output


def test_a_good_artifact_passes(tmp_path: Path):
    info = validate_artifact(str(write(tmp_path, rows())))
    assert (info.rows, info.clusters, info.cluster_size_min, info.cluster_size_max) == (12, 3, 3, 5)


def bad_prompt(row: int, messages: list[dict[str, Any]]) -> dict[str, list[Any]]:
    prompt = rows()["prompt"]
    prompt[row] = messages
    return {"prompt": prompt}


def bad_truth(row: int, value: str | None) -> dict[str, list[Any]]:
    reward = rows()["reward_model"]
    reward[row] = {"style": "rule", "ground_truth": value}
    return {"reward_model": reward}


def ranks(changes: dict[int, float]) -> dict[str, list[Any]]:
    r: list[Any] = list(RANKS)
    for row, value in changes.items():
        r[row] = value
    return {"rank_in_cluster": r}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (bad_prompt(4, []), "row 4: field 'prompt' is empty (no messages)"),
        (
            bad_prompt(7, [{"role": "system", "content": "be brief"}, {"role": "user", "content": None}]),
            "row 7: field 'prompt' message 1 has no content",
        ),
        (bad_prompt(2, [{"role": "user", "content": "  "}]), "row 2: field 'prompt' has no text"),
        (bad_truth(5, None), "row 5: field 'reward_model.ground_truth' is null"),
        (bad_truth(9, " "), "row 9: field 'reward_model.ground_truth' is empty"),
        (bad_truth(0, "[]"), "row 0: field 'reward_model.ground_truth' is empty"),
        (ranks({4: -1}), "row 4: field 'rank_in_cluster' is negative"),
        (ranks({8: 1.5}), "row 8: field 'rank_in_cluster' is 1.5, not a whole number"),
        (ranks({10: 7}), "row 10: field 'rank_in_cluster' is 7, outside 0..4 for cluster 2's 5 rows"),
        ({"rank_in_cluster": [0] * 12}, "row 1: field 'rank_in_cluster' repeats rank 0 in cluster 0"),
        ({"cluster_size": [3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 5]}, "row 10: field 'cluster_size' is 6, but cluster 2"),
    ],
)
def test_each_bad_row_is_refused_by_the_dry_run_in_one_line(tmp_path: Path, change: dict, expected: str):
    artifact = write(tmp_path, rows(**change))
    code, output = dry_run(artifact, tmp_path)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2, output
    assert len(lines) == 1 and lines[0].startswith("error:") and str(artifact) in lines[0], output
    assert expected in lines[0], output
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_several_bad_rows_name_the_first_and_count_the_rest(tmp_path: Path):
    change = bad_truth(3, None)
    change["reward_model"][6] = {"style": "rule", "ground_truth": ""}
    with pytest.raises(ArtifactError, match=r"row 3: .* is null \(and 1 more row\)"):
        validate_artifact(str(write(tmp_path, rows(**change))))


def test_ranks_may_come_in_any_row_order_and_need_no_cluster_size():
    cid = np.array([5, 9, 5, 9, 5])
    check_sampler_columns(cid, np.array([2, 1, 0, 0, 1]))  # cluster 5: 2,0,1; cluster 9: 1,0
    with pytest.raises(RowError, match="row 0: field 'rank_in_cluster' is 3, outside 0..2 for cluster 5's 3 rows"):
        check_sampler_columns(cid, np.array([3, 1, 0, 0, 1]))  # cluster 5 ranked 3,0,1


def test_an_artifact_that_is_a_folder_or_not_parquet_gets_one_line(tmp_path: Path):
    folder = tmp_path / "parts.parquet"
    folder.mkdir()
    (folder / "part-0.parquet").write_bytes(b"")
    text = tmp_path / "notes.parquet"
    text.write_text("this is not parquet\n")
    for artifact, expected in ((folder, "is a folder"), (text, "not a readable Parquet file")):
        code, output = dry_run(artifact, tmp_path)
        lines = [line for line in output.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and str(artifact) in lines[0] and expected in lines[0], output


def test_a_run_folder_that_is_a_file_gets_one_line(tmp_path: Path):
    artifact = write(tmp_path, rows())
    blocker = tmp_path / "taken"
    blocker.write_text("")
    for run_dir in (blocker, blocker / "sub"):
        result = CliRunner().invoke(
            app, ["train", str(artifact), "--dry-run", "--model", str(tmp_path), "--run-dir", str(run_dir)]
        )
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert f"{blocker} is a file, not a folder; pass --run-dir" in lines[0]
