"""Shared fixtures, kept small and generic."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets in ../shared/data (GSM8K, MATH-500, AIME24, AMC23); skip when this checkout has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA}")
    return SHARED_DATA
