"""What a training run can refuse, for every trainer: bad options, a machine that can't run the trainer.

Errors name options by their config field (`dry_run`, `steps`, `verl.n_gpus_per_node` as `n_gpus_per_node`)
and carry them in ``options``, so the CLI (`--gpus`) and the flow (`verl.n_gpus_per_node`) each render their
own spelling (`ads_core.common.errors.OptionError`).
"""

from __future__ import annotations

from collections.abc import Callable

from ads_core.common.errors import OptionError


class TrainOptionError(OptionError, ValueError):
    """A training option is out of range, unknown or does not fit the others; the message names it."""


class LaunchError(OptionError, RuntimeError):
    """This machine can't run the chosen trainer (no CUDA GPUs, no rollout engine, the trainer failed)."""


def error_text(exc: BaseException, spell: Callable[[str], str]) -> str:
    """An expected error as one line, with the options it names spelled for the interface at hand."""
    render = getattr(exc, "render", None)
    text = render(spell) if callable(render) else str(exc)
    return " ".join(str(text).split())


class RunStateError(OptionError, RuntimeError):
    """The run folder can't be trained in as asked: another run holds it, no checkpoint verifies, the resume's
    options differ from the run's, a save failed (a full disk), the loss went non-finite; the one line names the
    file or option and what to do."""
