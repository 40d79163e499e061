"""Options that don't apply to the run's trainer are refused, never silently ignored.

Each trainer reads its own section of `TrainConfig` (the section named after a registered trainer: `verl`,
`trl`); every other section (`sampler`, `validation`) and the top-level fields are shared. A run that trains
with one trainer but sets an option of another trainer's section (a verl Hydra override such as
``actor_rollout_ref.model.lora_rank=32`` with trainer trl, or ``trl.lora_rank=8`` with trainer verl) would train
without it, so the run stops first, in one line naming it.
An option counts as set when its value differs from the default: a config that spells out a default (a flow
run's parameters, a YAML from `--dry-run`) is fine.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ads_core.train.errors import TrainOptionError
from ads_core.train.options import TrainConfig


def _shown(value: Any) -> list[str]:
    """An option's value as the user wrote it: each item of a list of key=value strings on its own."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return [repr(value) if isinstance(value, str) else str(value)]


def foreign_options(cfg: TrainConfig, trainer: str) -> list[tuple[str, str, str]]:
    """(section, dotted field, shown value) of every option of another trainer's section that differs from its
    default, in declaration order."""
    from ads_core.train.trainers import section_of_trainer, trainer_names

    try:
        own = section_of_trainer(trainer)
    except TrainOptionError:  # not a trainer of this registry: every registered trainer's section is foreign
        own = trainer
    found = []
    others = {section_of_trainer(n) for n in trainer_names()} - {own}  # the rest are shared
    for section, field in type(cfg).model_fields.items():
        model = field.annotation
        if section not in others:
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        values, defaults = getattr(cfg, section), model()
        for name in type(values).model_fields:
            value = getattr(values, name)
            if value != getattr(defaults, name):
                found.extend((section, f"{section}.{name}", shown) for shown in _shown(value))
    return found


def refuse_foreign_options(cfg: TrainConfig, trainer: str, reason: str = "") -> None:
    """Raise TrainOptionError (one line, naming the first such option) when CFG sets an option of a trainer
    other than TRAINER, the one this run trains with."""
    found = foreign_options(cfg, trainer)
    if not found:
        return
    section, dotted, shown = found[0]
    what = f"{shown} ({dotted})" if "=" in shown else f"{dotted}={shown}"
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    why = f" ({reason})" if reason else ""
    raise TrainOptionError(
        f"{what}{more} applies to the {section} trainer only, but this run trains with {trainer}{why}; remove "
        f"it, or set trainer {section}",
        options=("trainer",),
    )
