"""`ads`: the command line. Every command has --help; long work shows rich progress bars.

The CLI is the top layer: it may import `flows`, `tasks` and `ads_core`; nothing in the product imports it. Commands
that other installed packages add (the lab's `ads demo` and `ads simulate`) come from the entry point group
``ads_pipeline.commands`` (NAME = "module:register", a function that adds its commands to the app), never from an
import here: the product does not know them by name.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points
from typing import Annotated

import typer

from ads_cli import (
    build_cmd,
    compare_cmd,
    eval_cmd,
    grade_cmd,
    sampler_cmd,
    server_cmd,
    train_cmd,
)
from ads_cli.common import OneLineErrors
from ads_core.common.gc_tuning import tune_gc_for_batch_work
from ads_core.common.registry import Registry

COMMANDS_GROUP = "ads_pipeline.commands"

app = typer.Typer(
    cls=OneLineErrors,
    help="ADS pipeline: build clustered, difficulty-sorted GRPO training sets and schedule them adaptively.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    tune_gc_for_batch_work()  # before the command imports torch and the rest (ads_core/common/gc_tuning.py)
    if not verbose:  # our own bars and summaries only: no tqdm bars from Hugging Face ("Loading weights")
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def add_installed_commands(target: typer.Typer) -> None:
    """The commands of the installed entry points (group ``ads_pipeline.commands``); one that cannot be loaded is
    skipped with one warning naming it and why, so a broken package never takes down the other commands."""
    Registry("command module").register_entry_points(
        entry_points(group=COMMANDS_GROUP), COMMANDS_GROUP, lambda name, register: register(target)
    )


for module in (build_cmd, server_cmd, train_cmd, sampler_cmd, compare_cmd, eval_cmd, grade_cmd):
    module.register(app)
add_installed_commands(app)


if __name__ == "__main__":  # pragma: no cover
    app()
