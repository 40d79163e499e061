"""The training config tree, assembled from the registries: the neutral options (`ads_core.config.train`), one
section per registered trainer's options (`trl`, `verl`: each declared in the trainer's own package) and, under
`sampler`, one section per sampler kind's knobs (`sampler.ads`, `sampler.uniform`, ...: declared with the kind).

`TrainConfig` is the tree of the registered plug-ins (built-in and entry points). A config that names a trainer
or a sampler kind by class path is loaded with `load_train_config`, which adds that plug-in's section
(`config_model(trainer, kind)`), so its options are YAML keys and `--set` keys like the built-in ones. The CLI's
flags (`ads_cli.options`) and the `ads-train` flow's parameters (`ads_prefect.flows.params`) are generated from
the same tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from ads_core.config.train import NeutralTrainConfig, SamplerSection
from ads_core.sampler.kinds import broken_kind, kind_names, kind_spec
from ads_core.train.trainers import section_of_trainer, trainer_class, trainer_names


class _KnownKind(SamplerSection):
    @field_validator("kind")
    @classmethod
    def _kind_is_known(cls, kind: str) -> str:
        if not _is_class_path(kind) and kind not in kind_names() and not broken_kind(kind):
            raise ValueError(
                f"unknown sampler kind {kind!r}; choose one of {', '.join(kind_names())} or give a "
                "class path (my_pkg.mod:my_kind)"
            )
        kind_spec(kind)  # a class path that can't be imported, an entry point that failed: one clear line
        return kind


class _Complete(NeutralTrainConfig):
    @model_validator(mode="after")
    def _plugin_sections_present(self) -> Any:
        """A trainer or sampler kind named by class path has its section here (see `load_train_config`)."""
        spec = kind_spec(self.sampler.kind)
        missing = []
        if spec.options is not None and spec.section not in type(self.sampler).model_fields:
            missing.append(f"sampler kind {self.sampler.kind!r}")
        if self.trainer not in _TRAINERS and self.trainer != "auto" and _is_class_path(self.trainer):
            if getattr(trainer_class(self.trainer), "options", None) is not None:
                if section_of_trainer(self.trainer) not in type(self).model_fields:
                    missing.append(f"trainer {self.trainer!r}")
        if missing:
            raise ValueError(
                f"the options of {' and '.join(missing)} are not in this config; load it with "
                "ads_core.train.options.load_train_config"
            )
        return self


def _is_class_path(name: str) -> bool:
    return ":" in name or "." in name


def _summary(cls: type) -> str:
    return ((cls.__doc__ or "").strip().splitlines() or [""])[0]


def _section(options: type, description: str) -> tuple[type, Any]:
    return options, Field(default_factory=options, description=description)


@cache
def _sampler_model(extra_kind: str | None) -> type[SamplerSection]:
    fields: dict[str, Any] = {}
    for kind in dict.fromkeys([*kind_names(), *([extra_kind] if extra_kind else [])]):
        spec = kind_spec(kind)
        if spec.options is None:
            continue
        if spec.section in fields or spec.section in SamplerSection.model_fields:
            raise ValueError(
                f"sampler kind {kind!r}: its section sampler.{spec.section} is taken; give it a section of its own "
                f'with section= (@sampler_kind(options=..., section="my_{spec.section}"))'
            )
        fields[spec.section] = _section(spec.options, f"{kind} knobs: {_summary(spec.options)}")
    return create_model("TrainSamplerConfig", __base__=_KnownKind, __module__=__name__, **fields)


@cache
def _config_model(extra_trainer: str | None, extra_kind: str | None) -> type[NeutralTrainConfig]:
    sampler = _sampler_model(extra_kind)
    fields: dict[str, Any] = {"sampler": _section(sampler, "Which sampler and every kind's knobs.")}
    for name in dict.fromkeys([*trainer_names(), *([extra_trainer] if extra_trainer else [])]):
        options = getattr(trainer_class(name), "options", None)
        if options is None:
            continue
        section = section_of_trainer(name)
        if section in fields or section in NeutralTrainConfig.model_fields:
            raise ValueError(
                f"trainer {name!r}: its section {section} is taken; give the class another name (its class "
                f'attribute name = "my_{section}")'
            )
        fields[section] = _section(options, f"{name} options: {_summary(options)}")
    return create_model("TrainConfig", __base__=_Complete, __module__=__name__, **fields)


_TRAINERS = frozenset(trainer_names())  # the plug-ins TrainConfig holds; any other one is added on demand
_KINDS = frozenset(kind_names())
TrainConfig: Any = _config_model(None, None)
TrainSamplerConfig: Any = TrainConfig.model_fields["sampler"].annotation


def config_model(trainer: str | None = None, kind: str | None = None) -> type[NeutralTrainConfig]:
    """The config tree with the sections of TRAINER and sampler KIND besides the registered ones (for a class
    path, or a plug-in registered after `TrainConfig` was assembled)."""
    extra_trainer = trainer if _added(trainer, _TRAINERS, trainer_names) else None
    extra_kind = kind if _added(kind, _KINDS, kind_names) else None
    return _config_model(extra_trainer, extra_kind)


def _added(name: str | None, assembled: frozenset[str], registered: Any) -> bool:
    """NAME is a plug-in TrainConfig lacks: a class path, or registered after TrainConfig was assembled (an
    unknown name is left to the validators, which name the option)."""
    return bool(name) and name not in assembled and (_is_class_path(str(name)) or name in registered())


def chosen_plugins(
    data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> tuple[str | None, str | None]:
    """(trainer, sampler kind) that DATA (a YAML mapping) with OVERRIDES (dotted keys) chooses, None if unset."""
    overrides = overrides or {}
    sampler = data.get("sampler")
    if isinstance(sampler, BaseModel):
        sampler = sampler.model_dump(exclude_unset=True)
    trainer = overrides.get("trainer", data.get("trainer"))
    kind = overrides.get("sampler.kind", (sampler or {}).get("kind") if isinstance(sampler, Mapping) else None)
    return (str(trainer) if trainer else None), (str(kind) if kind else None)


def model_for(data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> type[NeutralTrainConfig]:
    """The config tree that can hold what DATA and OVERRIDES choose (see `config_model`)."""
    return config_model(*chosen_plugins(data, overrides))


def load_train_config(data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> Any:
    """A validated TrainConfig from DATA (YAML mapping; sections may be models) and dotted OVERRIDES (`--set`),
    with the sections of a trainer or sampler kind named by class path. Unset fields stay unset (a trainer's
    `ads_defaults` still apply to them)."""
    plain = {k: v.model_dump(exclude_unset=True) if isinstance(v, BaseModel) else v for k, v in data.items()}
    cfg = model_for(plain, overrides).model_validate(plain)
    return cfg.with_overrides(dict(overrides)) if overrides else cfg


def trainer_options(cfg: Any, trainer: str) -> Any:
    """TRAINER's options in CFG (its section), or None for a trainer without options."""
    return getattr(cfg, section_of_trainer(trainer), None)


def sampler_knobs(sampler: Any) -> Any:
    """The knobs of SAMPLER's own kind (its section of the sampler config), or None for a kind without knobs."""
    return getattr(sampler, kind_spec(sampler.kind).section, None)
