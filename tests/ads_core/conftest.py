"""Fixtures for the model stages: the tiny model in the run's cache (tests/conftest.py), real rows from shared/data."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads_core import models


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    return models.default_model_dir("tiny")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared data sets not found at {path}")
    return path


@pytest.fixture(scope="session")
def formatted(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> str:
    """24 real MATH-500 rows and 24 real GSM8K rows, formatted (for the scorer tests)."""
    from ads_core.ingest.convert import format_dataset

    out = tmp_path_factory.mktemp("fmt")
    src = out / "src"
    src.mkdir()
    for name in ("math500", "gsm8k"):
        lines = (data_dir / name / "test.jsonl").read_text().splitlines()[:24]
        (src / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    format_dataset(str(src), str(out))
    return str(out / "formatted" / "train.parquet")


# The cheapest real build: 24 bundled GSM8K rows, the tiny model, 2 clusters, a tiny report map.
TINY_BUILD = {
    "cluster": {"num_clusters": 2},
    "score": {"max_length": 256},
    "report": {"decontaminate": False, "map_sample": 10, "map_iterations": 250},
}


@pytest.fixture(scope="session")
def tiny_build_config() -> object:
    from ads_core.config.build import BuildConfig

    return BuildConfig.model_validate(TINY_BUILD)


@pytest.fixture(scope="session")
def tiny_sample_lines() -> list[str]:
    """The first 24 problems of the bundled GSM8K sample, one JSON line each."""
    from ads_core.common import defaults

    return Path(defaults.sample_path()).read_text().splitlines()[:24]
