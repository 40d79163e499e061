"""A trainer with one option and a sampler kind with one knob, defined outside the package and named only by
class path (`plugin_module:Tiny`, `plugin_module:coin`), and a kind whose batches break the protocol
(`plugin_module:bad`); the tests copy this file into a temporary folder on `sys.path` (tests/test_plugins.py,
tests/flows/test_ads_train.py, tests/integrations/test_trl_sampler_boundary.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from ads_core.config.base import FrozenSection, Section
from ads_core.config.sampler import UniformSamplerConfig
from ads_core.sampler.baselines import UniformSampler
from ads_core.sampler.kinds import sampler_kind
from ads_core.train.trainers import TrainResult


class TinyOptions(Section):
    """The tiny trainer's own option."""

    warmth: float = Field(0.25, ge=0, description="How warm the tiny trainer runs.")


class TinyPart:
    def __init__(self, plan: Any) -> None:
        self.shown = f"tiny: warmth={plan.config.tiny.warmth} knob={plan.sampler.coin.knob}"

    def summary(self) -> dict[str, Any]:
        return {"tiny": self.shown}

    def describe(self) -> str:
        return f"## tiny\n{self.shown}\n"

    def dry_run_text(self) -> str:
        return self.shown + "\n"

    def launch_line(self) -> str:
        return self.shown

    def outputs(self, dry_run: bool) -> dict[str, Any]:
        return {"tiny": self.shown}


class Tiny:
    name = "tiny"  # its section: tiny.warmth
    options = TinyOptions
    priority = -1
    streams_steps = True
    ads_defaults: dict[str, Any] = {}

    def can_run_here(self, cfg: Any) -> tuple[bool, str]:
        return True, "anywhere"

    def check_machine(self, cfg: Any, dry_run: bool) -> None:
        return None

    def plan(self, plan: Any, materialize: bool) -> TinyPart:
        return TinyPart(plan)

    def execute(self, plan: Any, on_step: Any, on_line: Any, score: Any) -> TrainResult:
        raise NotImplementedError("the tiny trainer only plans")

    def read_checkpoint_state(self, run_dir: str) -> None:
        return None


class CoinKnobs(FrozenSection):
    """The coin sampler's knob (and the batch every kind takes)."""

    batch_size: int = Field(128, ge=1, description="Prompts per step.")
    knob: int = Field(3, ge=0, description="The coin's seed.")


@sampler_kind(options=CoinKnobs)
def coin(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> UniformSampler:
    return UniformSampler(cluster_ids, rank_in_cluster, UniformSamplerConfig(batch_size=batch_size, seed=cfg.coin.knob))


@sampler_kind(options=CoinKnobs, needs=("rollout_replay",), section="replayed")
def replayed(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> UniformSampler:
    """A kind that needs a trainer extension no built-in trainer has."""
    return coin(cluster_ids, rank_in_cluster, cfg, batch_size)


class ReferencedSampler(UniformSampler):
    """A uniform sampler that keeps the reference rollout its trainer provided (from its construction)."""

    def __init__(self, cluster_ids: Any, rank_in_cluster: Any, batch_size: int, reference_rollouts: Any) -> None:
        super().__init__(cluster_ids, rank_in_cluster, UniformSamplerConfig(batch_size=batch_size))
        self.reference_rollouts = reference_rollouts


@sampler_kind(options=CoinKnobs, needs=("reference_rollouts",), section="referenced")
def referenced(
    cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int, reference_rollouts: Any = None
) -> ReferencedSampler:
    """A kind that needs reference rollouts (as dots does): the trainer's reach its factory."""
    return ReferencedSampler(cluster_ids, rank_in_cluster, batch_size, reference_rollouts)


class BadKnobs(FrozenSection):
    """How the bad sampler's batches break the protocol."""

    batch_size: int = Field(128, ge=1, description="Prompts per step.")
    returns: str = Field("floats", description="floats, strings, negative, past_end, long, short or nan.")


class BadSampler(UniformSampler):
    """A uniform sampler whose ``next_batch`` returns what ``returns`` says instead of the step's row positions."""

    def __init__(self, cluster_ids: Any, rank_in_cluster: Any, batch_size: int, returns: str) -> None:
        super().__init__(cluster_ids, rank_in_cluster, UniformSamplerConfig(batch_size=batch_size))
        self.returns = returns

    def next_batch(self) -> Any:
        rows = super().next_batch()
        end = np.array([self.n_rows])
        return {
            "floats": lambda: rows + 0.7,
            "strings": lambda: [str(r) for r in rows],
            "negative": lambda: np.concatenate([rows[:-1], [-1]]),
            "past_end": lambda: np.concatenate([rows[:-1], end]),
            "long": lambda: np.concatenate([rows, rows[:1]]),
            "short": lambda: rows[:-1],
            "nan": lambda: np.concatenate([rows[:-1], [np.nan]]),
        }[self.returns]()


@sampler_kind(options=BadKnobs)
def bad(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> BadSampler:
    return BadSampler(cluster_ids, rank_in_cluster, batch_size, cfg.bad.returns)
