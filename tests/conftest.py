"""Shared fixtures, kept small and generic.

Nothing reaches the network at run time: the hub and datasets libraries are told so before any test module
imports them (a library that reads these variables at import would otherwise try the hub, and time out).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets in ../shared/data (GSM8K, MATH-500, AIME24, AMC23); skip when this checkout has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA}")
    return SHARED_DATA
