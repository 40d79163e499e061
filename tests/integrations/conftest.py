"""Fixtures for the verl integration tests: one real final artifact (bundled GSM8K sample, tiny model)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generated models go to a per-session cache, never the user's (unless ADS_CACHE_DIR is set)."""
    os.environ.setdefault("ADS_CACHE_DIR", str(tmp_path_factory.mktemp("ads-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def built_out(tmp_path_factory: pytest.TempPathFactory, run_once: Any) -> Path:
    """OUT of `ads build` on the bundled 300-row GSM8K sample with the tiny local model, one for the whole run
    (`run_once`: the xdist workers share it). Tests read it; one that writes makes an OUT of its own."""
    from ads_core.pipeline.build import BuildConfig, build

    def make(folder: Path) -> str:
        build(None, str(folder), BuildConfig())
        return str(folder)

    return Path(run_once("built_out", make, lambda: tmp_path_factory.mktemp("ads-out")))


@pytest.fixture(scope="session")
def final_artifact(built_out: Path) -> Path:
    return built_out / "final" / "train.parquet"


@pytest.fixture(scope="session")
def policy_model(built_out: Path) -> str:
    import json

    return json.loads((built_out / "final" / "manifest.json").read_text())["extra"]["policy_model"]


# -- TRL: one trained run shared by the TRL tests ---------------------------------------------------------------

TRL_SIZES = {"trl": {"num_generations": 2, "max_completion_length": 8}, "eval_sets": []}


def parity_score(text: str, ground_truth: str) -> float:
    """A correctness signal the tiny policy produces (its GSM8K rewards are all 0): the parity of its 'e's.
    Deterministic in the completion, so the feedback and resume tests see varied, reproducible successes."""
    return float(text.count("e") % 2)


@pytest.fixture(scope="session")
def trl_run(final_artifact: Path, tmp_path_factory: pytest.TempPathFactory):
    """An uninterrupted 4-step TRL run with the ADS sampler (2 completions of 8 tokens per prompt, 8 prompts)."""
    pytest.importorskip("trl")
    from ads_core.train.options import TrainConfig
    from ads_core.train.run import train

    cfg = TrainConfig(trainer="trl", steps=4, run_dir=str(tmp_path_factory.mktemp("trl") / "run"), **TRL_SIZES)
    return cfg, train(str(final_artifact), cfg, score=parity_score)


@pytest.fixture(scope="session")
def trl_helpers():
    """The score and sizes above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(score=parity_score, sizes=TRL_SIZES)
