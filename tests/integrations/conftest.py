"""Fixtures for the verl integration tests: one real final artifact (bundled GSM8K sample, tiny model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def built_out(run_once: Any) -> Path:
    """OUT of `ads build` on the bundled 300-row GSM8K sample with the tiny local model, one for the whole run
    (`run_once`: the xdist workers share it). Tests read it; one that writes makes an OUT of its own."""
    from ads_core.pipeline.build import BuildConfig, build

    def make(folder: Path) -> str:
        build(None, str(folder), BuildConfig())
        return str(folder)

    return Path(run_once("built_out", make))


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
def trl_run(final_artifact: Path, run_once: Any):
    """An uninterrupted 4-step TRL run with the ADS sampler (2 completions of 8 tokens per prompt, 8 prompts), one
    for the whole run (`run_once`): its config and what `train` returned. Tests read its folder; one that trains
    more copies it first."""
    pytest.importorskip("trl")
    from dataclasses import asdict

    from ads_core.train.options import TrainConfig
    from ads_core.train.run import train
    from ads_core.train.trainers import TrainResult

    def config(run_dir: str) -> TrainConfig:
        return TrainConfig(trainer="trl", steps=4, run_dir=run_dir, **TRL_SIZES)

    def make(folder: Path) -> dict[str, Any]:
        cfg = config(str(folder / "run"))
        return {"run_dir": cfg.run_dir, "result": asdict(train(str(final_artifact), cfg, score=parity_score))}

    made = run_once("trl_run", make)
    return config(made["run_dir"]), TrainResult(**made["result"])


@pytest.fixture(scope="session")
def trl_helpers():
    """The score and sizes above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(score=parity_score, sizes=TRL_SIZES)
