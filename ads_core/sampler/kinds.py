"""Training samplers by kind: one registry entry per `TrainSamplerConfig.kind`, refusing a name taken twice.

Every sampler is made here: TRL, verl, the simulator and the artifact check ask for `build_sampler(kind,
cluster_ids, rank_in_cluster, sampler_config, batch_size)` and drive what they get only through the protocol
in `ads_core.sampler.base` (`next_batch`, `update(rows, success)`, `state_dict`, `load_state_dict`, `metrics`).
Adding a kind is one `@register_kind("name")` factory here (plus its name in `ads_core.config.sampler.SamplerKind`,
so configs can choose it; a test checks the two agree):

    @register_kind("mine")
    def _mine(cluster_ids, rank_in_cluster, cfg, batch_size):
        return MySampler(cluster_ids, rank_in_cluster, cfg.mine.replaced(batch_size=batch_size))

`cfg` is the run's `TrainSamplerConfig` with the ADS knobs the trainer uses (its `ads_defaults`), and
`batch_size` the step's prompt count, the ADS batch `active_clusters x mini_cluster_size`: every kind draws that
many rows per step, so comparisons train on the same number of prompts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ads_core.common.registry import Registry, UnknownBackendError
from ads_core.sampler.base import Sampler

SamplerFactory = Callable[[Any, Any, Any, int], Sampler]  # (cluster_ids, rank_in_cluster, TrainSamplerConfig, batch)

KINDS = Registry("sampler kind")
EXTRA_ROLLOUTS: set[str] = set()  # kinds whose steps roll out more generation batches (GroupFilter samplers)


def register_kind(name: str, extra_rollouts: bool = False) -> Callable[[SamplerFactory], SamplerFactory]:
    """Register a factory under NAME; a name is taken once (the registry raises DuplicateBackendError).
    ``extra_rollouts``: the kind's steps roll out more than one generation batch (DAPO-style dynamic sampling),
    which a trainer must support in its own loop (`fill_step`), not only through the protocol."""
    register = KINDS.register(name)
    if extra_rollouts:
        EXTRA_ROLLOUTS.add(name)
    return register


def kind_names() -> list[str]:
    return KINDS.names()


def has_extra_rollouts(kind: str) -> bool:
    """Whether a step of KIND may roll out more generation batches than its first (see ``register_kind``)."""
    return kind in EXTRA_ROLLOUTS


def build_sampler(kind: str, cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    """A fresh sampler of KIND over the artifact's rows, drawing ``batch_size`` rows per step."""
    if kind not in KINDS.names():
        raise UnknownBackendError(f"unknown sampler kind {kind!r}; choose one of {', '.join(KINDS.names())}")
    sampler = KINDS.get(kind)(cluster_ids, rank_in_cluster, cfg, int(batch_size))
    if sampler.batch_size != batch_size:
        raise ValueError(f"sampler kind {kind!r} draws {sampler.batch_size} rows per step, the step needs {batch_size}")
    return sampler


@register_kind("ads")
def _ads(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.ads import ADSSampler

    return ADSSampler(cluster_ids, rank_in_cluster, cfg.ads)  # its batch is the step's by definition


@register_kind("uniform")
def _uniform(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.baselines import UniformSampler

    return UniformSampler(cluster_ids, rank_in_cluster, cfg.uniform.replaced(batch_size=batch_size))


@register_kind("dots")
def _dots(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.dots.sampler import DotsSampler

    return DotsSampler(cluster_ids, rank_in_cluster, cfg.dots.replaced(batch_size=batch_size))


@register_kind("dots-lite")
def _dots_lite(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.baselines import DifficultyTargetedSampler

    return DifficultyTargetedSampler(cluster_ids, rank_in_cluster, cfg.dots_lite.replaced(batch_size=batch_size))


@register_kind("dynamic", extra_rollouts=True)
def _dynamic(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.dynamic import DynamicSamplingSampler

    return DynamicSamplingSampler(cluster_ids, rank_in_cluster, cfg.dynamic.replaced(batch_size=batch_size))
