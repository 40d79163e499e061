"""Trainers are plug-ins: one small protocol, one registry that refuses a name taken twice.

A trainer is one module that registers one class (TRL: ``ads_core.train.trl.entry``, verl:
``ads_core.train.verl.entry``); nothing outside its own package branches on its name. `ads train`, the
`ads-train` flow and ``ads_core.train.run`` drive every trainer through the same calls:

    @register_trainer("mine")
    class MyTrainer:
        priority = 0                      # `auto` asks the trainers from the highest priority down
        streams_steps = True              # execute() calls on_step after every optimizer step
        ads_defaults: dict = {}           # ADS knobs this trainer sizes differently unless they are set
        options = MyOptions               # its options (a config Section): the section `mine.*` (optional)
        sampler_keys = ()                 # options that sit among the ADS knobs in its own config (`-s KEY=...`)
        supports = frozenset({"extra_rollouts"})  # the sampler kinds' needs it meets (`register_kind(needs=)`)
        unsupported_why: dict = {}        # need -> why it can't, and what to do instead (its refusal's line)
        extra_arguments = "overrides"     # the list option that takes `ads train ART key=value ...` (optional)

        def can_run_here(self, cfg) -> tuple[bool, str]: ...      # for `auto`: yes/no and why
        def check_machine(self, cfg, dry_run) -> None: ...        # raise LaunchError at once if it can't
        def plan(self, plan, materialize) -> TrainerPart: ...     # its part of the plan (summary, describe)
        def execute(self, plan, on_step, on_line, score) -> TrainResult: ...
        def read_checkpoint_state(self, run_dir) -> SamplerCheckpoint | None: ...  # the newest one

A third-party trainer can also be named by class path (``trainer: my_pkg.trainers:MyTrainer``), as backends can,
or registered by an installed package through the entry point group ``ads_pipeline.trainers`` (name = the
trainer, value = ``module:Class``). Its options class becomes the section named after it (``name``, else the
registered name, else the class name in lower case) in every interface: flags, ``--set mine.x=1``, YAML, the
flow (``ads_core.train.options`` assembles the tree).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol

from ads_core.common.registry import PluginError, Registry, UnknownBackendError
from ads_core.config.base import options_problem
from ads_core.config.sampler import ADSSamplerConfig
from ads_core.config.train import NeutralTrainConfig as TrainConfig
from ads_core.config.train import SamplerSection
from ads_core.sampler.kinds import kind_spec
from ads_core.train.errors import TrainOptionError

TRAINERS = Registry("trainer")
ENTRY_POINT_GROUP = "ads_pipeline.trainers"
# The built-in trainers' entry modules: each registers its trainer when imported (first use of the registry).
BUILT_IN = ("ads_core.train.verl.entry", "ads_core.train.trl.entry")
OnStep = Callable[[dict[str, Any], Any], None]  # (the step's record, the live trainer object)
OnLine = Callable[[str], None]  # one line of a trainer subprocess's output
Score = Callable[[str, str], float]  # (completion text, ground truth) -> correctness in [0, 1]


@dataclass
class TrainResult:
    """What every trainer returns: where the run went and how its last step looked."""

    trainer: str
    run_dir: str
    steps_file: str | None  # the per-step log (TRL: steps.jsonl; verl: its metrics JSONL)
    steps: list[dict[str, Any]] = field(default_factory=list)  # every logged step, when the trainer keeps them
    metrics: dict[str, float] = field(default_factory=dict)  # the last step's numbers
    headline: dict[str, float] = field(default_factory=dict)  # the few of them worth a table
    last_checkpoint: str | None = None
    resumed_from: int | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the steps' warnings (no learning signal), for a flow's state


class TrainerPart(Protocol):
    """What a trainer adds to a plan: a summary (rows of the plan table), a markdown description, the text a
    dry run prints, one line on what is about to run, and the values the `ads-train` flow returns besides the
    neutral ones."""

    def summary(self) -> dict[str, Any]: ...

    def describe(self) -> str: ...

    def dry_run_text(self) -> str: ...

    def launch_line(self) -> str: ...

    def outputs(self, dry_run: bool) -> dict[str, Any]: ...


class Trainer(Protocol):
    name: ClassVar[str]
    priority: ClassVar[int]
    streams_steps: ClassVar[bool]
    ads_defaults: ClassVar[dict[str, Any]]

    def can_run_here(self, cfg: TrainConfig) -> tuple[bool, str]: ...

    def check_machine(self, cfg: TrainConfig, dry_run: bool) -> None: ...

    def plan(self, plan: Any, materialize: bool) -> TrainerPart: ...

    def execute(
        self, plan: Any, on_step: OnStep | None, on_line: OnLine | None, score: Score | None
    ) -> TrainResult: ...

    def read_checkpoint_state(self, run_dir: str) -> Any: ...


# What `ads train`, the flow and `ads_core.train.run` call or read on every trainer (the protocol above).
PROTOCOL_METHODS = ("can_run_here", "check_machine", "plan", "execute", "read_checkpoint_state")
PROTOCOL_ATTRIBUTES = ("streams_steps", "ads_defaults")


def protocol_problem(cls: Any) -> str | None:
    """Why CLS can't be a trainer, or None: the protocol's methods or attributes it lacks, or options whose defaults
    fail their own validation (checked when it is registered or named, not deep inside a run)."""
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(cls, m, None))]
    missing += [a for a in PROTOCOL_ATTRIBUTES if not hasattr(cls, a)]
    if missing:
        return f"it lacks {', '.join(missing)} of the protocol ads_core.train.trainers.Trainer"
    options = getattr(cls, "options", None)
    return None if options is None else options_problem(options)


def register_trainer(name: str) -> Callable[[type], type]:
    """Register a trainer class under NAME (taken once: a second registration raises DuplicateBackendError); a
    class that is no trainer (`protocol_problem`) raises PluginError."""

    def deco(cls: type) -> type:
        problem = protocol_problem(cls) if name not in TRAINERS.names() else None  # a taken name: the registry's
        if problem:
            raise PluginError(f"trainer {name!r}: {problem}")
        cls.name = name  # type: ignore[attr-defined]
        return TRAINERS.register(name)(cls)

    return deco


_loaded = False


def load_built_ins() -> None:
    """Import the built-in trainers' entry modules once, so they register themselves, then register the trainers
    installed packages declare in the ``ads_pipeline.trainers`` entry point group."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILT_IN:
            importlib.import_module(module)
        eps = entry_points(group=ENTRY_POINT_GROUP)
        TRAINERS.register_entry_points(eps, ENTRY_POINT_GROUP, lambda name, cls: register_trainer(name)(cls))


