"""Commands about the samplers: `ads simulate` (data schedulers compared on a synthetic GRPO learner) and `ads
dots-train` (DOTS's adaptive-difficulty predictor for `--sampler dots`). Registered by ``ads_cli.main``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import numpy as np
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ads_cli.common import console as err_console
from ads_cli.common import fail
from ads_cli.options import common_parameters, config_parameters, resolve_config, validation_message, with_signature
from ads_core.config.simulate import DEFAULT_SAMPLERS, SimulatedSampler, SimulationConfig

if TYPE_CHECKING:
    from ads_core.simulator.run import SimulationResult

console = Console()
SAMPLER_NAMES: tuple[str, ...] = get_args(SimulatedSampler)


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` and ``dots-train`` commands to an ``ads`` Typer app."""
    app.command("simulate")(simulate)
    app.command("dots-train")(dots_train_cmd)


def simulate(
    seeds: Annotated[int, typer.Option(help="Number of seeds (worlds); seeds 0..N-1 are run.", min=1)] = 5,
    samplers: Annotated[
        str, typer.Option(help=f"Comma-separated samplers ({', '.join(SAMPLER_NAMES)}), or 'all'.")
    ] = ",".join(DEFAULT_SAMPLERS),
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Directory for simulation.json, simulation.png and simulation_windows.png."),
    ] = Path("simulation"),
    plot: Annotated[
        bool,
        typer.Option(
            help="Write the PNG plots: accuracy versus step, and each ADS sampler's window position and success "
            "per cluster over steps (first seed)."
        ),
    ] = True,
    **options: Any,
) -> None:
    """Compare samplers on a synthetic GRPO learner: steps (and rollouts) each needs to reach uniform's final
    accuracy.

    The learner is a model, not evidence about real LLMs (see docs/sampler.md): --learner simple is the
    calibrated one, --learner coupled the second one (transfer by skill distance, forgetting, memorisation,
    noisier ranks). ads-frontier is ADS with --window frontier; dynamic is DAPO-style dynamic sampling, which
    rolls out extra generation batches (the rollout ratio column counts them). Every option of the learner and
    of the ADS sampler is a field of the config tree (ads_core/config/simulate.py); --set reaches the rest.
    """
    from ads_core.sampler.plots import save_plot, save_window_plot
    from ads_core.simulator.run import format_curves, format_summary, run_simulation

    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    names = SAMPLER_NAMES if samplers.strip() == "all" else tuple(_split(samplers))
    base = resolve_config(SimulationConfig, options, config_file, assignments)
    try:
        cfg = base.replaced(seeds=tuple(range(seeds)), samplers=names)
    except ValidationError as exc:
        raise fail(validation_message(SimulationConfig, exc)) from None

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
    written = [out / "simulation.json"]
    if plot:
        save_plot(result, str(out / "simulation.png"))
        written.append(out / "simulation.png")
        if result.window_traces:
            title = f"Window position and success per cluster, seed {cfg.seeds[0]} ('{cfg.learner}' learner)"
            save_window_plot(result.window_traces, str(out / "simulation_windows.png"), title)
            written.append(out / "simulation_windows.png")

    # plain text, never wrapped or cut: the same lines as format_summary, easy to paste into a report
    console.print(format_summary(result), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {', '.join(str(p) for p in written)}", highlight=False, soft_wrap=True)


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


with_signature(
    simulate,
    config_parameters(SimulationConfig, ("", "ads"), exclude=("ads.seed",))
    + common_parameters(SimulationConfig, "--set dots.memory_size=256"),
)


def dots_train_cmd(
    artifact: Annotated[str, typer.Argument(help="The training artifact (OUT/final/train.parquet).")],
    policy: Annotated[
        list[str],
        typer.Option(
            "--policy",
            "-p",
            help="A source policy (model folder) whose rollouts label the problems; repeat (2 or more). Not the "
            "policy DOTS will train: earlier checkpoints, the warm-up policy, the base policy.",
        ),
    ],
    held_out: Annotated[
        str, typer.Option("--held-out", help="A policy only measured on: the predictor's rho is reported on it.")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Predictor folder (default: ART's folder/dots-predictor).")
    ] = None,
    embed_model: Annotated[
        str | None,
        typer.Option("--embed-model", help="Frozen embedding model (default: the model the build scored with)."),
    ] = None,
    num_generations: Annotated[int, typer.Option(help="Rollouts per problem and policy (a label's G).")] = 4,
    temperature: Annotated[float, typer.Option(help="Rollout temperature (training's).")] = 1.0,
    max_completion_length: Annotated[int, typer.Option(help="Tokens per rollout at most.")] = 16,
    hidden: Annotated[int, typer.Option(help="Adapter hidden size.")] = 128,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 20,
    reference_size: Annotated[int, typer.Option(help="K: labelled references per batch and in the evaluation.")] = 64,
    seed: Annotated[int, typer.Option(help="Seed of the fit and the rollouts.")] = 1,
) -> None:
    """Train the DOTS predictor: label every problem with each source policy's rollouts, fit the adapter with its
    attention and calibration heads (BCE), and print its Pearson rho on the held-out policy beside what raw
    embeddings give on the same data. Then train with `ads train ART --sampler dots --set sampler.dots.predictor=OUT`.
    """
    from ads_core import storage
    from ads_core.sampler.dots.make import DotsTrainSettings, train_predictor
    from ads_core.sampler.dots.predictor import FitSettings

    if not Path(artifact).is_file():
        raise fail(f"{artifact}: no such training artifact")
    if len(policy) < 2:
        raise fail("--policy: give 2 or more source policies (the predictor learns across policies)")
    for p in [*policy, held_out]:
        if not (Path(p) / "config.json").is_file():
            raise fail(f"{p}: not a model folder (no config.json)")
    if embed_model is None:
        try:
            embed_model = storage.read_json(str(Path(artifact).parent / "manifest.json"))["extra"]["policy_model"]
        except (OSError, ValueError, KeyError, TypeError):
            raise fail(f"{artifact}: its manifest names no model; give --embed-model") from None
    folder = str(out or Path(artifact).parent / "dots-predictor")
    settings = DotsTrainSettings(
        num_generations=num_generations,
        temperature=temperature,
        max_completion_length=max_completion_length,
        rollout_seed=seed,
        fit=FitSettings(hidden=hidden, epochs=epochs, reference_size=reference_size, seed=seed),
        eval_reference_size=reference_size,
    )
    from ads_core.grading.api import start_verifier

    start_verifier()  # the labels' grades: answers that need math-verify must not meet it still starting
    result = train_predictor(
        artifact, list(policy), held_out, str(embed_model), folder, settings, log=err_console.print
    )
    for name, mean in result.label_means.items():
        err_console.print(f"  label mean success {mean:.3f}  {name}")
    err_console.print(
        f"held-out policy {held_out}: Pearson rho {result.rho:.3f} (trained predictor) vs {result.rho_raw:.3f} "
        f"(raw embeddings), K={result.reference_size} references, mean of 5 draws"
    )
    err_console.print(f"predictor: {folder}  ({result.seconds:.0f} s)")
