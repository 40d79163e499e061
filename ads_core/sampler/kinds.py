"""Training samplers by kind: one registry entry per kind, refusing a name taken twice; each kind brings its own
knobs.

Every sampler is made here: TRL, verl, the simulator and the artifact check ask for `build_sampler(kind,
cluster_ids, rank_in_cluster, sampler_config, batch_size)` and drive what they get only through the protocol
in `ads_core.sampler.base` (`next_batch`, `update(rows, success)`, `state_dict`, `load_state_dict`, `metrics`).
Adding a kind is its options class and one registration (here, or in a module of its own listed in `BUILT_IN`);
nothing else is edited:

    class MineConfig(FrozenSection):
        batch_size: int = Field(128, ge=1, description="Prompts per step.")
        temperature: float = Field(0.5, gt=0, description="...")

    @register_kind("mine", options=MineConfig)
    def _mine(cluster_ids, rank_in_cluster, cfg, batch_size):
        return MySampler(cluster_ids, rank_in_cluster, cfg.mine.replaced(batch_size=batch_size))

The options class becomes the section `sampler.mine` of the config tree (`ads_core.train.options`): YAML keys,
`--set sampler.mine.temperature=0.3`, flags for its non-tuning fields and the `ads-train` flow's `sampler`
parameter. A kind named by class path (`kind: my_pkg.samplers:mine`) declares the same with `@sampler_kind(
options=MineConfig)` (its section is the function's name); a package can also register kinds through the entry
point group `ads_pipeline.sampler_kinds` (name = the kind, value = `module:factory`).

`cfg` is the run's sampler section (every kind's knobs, with the ADS knobs the trainer uses: its `ads_defaults`),
and `batch_size` the step's prompt count, the ADS batch `active_clusters x mini_cluster_size`: every kind draws
that many rows per step, so comparisons train on the same number of prompts.

A kind that needs more of a trainer than the protocol declares it (`needs=`), and a trainer lists the needs it
meets (`supports`; one that lacks one refuses the kind in one line). A need the trainer meets with a callable
(`REFERENCE_ROLLOUTS`: rolling out rows with the current policy) reaches the factory as a keyword argument of the
need's name, from `build_sampler(..., provided={need: value})`, so the sampler holds it from its construction:
nothing is set on a sampler afterwards.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ads_core.common.registry import PluginError, Registry, UnknownBackendError
from ads_core.config.base import options_problem
from ads_core.config.sampler import (
    ADSSamplerConfig,
    DifficultyTargetedConfig,
    DynamicSamplingConfig,
    EasiestShareConfig,
    UniformSamplerConfig,
)
from ads_core.sampler.base import ReferenceRollout, Sampler
from ads_core.sampler.dots.options import DotsSamplerConfig

# (cluster_ids, rank_in_cluster, sampler section, batch, **what the trainer provides for the kind's needs)
SamplerFactory = Callable[..., Sampler]
ENTRY_POINT_GROUP = "ads_pipeline.sampler_kinds"
EXTRA_ROLLOUTS = "extra_rollouts"  # a need: steps that roll out more than one generation batch
# A need: rows rolled out by the current policy, not for gradients; the trainer provides a ReferenceRollout
# (ads_core.sampler.base), which the factory gets as its keyword argument `reference_rollouts`.
REFERENCE_ROLLOUTS = "reference_rollouts"

KINDS = Registry("sampler kind")


@dataclass(frozen=True)
class KindSpec:
    """A sampler kind as the config tree and the trainers see it."""

    kind: str  # as a config names it: a registered name or a class path
    factory: SamplerFactory
    options: type | None  # its knobs (a pydantic model), the section `sampler.<section>`; None: no knobs
    section: str
    needs: frozenset[str]  # what a trainer must support to train with it (see `sampler_kind`)
    drops_all_wrong: bool = False  # published with the trainer's all-wrong drop (TrainConfig.drop_all_wrong auto)

    @property
    def extra_rollouts(self) -> bool:
        return EXTRA_ROLLOUTS in self.needs


def sampler_kind(
    options: type | None = None,
    extra_rollouts: bool = False,
    section: str | None = None,
    needs: tuple[str, ...] = (),
    drops_all_wrong: bool = False,
) -> Callable[[SamplerFactory], SamplerFactory]:
    """Describe a factory: its knobs (OPTIONS, a pydantic model whose fields are `sampler.<section>.*`; SECTION
    defaults to the function's name) and the trainer features it NEEDS beyond the protocol, each a name a trainer
    lists in its ``supports`` (a trainer without one refuses the kind in one line, `auto` passes it over).
    EXTRA_ROLLOUTS: its steps roll out more than one generation batch (DAPO-style dynamic sampling, which a
    trainer must run in its own loop, `fill_step`). REFERENCE_ROLLOUTS: it rolls out rows with the current policy
    itself (DOTS's reference sets), through the callable the trainer provides (the factory's keyword argument
    `reference_rollouts`, see `build_sampler`). A kind that needs a trainer extension (rollout replay, say)
    names it here and reads its knobs from its own section. DROPS_ALL_WRONG: the kind was published with a trainer
    that drops all-wrong groups from the gradient batch, so the training option `drop_all_wrong` at `auto` turns
    that drop on for it (ADS). A kind named by class path needs only this; `register_kind` also gives it a name.
    OPTIONS whose defaults fail their own validation are refused here (PluginError), before any run uses them."""

    def deco(factory: SamplerFactory) -> SamplerFactory:
        problem = options_problem(options) if options is not None else None
        if problem:
            raise PluginError(problem)  # "its options ...": the kind is named by whoever reports it
        factory.ads_kind_drops_all_wrong = drops_all_wrong  # type: ignore[attr-defined]
        factory.ads_kind_options = options  # type: ignore[attr-defined]
        factory.ads_kind_section = section or factory.__name__.replace("-", "_")  # type: ignore[attr-defined]
        factory.ads_kind_needs = frozenset(needs) | ({EXTRA_ROLLOUTS} if extra_rollouts else set())  # type: ignore[attr-defined]
        return factory

    return deco


def register_kind(
    name: str,
    options: type | None = None,
    extra_rollouts: bool = False,
    section: str | None = None,
    needs: tuple[str, ...] = (),
    drops_all_wrong: bool = False,
) -> Callable[[SamplerFactory], SamplerFactory]:
    """Register a factory under NAME (taken once: the registry raises DuplicateBackendError) with its knobs
    and needs (see `sampler_kind`; the section defaults to NAME, with `-` as `_`)."""
    describe = sampler_kind(options, extra_rollouts, section or name.replace("-", "_"), needs, drops_all_wrong)

    def deco(factory: SamplerFactory) -> SamplerFactory:
        return KINDS.register(name)(describe(factory))

    return deco


# Modules of built-in kinds that register themselves elsewhere (a kind with its own module: its options class,
# factory and `@register_kind` together); imported once, before the registry first answers.
BUILT_IN: tuple[str, ...] = ()
_entry_points_loaded = False


def _load_entry_points() -> None:
    """Import the BUILT_IN modules and register the kinds installed packages declare in the
    `ads_pipeline.sampler_kinds` group, once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for module in BUILT_IN:
        importlib.import_module(module)

    def add(name: str, factory: Any) -> None:
        if not hasattr(factory, "ads_kind_section"):
            sampler_kind(section=name.replace("-", "_"))(factory)
        KINDS.register(name)(factory)

    KINDS.register_entry_points(entry_points(group=ENTRY_POINT_GROUP), ENTRY_POINT_GROUP, add)


def kind_names() -> list[str]:
    _load_entry_points()
    return KINDS.names()


def broken_kind(kind: str) -> str | None:
    """Why the installed entry point KIND was skipped (it failed to load), or None."""
    _load_entry_points()
    return KINDS.broken(kind)


def kind_spec(kind: str) -> KindSpec:
    """KIND's factory and knobs: a registered name or a class path (imported here); an unknown one raises
    UnknownBackendError naming the choices."""
    _load_entry_points()
    factory = KINDS.get(kind)
    return KindSpec(
        kind=kind,
        factory=factory,
        options=getattr(factory, "ads_kind_options", None),
        section=getattr(factory, "ads_kind_section", None) or getattr(factory, "__name__", kind),
        needs=frozenset(getattr(factory, "ads_kind_needs", ())),
        drops_all_wrong=bool(getattr(factory, "ads_kind_drops_all_wrong", False)),
    )


def has_extra_rollouts(kind: str) -> bool:
    """Whether a step of KIND may roll out more generation batches than its first (see ``sampler_kind``)."""
    try:
        return kind_spec(kind).extra_rollouts
    except UnknownBackendError:
        return False


def build_sampler(
    kind: str,
    cluster_ids: Any,
    rank_in_cluster: Any,
    cfg: Any,
    batch_size: int,
    provided: Mapping[str, Any] | None = None,
) -> Sampler:
    """A fresh sampler of KIND over the artifact's rows, drawing ``batch_size`` rows per step. PROVIDED maps a need
    to what the caller (a trainer) meets it with; the factory gets, as keyword arguments, the provided needs its
    kind declares, and nothing for the others (a factory of a kind without such needs takes four arguments)."""
    spec = kind_spec(kind)
    given = {need.replace("-", "_"): value for need, value in (provided or {}).items() if need in spec.needs}
    sampler = spec.factory(cluster_ids, rank_in_cluster, cfg, int(batch_size), **given)
    if sampler.batch_size != batch_size:
        raise ValueError(f"sampler kind {kind!r} draws {sampler.batch_size} rows per step, the step needs {batch_size}")
    return sampler


@register_kind("ads", options=ADSSamplerConfig, drops_all_wrong=True)  # as published (docs/sampler.md)
def _ads(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.ads import ADSSampler

    return ADSSampler(cluster_ids, rank_in_cluster, cfg.ads)  # its batch is the step's by definition


@register_kind("uniform", options=UniformSamplerConfig)
def _uniform(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.baselines import UniformSampler

    return UniformSampler(cluster_ids, rank_in_cluster, cfg.uniform.replaced(batch_size=batch_size))


@register_kind("dots", options=DotsSamplerConfig, needs=(REFERENCE_ROLLOUTS,))
def _dots(
    cluster_ids: Any,
    rank_in_cluster: Any,
    cfg: Any,
    batch_size: int,
    reference_rollouts: ReferenceRollout | None = None,  # the trainer's, for the need REFERENCE_ROLLOUTS
) -> Sampler:
    from ads_core.sampler.dots.sampler import DotsSampler

    section = cfg.dots.replaced(batch_size=batch_size)
    return DotsSampler(cluster_ids, rank_in_cluster, section, reference_rollouts=reference_rollouts)


@register_kind("dots-lite", options=DifficultyTargetedConfig)
def _dots_lite(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.baselines import DifficultyTargetedSampler

    return DifficultyTargetedSampler(cluster_ids, rank_in_cluster, cfg.dots_lite.replaced(batch_size=batch_size))


@register_kind("dynamic", options=DynamicSamplingConfig, extra_rollouts=True)
def _dynamic(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.dynamic import DynamicSamplingSampler

    return DynamicSamplingSampler(cluster_ids, rank_in_cluster, cfg.dynamic.replaced(batch_size=batch_size))


@register_kind("easiest", options=EasiestShareConfig)
def _easiest(cluster_ids: Any, rank_in_cluster: Any, cfg: Any, batch_size: int) -> Sampler:
    from ads_core.sampler.baselines import EasiestShareSampler

    return EasiestShareSampler(cluster_ids, rank_in_cluster, cfg.easiest.replaced(batch_size=batch_size))
