"""What `ads build` prints after a build (issue 53): the difficulty named as the final manifest records it, no line
that ends in nothing, and the eval set a training set is."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.pipeline.refresh import RefreshSummary
from ads_core.storage import manifest as mf


def final_with_measure(tmp_path: Path, measure: str | None) -> str:
    uri = str(tmp_path / "final" / "train.parquet")
    difficulty = [91.5, 240.0, 368.0, 509.0, 1356.3, 300.0]
    table = pa.table({"cluster_id": [0, 0, 1, 1, 2, 2], "difficulty": difficulty, "truncated": [False] * 6})
    storage.write_parquet(uri, table)
    extra = {"difficulty_measure": measure} if measure else {}
    manifest = mf.Manifest(
        stage="sort",
        inputs={},
        outputs={"train": mf.output_entry(uri)},
        config={},
        code_version="test",
        extra=extra,
    )
    mf.write(str(tmp_path / "final"), manifest)
    return uri


def test_the_build_histogram_names_the_measure_the_artifact_records(tmp_path: Path, capsys: pytest.CaptureFixture):
    """Regression: the console histogram said "token-mean NLL of the reference solution" for an nll_sum build."""
    from ads_cli.build_cmd import print_build_summary

    print_build_summary(final_with_measure(tmp_path, "nll_sum"))
    err = capsys.readouterr().err
    assert "difficulty (nll_sum, summed NLL of the reference solution):" in err and "token-mean" not in err
    rows = [line for line in err.splitlines() if " | " in line]
    assert len(rows) == 10 and len({line.index("|") for line in rows}) == 1  # one column whatever the scale


def test_a_training_set_that_is_an_eval_set_is_named_on_the_decontamination_line():
    same = ["the training set is drawn from the math500 eval set (30 of its 500 questions)"]
    lines = RefreshSummary(rows=30, contaminated=30, same_as_eval=same).lines()
    assert (
        "decontamination: 30 rows match an eval question (OUT/report/decontamination.json): the training set is "
        "drawn from the math500 eval set (30 of its 500 questions), so evaluating on it measures recall, not learning"
    ) in lines
    assert "decontamination: 0 rows match an eval question (OUT/report/decontamination.json)" in (
        RefreshSummary(rows=30, contaminated=0).lines()
    )


def test_no_summary_line_ends_in_nothing():
    """Regression: "difficulty validity (Spearman rho, ...): " with nothing after it for a source without levels."""
    validity = {"scored": "nll_sum", "spearman": {}, "between_measures": {}}
    summary = RefreshSummary(rows=3, contaminated=0, difficulty_validity=validity, stage_seconds={"format": 0.5})
    lines = summary.lines()
    assert not [line for line in lines if line.rstrip().endswith(":")] and not any("validity" in x for x in lines)
