"""Fixtures for the verl integration tests: one real final artifact (bundled GSM8K sample, tiny model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generated models go to a per-session cache, never the user's (unless ADS_CACHE_DIR is set)."""
    os.environ.setdefault("ADS_CACHE_DIR", str(tmp_path_factory.mktemp("ads-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def built_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT of `ads build` on the bundled 300-row GSM8K sample with the tiny local model."""
    from ads_core.pipeline.build import BuildConfig, build

    out = tmp_path_factory.mktemp("ads-out")
    build(None, str(out), BuildConfig())
    return out


@pytest.fixture(scope="session")
def final_artifact(built_out: Path) -> Path:
    return built_out / "final" / "train.parquet"


@pytest.fixture(scope="session")
def policy_model(built_out: Path) -> str:
    import json

    return json.loads((built_out / "final" / "manifest.json").read_text())["extra"]["policy_model"]
