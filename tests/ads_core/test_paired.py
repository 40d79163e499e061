"""The paired verdict every comparison uses (ads_core.evaluation.paired): literal intervals, the 5-seed floor."""

from __future__ import annotations

import pytest

from ads_core.evaluation.paired import bootstrap_interval, paired_verdict, t_interval


def test_the_t_interval_of_five_values():
    low, high = t_interval([0.02, 0.03, 0.04, 0.05, 0.06])  # mean 0.04, sd 0.015811, t(0.975, 4) = 2.776445
    assert low == pytest.approx(0.0203675, abs=1e-6) and high == pytest.approx(0.0596325, abs=1e-6)
    assert t_interval([0.1]) is None


def test_the_bootstrap_is_narrower_than_the_t_interval_at_few_seeds():
    values = [0.03, -0.01, 0.02, 0.05, -0.02, 0.01]
    t_low, t_high = t_interval(values)
    b_low, b_high = bootstrap_interval(values)
    assert (b_high - b_low) < (t_high - t_low)


def test_two_seeds_never_name_a_winner():
    """Regression (issue 53): `ads demo --seeds 2` printed "ads ended higher" from the range of two differences."""
    verdict = paired_verdict("ads", "uniform", [0.004, 0.032])
    assert verdict["winner"] is None
    assert verdict["text"] == (
        "no verdict at 2 seed(s): ads - uniform = +0.018; a verdict needs at least 5 paired seeds "
        "(rerun with more seeds)"
    )
    assert verdict["bootstrap_interval"] is not None and verdict["t_interval"] is not None


def test_five_seeds_with_an_interval_above_zero_name_the_candidate():
    verdict = paired_verdict("ads", "uniform", [0.02, 0.03, 0.04, 0.05, 0.06])
    assert verdict["winner"] == "ads"
    assert verdict["text"] == "ads ended higher: ads - uniform = +0.040, 95% t-interval [+0.020, +0.060] over 5 seeds"
