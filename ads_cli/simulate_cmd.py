"""`ads simulate`: compare data schedulers on the synthetic GRPO learner. Registered by ``ads_cli.main``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ads_core.sampler import ADSSamplerConfig

if TYPE_CHECKING:
    from ads_core.simulate import SimulationResult

console = Console()


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to an ``ads`` Typer app."""
    app.command("simulate")(simulate)


def simulate(
    seeds: Annotated[int, typer.Option(help="Number of seeds (worlds); seeds 0..N-1 are run.", min=1)] = 5,
    steps: Annotated[int, typer.Option(help="Training steps per run (the reference trains 800).", min=1)] = 800,
    samplers: Annotated[
        str,
        typer.Option(
            help="Comma-separated samplers: uniform, dots, ads, ads-learnability, ads-inverse, ads-noreset, "
            "ads-floor; or 'all'."
        ),
    ] = "uniform,dots,ads,ads-learnability,ads-inverse",
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for simulation.png and simulation.json.")] = Path(
        "simulation"
    ),
    plot: Annotated[bool, typer.Option(help="Write the PNG plot of accuracy versus step.")] = True,
    eval_every: Annotated[int, typer.Option(help="Steps between held-out accuracy measurements.", min=1)] = 20,
    clusters: Annotated[int, typer.Option(help="Number of clusters in the synthetic world.", min=1)] = 64,
    cluster_size: Annotated[int, typer.Option(help="Median problems per cluster (sizes are log-normal).", min=1)] = 720,
    initial_ability: Annotated[
        float, typer.Option(help="Policy ability (logits) at step 0; -2.75 gives ~14% accuracy.")
    ] = -2.75,
    learning_rate: Annotated[float, typer.Option(help="Ability gain per unit of mean GRPO signal.")] = 0.008,
    transfer: Annotated[
        float, typer.Option(help="Share of the signal that improves every cluster (0 = independent clusters).")
    ] = 0.3,
    rank_noise: Annotated[
        float, typer.Option(help="Noise sd (logits) of the offline difficulty estimate behind rank_in_cluster.")
    ] = 1.0,
    signal: Annotated[
        str, typer.Option(help="GRPO signal per group: 'variance' rho(1-rho), or 'std' for its square root.")
    ] = "variance",
    rollouts: Annotated[int, typer.Option(help="Rollouts per prompt (GRPO group size).", min=1)] = 8,
    active_clusters: Annotated[int, typer.Option(help="ADS: clusters drawn per step.", min=1)] = 4,
    mini_cluster_size: Annotated[int, typer.Option(help="ADS: window size B per cluster.", min=1)] = 32,
    boundary_eps: Annotated[float, typer.Option(help="ADS: keep band half-width around 0.5.")] = 0.17,
    alpha: Annotated[float, typer.Option(help="ADS: EMA weight of the new cluster distribution.")] = 0.3,
) -> None:
    """Compare samplers on a synthetic GRPO learner: steps each needs to reach uniform's final accuracy.

    The learner is a model, not evidence about real LLMs (see docs/sampler.md).
    """
    from ads_core.simulate import (
        SAMPLER_FACTORIES,
        SimulationConfig,
        format_curves,
        run_simulation,
        save_plot,
        summary_rows,
    )

    names = tuple(SAMPLER_FACTORIES) if samplers.strip() == "all" else tuple(_split(samplers))
    try:
        if signal not in ("variance", "std"):
            raise ValueError(f"signal must be 'variance' or 'std', got {signal!r}")
        ads = ADSSamplerConfig(
            active_clusters=active_clusters,
            mini_cluster_size=mini_cluster_size,
            boundary_eps=boundary_eps,
            alpha=alpha,
        )
        cfg = replace(
            SimulationConfig(),
            seeds=tuple(range(seeds)),
            steps=steps,
            samplers=names,
            eval_every=eval_every,
            n_clusters=clusters,
            median_cluster_size=cluster_size,
            initial_ability=initial_ability,
            learning_rate=learning_rate,
            transfer=transfer,
            rank_noise_sd=rank_noise,
            signal=signal,  # type: ignore[arg-type]
            n_rollouts=rollouts,
            ads=ads,
        )
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(code=2) from None

    total = len(cfg.seeds) * len(dict.fromkeys((cfg.baseline, *cfg.samplers)))
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("simulate", total=total)

        def advance(name: str, seed: int) -> None:
            progress.update(task, advance=1, description=f"simulate ({name}, seed {seed})")

        result = run_simulation(cfg, progress=advance)

    console.print(format_curves(result).splitlines()[0], highlight=False, soft_wrap=True)
    console.print(_curve_table(result, columns=7))
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulation.json").write_text(json.dumps(result.to_dict(), indent=1))
    if plot:
        save_plot(result, str(out / "simulation.png"))

    table = Table(title=f"Steps to reach {cfg.baseline}'s final accuracy (mean {result.targets.mean():.3f})")
    table.add_column("sampler", no_wrap=True)
    for col in ("final acc", "steps", "reached", "ratio", "time s"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in summary_rows(result):
        ratio = ("≥" if row["ratio_is_lower_bound"] else "") + f"{row['ratio']:.2f}"
        table.add_row(
            str(row["sampler"]),
            f"{row['final_mean']:.3f}±{row['final_sd']:.3f}",
            "-" if row["steps_mean"] is None else f"{row['steps_mean']:.0f}",
            f"{row['reached']}/{row['seeds']}",
            ratio,
            f"{row['seconds']:.1f}",
        )
    console.print(table)
    console.print(
        "ratio: mean over seeds of steps(sampler) / steps(baseline); ≥ marks seeds that never reached it.\n"
        f"wrote {out / 'simulation.json'}" + (f" and {out / 'simulation.png'}" if plot else ""),
        highlight=False,
    )


def _curve_table(result: SimulationResult, columns: int) -> Table:
    """Mean held-out accuracy over seeds at ``columns`` evenly spaced steps."""
    pick = np.unique(np.linspace(0, len(result.eval_steps) - 1, columns).round().astype(int))
    table = Table(title="Held-out accuracy (mean over seeds) by step")
    table.add_column("sampler", no_wrap=True)
    for j in pick:
        table.add_column(str(result.eval_steps[j]), justify="right")
    for name, curve in result.curves.items():
        mean = curve.mean(axis=0)
        table.add_row(name, *(f"{mean[j]:.3f}" for j in pick))
    return table


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