def trainer_class(name: str) -> Any:
    """The class registered as NAME or named by class path (imported here); an unknown name names `trainer`."""
    load_built_ins()
    try:
        cls = TRAINERS.get(name)
    except UnknownBackendError as exc:
        raise TrainOptionError(str(exc), options=("trainer",)) from None
    problem = protocol_problem(cls)  # a class path is checked here; a registered trainer was at registration
    if problem:
        raise TrainOptionError(f"trainer {name!r} is refused: {problem}", options=("trainer",))
    return cls


def section_of_trainer(name: str) -> str:
    """The config section of trainer NAME's options: its ``name`` (registered trainers: the registered name), else
    its class name in lower case."""
    cls = trainer_class(name)
    return str(getattr(cls, "name", None) or (name if name in TRAINERS.names() else cls.__name__.lower()))


def sampler_keys() -> dict[str, str]:
    """Option -> its trainer's section, for the trainer options that sit among the ADS knobs (``sampler_keys``:
    verl's sampler adapter's cluster_metrics_interval and strict_ids, set with `-s` like a knob)."""
    return {
        key: section_of_trainer(n) for n in trainer_names() for key in getattr(trainer_class(n), "sampler_keys", ())
    }


def extra_arguments_field() -> str | None:
    """``section.field`` of the registered trainer option that takes extra ``key=value`` arguments (verl's
    ``overrides``), or None when no trainer takes them."""
    for name in trainer_names():
        field = getattr(trainer_class(name), "extra_arguments", None)
        if field:
            return f"{section_of_trainer(name)}.{field}"
    return None


def trainer_names() -> list[str]:
    load_built_ins()
    return TRAINERS.names()


def get_trainer(name: str) -> Trainer:
    """The trainer registered as NAME (or named by class path); an unknown name names the `trainer` option."""
    cls = trainer_class(name)
    trainer = cls() if isinstance(cls, type) else cls
    if not getattr(trainer, "name", None) or name not in TRAINERS.names():
        trainer.name = name  # a class path stays the trainer's name, so a plan finds it again
    return trainer


def choose_trainer(cfg: TrainConfig) -> tuple[Trainer, str]:
    """(trainer, why): an explicit choice stands; ``auto`` asks each registered trainer, highest priority first,
    whether it can run here, and takes the first that can (the reason says why the ones before it could not)."""
    if cfg.trainer != "auto":
        trainer = get_trainer(cfg.trainer)
        refusal = unmet_needs(trainer, cfg.sampler.kind)
        if refusal:
            raise TrainOptionError(refusal, options=("trainer", "kind"))
        return trainer, f"trainer={cfg.trainer} as set"
    declined: list[str] = []
    candidates = sorted((get_trainer(n) for n in trainer_names()), key=lambda t: -int(getattr(t, "priority", 0)))
    for trainer in candidates:
        ok, why = trainer.can_run_here(cfg)
        refusal = unmet_needs(trainer, cfg.sampler.kind) if ok else None
        if ok and not refusal:
            return trainer, "auto: " + ("; ".join(declined) if declined else why)
        declined.append(refusal or why)
    raise TrainOptionError(f"no trainer can run here: {'; '.join(declined)}", options=("trainer",))


def unmet_needs(trainer: Any, kind: str) -> str | None:
    """Why TRAINER can't train with sampler KIND (a need of the kind it doesn't list in ``supports``), or None."""
    missing = sorted(kind_spec(kind).needs - set(getattr(trainer, "supports", ())))
    if not missing:
        return None
    why = getattr(trainer, "unsupported_why", {}).get(missing[0])
    return f"the {kind} sampler needs {', '.join(missing)}, which trainer {trainer.name} does not support" + (
        f": {why}" if why else ""
    )


def sampler_config(cfg: TrainConfig, trainer: Trainer | str) -> SamplerSection:
    """The run's sampler section with the ADS knobs TRAINER uses: its own defaults for the knobs not set."""
    t = get_trainer(trainer) if isinstance(trainer, str) else trainer
    if not t.ads_defaults or not isinstance(getattr(cfg.sampler, "ads", None), ADSSamplerConfig):
        return cfg.sampler
    return cfg.sampler.model_copy(update={"ads": ads_knobs(cfg.sampler.ads, t.ads_defaults)})  # type: ignore[attr-defined]


def ads_knobs(ads: ADSSamplerConfig, defaults: dict[str, Any]) -> ADSSamplerConfig:
    """ADS knobs with a trainer's defaults for those not set explicitly (a set value always wins)."""
    unset = {k: v for k, v in defaults.items() if k not in ads.model_fields_set}
    return ads.model_copy(update=unset) if unset else ads
