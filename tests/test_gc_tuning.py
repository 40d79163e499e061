"""The `ads` commands raise the garbage collector's young threshold when they start (ads_core/common/gc_tuning.py),
and importing the CLI does not (tests/test_import_state.py checks every layer's import). The lab's worker processes
are checked where the demo's test starts one (tests/flows/test_ads_demo.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from ads_core.common.gc_tuning import YOUNG_THRESHOLD, tune_gc_for_batch_work


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    """The interpreter's default thresholds for the test's duration (tests/conftest.py raised them), then back."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*saved)


def test_tuning_raises_only_the_young_threshold(default_thresholds: tuple[int, int, int]):
    tune_gc_for_batch_work()
    assert gc.get_threshold() == (50_000, 10, 10) == (YOUNG_THRESHOLD, *default_thresholds[1:])


def test_an_ads_command_starts_with_the_raised_threshold(default_thresholds: tuple[int, int, int]):
    from ads_cli.main import app

    assert gc.get_threshold() == default_thresholds  # importing the CLI changed nothing
    result = CliRunner().invoke(app, ["grade", "--help"])  # the app's callback runs before any command
    assert result.exit_code == 0, result.output
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
