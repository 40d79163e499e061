"""The `ads-train` flow under Prefect's test harness: a dry run completes and publishes the resolved config;
without CUDA a real run fails at once; a broken artifact fails with the reason."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("verl")


@pytest.fixture(scope="module")
def train_prefect(tmp_path_factory: pytest.TempPathFactory):
    """This module's own temporary Prefect API, also when a session-wide server is up: the ads-train runs made
    here must not show up in other tests' queries."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    storage = tmp_path_factory.mktemp("prefect-results")
    with temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: storage}):
        with prefect_test_harness(server_startup_timeout=120):
            yield


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real final artifact: `ads build` on the bundled sample with the tiny local model."""
    from ads_core.build import BuildConfig, build

    os.environ.setdefault("ADS_CACHE_DIR", str(tmp_path_factory.mktemp("ads-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = tmp_path_factory.mktemp("ads-out")
    return Path(build(None, str(out), BuildConfig()).final_uri)


def test_dry_run_completes_and_shows_the_resolved_config(train_prefect, artifact: Path, tmp_path: Path):
    from omegaconf import OmegaConf
    from prefect.artifacts import Artifact
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from flows.ads_train import ads_train

    state = ads_train(artifact_uri=str(artifact), dry_run=True, run_dir=str(tmp_path / "run"), eval_sets=[],
                      sampler={"active_clusters": 2, "mini_cluster_size": 16}, n_gpus_per_node=2,
                      overrides=["trainer.save_freq=5"], return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert result["dry_run"] is True and result["mode"] == "local"
    cfg = OmegaConf.create(result["config_yaml"])
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert cfg.data.train_batch_size == 32 and cfg.trainer.save_freq == 5 and cfg.trainer.n_gpus_per_node == 2

    published = Artifact.get("ads-train-gsm8k-sample-ads-config")
    assert published is not None and published.type == "markdown"
    text = published.data
    assert "## Resolved verl config" in text and "use_v1: false" in text and "mini_cluster_size: 16" in text
    assert "-m ads_core.integrations.verl.main" in text
    assert not (tmp_path / "run").exists()


def test_without_cuda_a_real_run_fails_at_once(train_prefect, artifact: Path, monkeypatch: pytest.MonkeyPatch):
    import ray

    from ads_core import train_launch
    from flows.ads_train import ads_train

    monkeypatch.setattr(train_launch, "cuda_gpu_count", lambda: 0)
    start = time.monotonic()
    state = ads_train(artifact_uri=str(artifact), return_state=True)
    assert state.is_failed()
    assert "needs CUDA GPUs" in state.message and "dry" in state.message
    assert time.monotonic() - start < 15
    assert not ray.is_initialized()


def test_a_broken_artifact_fails_with_the_reason(train_prefect, artifact: Path, tmp_path: Path):
    from flows.ads_train import ads_train

    broken = tmp_path / "final" / "train.parquet"
    broken.parent.mkdir()
    pq.write_table(pq.read_table(artifact).drop(["rank_in_cluster"]), broken)
    state = ads_train(artifact_uri=str(broken), dry_run=True, return_state=True)
    assert state.is_failed() and "missing column 'rank_in_cluster'" in state.message
