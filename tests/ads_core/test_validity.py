"""The report's difficulty-validity statistics: labels read as numbers, Spearman with literal values, and no section
when the source says nothing about difficulty (the section in the report files: test_report.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl

from ads_core.stages.report import validity


def test_labels_read_as_numbers():
    assert validity.label_number(3) == 3.0
    assert validity.label_number("Level 3") == 3.0
    assert validity.label_number("0.25") == 0.25
    assert validity.label_number("Level ?") is None
    assert validity.label_number(True) is None
    assert validity.label_number(math.nan) is None


def test_spearman_literal_values():
    assert validity.spearman([1, 2, 3, 4], [10, 20, 30, 40])["rho"] == 1.0
    assert validity.spearman([1, 2, 3, 4], [4, 3, 2, 1])["rho"] == -1.0
    # ties: ranks (1.5, 1.5, 3.5, 3.5, 5) against 1..5 give 9 / sqrt(10 * 9) = 0.9487
    tied = validity.spearman([1, 2, 3, 4, 5], [1, 1, 2, 2, 3])
    assert tied["rho"] == 0.9487 and tied["n"] == 5
    # rows missing either value are left out; too few or constant values give no rho
    assert validity.spearman([1, 2, math.nan, 4, 5], [1, 2, 3, math.nan, 0]) == {"rho": -0.5, "p": 0.667, "n": 3}
    assert validity.spearman([1, 2, 3], [7, 7, 7]) == {"rho": None, "p": None, "n": 3}


def test_numeric_labels_need_nearly_every_row_and_two_values():
    metas = [{"level": f"Level {1 + i % 3}", "rating": 5, "difficulty": i if i < 8 else None} for i in range(10)]
    frame = pl.DataFrame({"source_meta": [json.dumps(m) for m in metas]})
    labels = validity.numeric_labels(frame)
    assert list(labels) == ["level"]  # rating is constant, difficulty is on 8 of 10 rows (< 90 %)
    assert labels["level"].tolist() == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]


def test_section_rows_and_markdown():
    measures = {"nll_mean": np.array([1.0, 2.0, 3.0, 4.0]), "nll_sum": np.array([4.0, 3.0, 2.0, 1.0])}
    section = validity.validity(measures, {"level": np.array([1.0, 2.0, 3.0, 4.0])}, None)
    assert [(r["measure"], r["against"], r["rho"]) for r in section["spearman"]] == [
        ("nll_mean", "level", 1.0),
        ("nll_mean", "nll_sum", -1.0),
        ("nll_sum", "level", -1.0),
    ]
    text = validity.markdown(section, "nll_mean")
    assert "| nll_mean | level | +1.000 |" in text and "| nll_sum | level | -1.000 |" in text
    assert validity.validity({"nll_mean": measures["nll_mean"]}, {}, None) is None  # nothing to compare with


def test_either_nll_gives_the_other_so_the_report_compares_both():
    from ads_core.config.build import ScoreConfig

    assert ScoreConfig().difficulty == "nll_sum"  # the default follows docs/benchmarks.md's validity table
    summed = pl.DataFrame({"difficulty": [6.0, 2.0, 0.0], "n_target_tokens": [3, 4, 0]})
    got = validity.measure_columns(summed, "nll_sum")
    assert list(got) == ["nll_mean", "nll_sum"]
    np.testing.assert_array_equal(got["nll_mean"][:2], [2.0, 0.5])
    assert math.isnan(got["nll_mean"][2])  # no target tokens: no mean, never a division warning
    mean = pl.DataFrame({"difficulty": [2.0, 0.5], "n_target_tokens": [3, 4]})
    assert validity.measure_columns(mean, "nll_mean")["nll_sum"].tolist() == [6.0, 2.0]
    assert list(validity.measure_columns(mean, "nll_answer")) == ["nll_answer"]


def test_a_source_without_a_level_gets_a_validity_line_that_says_so():
    """Regression (issue 53): a build of data without a level column printed "difficulty validity (Spearman rho,
    ...): " with nothing after it."""
    section = {"spearman": [{"measure": "nll_mean", "against": "nll_sum", "rho": 0.4016, "p": 1e-12, "n": 300}]}
    summary = validity.validity_summary(section, "nll_sum")
    assert summary == {"scored": "nll_sum", "spearman": {}, "between_measures": {"nll_mean vs nll_sum": 0.4016}}
    assert validity.summary_line(summary) == (
        "difficulty validity: no level or subject column in the source, so nothing to check the difficulty against; "
        "the measures against each other (Spearman rho, OUT/report/difficulty_validity.json): nll_mean vs nll_sum "
        "+0.402"
    )
    with_level = {**summary, "spearman": {"nll_sum vs level": 0.52}}
    assert validity.summary_line(with_level) == (
        "difficulty validity (Spearman rho, OUT/report/difficulty_validity.json): nll_sum vs level +0.520"
    )
    assert validity.summary_line({"scored": "nll_sum", "spearman": {}, "between_measures": {}}) is None


def test_every_measure_has_the_label_the_build_prints():
    assert validity.describe_measure("nll_sum") == "nll_sum, summed NLL of the reference solution"
    assert validity.describe_measure("nll_mean") == "nll_mean, token-mean NLL of the reference solution"
    assert validity.describe_measure(None).startswith("measure not recorded")
    assert set(validity.MEASURE_TEXT) == set(validity.MEASURES)
