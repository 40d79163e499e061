"""verl's options (`ads train --trainer verl`, the `verl:` YAML section, the flow's `verl` parameter): declared
here, by the trainer that reads them, and registered with it (`VerlTrainer.options`); the config tree takes them
from the trainer registry (`ads_core.train.options`)."""

from __future__ import annotations

from pydantic import Field

from ads_core.config.base import Section, tuning


class VerlConfig(Section):
    """verl on Ray (CUDA GPUs): the cluster shape, extra overrides, and the two options of the ADS adapter."""

    n_gpus_per_node: int = Field(
        1, ge=1, description="GPUs per node (trainer.n_gpus_per_node).", json_schema_extra={"flag": "--gpus"}
    )
    nnodes: int = Field(1, ge=1, description="Number of nodes (trainer.nnodes).")
    ray_address: str | None = Field(
        None,
        description="http://head:8265 submits a Ray job; auto or ray://head:10001 joins a running cluster; "
        "none starts a local Ray.",
    )
    overrides: list[str] = tuning(
        default_factory=list, description="Extra verl Hydra overrides (key=value), applied last."
    )
    cluster_metrics_interval: int = tuning(
        default=25, ge=0, description="Log per-cluster p / r / window metrics every N steps (0 = never)."
    )
    strict_ids: bool = tuning(
        default=True, description="Fail a step whose rollout ids are not rows of the training set."
    )


# VerlConfig fields of the sampler adapter: set with `-s` like the ADS knobs, written with them to RUN_DIR/sampler.json.
INTEGRATION_KEYS = ("cluster_metrics_interval", "strict_ids")
