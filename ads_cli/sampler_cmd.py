"""`ads dots-train`: DOTS's adaptive-difficulty predictor for `--sampler dots`. Registered by ``ads_cli.main``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ads_cli.common import console as err_console
from ads_cli.common import fail


def register(app: typer.Typer) -> None:
    """Add the ``dots-train`` command to an ``ads`` Typer app."""
    app.command("dots-train")(dots_train_cmd)


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
    from ads_core.sampler.dots.predictor import FitSettings
    from ads_core.train.dots.make import DotsTrainSettings, train_predictor

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
