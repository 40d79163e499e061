"""`ads-train`: placeholder flow until the training issue lands (its owner replaces this file).

It accepts the final artifact's URI from `ads-build` (through `run_deployment`), logs it and returns it,
so the `ads-train/myds` deployment exists and the build -> train chain can be deployed and tested.
"""

from __future__ import annotations

from prefect import flow, get_run_logger


@flow(name="ads-train", log_prints=True)
def ads_train(artifact_uri: str, model: str | None = None, dry_run: bool = False) -> str:
    """Stub: log which artifact would be trained on, and return its URI."""
    get_run_logger().info("ads-train stub: artifact_uri=%s model=%s dry_run=%s", artifact_uri, model, dry_run)
    return artifact_uri
