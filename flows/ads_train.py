"""The `ads-train` Prefect flow: validate a final ADS artifact and launch verl GRPO training on it.

Thin first version (signature fixed); the full implementation lives in `ads_core.train`.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger


@flow(name="ads-train", log_prints=True)
def ads_train(
    artifact_uri: str,
    model: str | None = None,
    dry_run: bool = False,
    n_gpus_per_node: int = 1,
    nnodes: int = 1,
    ray_address: str | None = None,
    sampler: dict[str, Any] | None = None,
    eval_sets: list[str] | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    logger = get_run_logger()
    logger.info("ads-train %s (model=%s, dry_run=%s)", artifact_uri, model, dry_run)
    if not dry_run:
        raise RuntimeError("ads-train: only dry_run is implemented in this version")
    return {"artifact_uri": artifact_uri, "model": model, "dry_run": dry_run}
