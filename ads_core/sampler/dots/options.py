"""The ``dots`` sampler kind's options (the recipe's names: mu, K = reference_size, tau, alpha)."""

from __future__ import annotations

from pydantic import Field

from ads_core.config.base import FrozenSection


class DotsSamplerConfig(FrozenSection):
    """DOTS: every ``mu`` steps, roll out a uniform reference set of ``reference_size`` problems with the current
    policy, predict every problem's success with the trained predictor, and draw the next ``mu`` batches
    proportionally to exp(-|d - alpha| / tau) without replacement."""

    batch_size: int = Field(128, ge=1, strict=True, description="Fresh prompts per step (the step's, or delta*B).")
    seed: int = Field(42, ge=0, strict=True, description="Seed of the reference sets and the draws.")
    predictor: str | None = Field(
        None,
        description="Folder of the trained predictor (`ads dots-train ART`): its weights and every row's "
        "embedding. Required by kind dots.",
    )
    mu: int = Field(2, ge=1, strict=True, description="Steps per selection round (the recipe's 2).")
    reference_size: int = Field(
        16, ge=2, strict=True, description="K: reference problems rolled out by the current policy each round."
    )
    tau: float = Field(1e-3, gt=0, description="Selection temperature of exp(-|d - alpha| / tau) (the recipe's).")
    alpha: float = Field(0.5, gt=0, lt=1, description="Target adaptive difficulty (failure rate).")
    linear_refit: bool = Field(
        True, strict=True, description="Refit predictions linearly on the reference set (the official code does)."
    )
