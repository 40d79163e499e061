"""What `ads train` shows while its trainer runs (a bar on a terminal, a line per step in a log, the last step's
table, Ctrl-C's one line) and `--publish` (the same training as an `ads-train` flow run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from rich.progress import TextColumn
from rich.table import Table

from ads_cli.common import bar_columns, bars, console, fail
from ads_core.common import progress as progress_lines
from ads_core.common.errors import InputError, render_options


def publish_run(artifact: str, cfg: Any, dry_run: bool) -> typer.Exit:
    """`--publish`: the `ads-train` flow runs this training (its log lines here, its artifacts in the UI); one
    line with the run's page, or its one-line failure and status 2."""
    from ads_prefect.flows.ads_train import publish_training

    try:
        state, url = publish_training(artifact, cfg, dry_run)
    except (InputError, ValueError) as exc:
        return fail(str(exc))
    if not state.is_completed():
        return fail(f"ads-train ended {state.name}: {state.message} ({url})")
    warned = state.message if state.message and "warning" in state.message else ""
    console.print(f"published: {escape(url)}" + (f" ({escape(warned)})" if warned else ""), highlight=False)
    return typer.Exit(0)


def interrupted(run_dir: str) -> typer.Exit:
    """After Ctrl-C: which checkpoint a rerun of the same command resumes from (the newest complete one)."""

    from pathlib import Path

    from ads_core.storage.manifest import has_checkpoint_manifest
    from ads_core.train.resume.checkpoints import checkpoint_folders

    found = checkpoint_folders(Path(run_dir) / "checkpoints")
    done = [(step, folder) for step, folder in found if has_checkpoint_manifest(folder)]
    where = f"from {done[-1][1]} (step {done[-1][0]})" if done else "from the start (no checkpoint was complete yet)"
    console.print(f"interrupted: training stopped; rerun the same command to resume {where}", highlight=False)
    return typer.Exit(code=130)


def step_text(record: dict[str, Any]) -> str:
    """The bar's note on a step: its reward, and the ADS feedback lag and window where the trainer logs them (a
    plug-in trainer logs what it has)."""
    parts = [f"reward {record['reward_mean']:.3f}"] if isinstance(record.get("reward_mean"), int | float) else []
    parts += [f"lag {record['lag']}"] if record.get("lag") is not None else []
    window = record.get("window_position")
    return " ".join(parts + ([f"window {window:.2f}"] if window is not None else []))


def train_with_progress(plan: Any, trun: Any, spell_flag: Callable[[str], str]) -> None:
    """A trainer that reports its steps: a bar over the steps, then where everything went."""
    from ads_core.train.errors import error_text

    console.print(
        f"training with {escape(plan.trainer)} ({escape(plan.trainer_reason)}): {escape(plan.part.launch_line())}",
        highlight=False,
    )
    columns = bar_columns(TextColumn("{task.fields[last]}"))
    with bars(*columns) as progress:
        task = progress.add_task("GRPO steps", total=plan.config.steps, last="")

        step_lines = progress_lines.StepLines(plan.config.steps)

        def on_step(record: dict[str, Any], trainer: Any) -> None:
            step_lines(record)
            progress_lines.phase(f"training after step {record['step']}", announce=False)
            shown = step_text(record)
            progress.update(task, completed=record["step"], last=shown)
            if record.get("eval"):  # this step's validation (ads_core.train.trl.validate)
                scores = ", ".join(f"{name} {value:.3f}" for name, value in record["eval"].items())
                progress.console.print(f"validation at step {record['step']}: mean@k {scores}", highlight=False)
            for note in record.get("notes", []):
                progress.console.print(escape(note), highlight=False)
            for warning in record.get("warnings", []):
                text = render_options(warning, record.get("warning_options", ()), spell_flag)
                progress.console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)

        try:
            with progress_lines.heartbeat("training: loading the data, the policy and the trainer"):
                result = trun.execute(plan, on_step=on_step)
        except (ValueError, RuntimeError) as exc:
            raise fail(error_text(exc, spell_flag)) from None
        except KeyboardInterrupt:  # Ctrl-C: one line on what the run folder keeps, status 130
            progress.stop()
            raise interrupted(plan.run_dir) from None
        if result.steps:
            progress.update(task, completed=result.steps[-1]["step"])
    for note in result.notes:
        console.print(escape(note), highlight=False)
    table = Table(title=f"last step ({len(result.steps)} logged)", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.headline.items():
        table.add_row(key, f"{value:g}")
    console.print(table)
    console.print(
        f"steps: {escape(str(result.steps_file))}\ncheckpoint: {escape(str(result.last_checkpoint))}\n"
        f"run dir: {escape(result.run_dir)} ({result.seconds:.1f} s)",
        highlight=False,
    )
