"""`ads`: the command line. Every command has --help; long work shows rich progress bars."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ads_core import defaults
from ads_core.readers import InputError

app = typer.Typer(
    help="ADS pipeline: build clustered, difficulty-sorted GRPO training sets and schedule them adaptively.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """One `error:` line on stderr and exit status 2, for input the pipeline cannot use."""
    one_line = " ".join(str(message).split())  # exception texts quoted in messages may span lines
    console.print(f"[bold red]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


@app.callback()
def main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command("format")
def format_cmd(
    source: Annotated[str, typer.Argument(
        help="A .parquet/.json/.jsonl/.csv file, a directory of those, or a Hugging Face dataset id "
             "(local cache only). Default: the bundled GSM8K sample.")] = "",
    out: Annotated[str, typer.Option("--out", "-o", help="Output root (local path or s3://); "
                                     "writes OUT/formatted/.")] = defaults.DEFAULT_OUT,
    name: Annotated[str | None, typer.Option(help="Dataset name, used as data_source when rows have none.")] = None,
    question_col: Annotated[str | None, typer.Option(help="Column holding the question.")] = None,
    solution_col: Annotated[str | None, typer.Option(help="Column holding the reference solution.")] = None,
    answer_col: Annotated[str | None, typer.Option(help="Column holding the final answer.")] = None,
    options_col: Annotated[str | None, typer.Option(help="Column holding multiple-choice options.")] = None,
    template: Annotated[str, typer.Option(help="Named prompt template: ads_think, boxed or plain.")] = "ads_think",
    template_text: Annotated[str | None, typer.Option(help="Custom prompt template containing {question}.")] = None,
    split: Annotated[str, typer.Option(help="Split to read for a Hugging Face id.")] = "train",
) -> None:
    """Turn a math dataset into verl's GRPO schema (OUT/formatted/train.parquet + rejects + manifest)."""
    from ads_core.format import FormatConfig, format_dataset

    source = source or defaults.sample_path()
    cfg = FormatConfig(name=name, question_col=question_col, solution_col=solution_col, answer_col=answer_col,
                       options_col=options_col, template=template, template_text=template_text, split=split)
    try:
        with progress_bar("format rows") as advance:
            manifest = format_dataset(source, out, cfg, progress=advance)
    except InputError as exc:
        raise fail(str(exc)) from None
    print_format_summary(manifest.counts, manifest.extra.get("detected", {}), out)


def print_format_summary(counts: dict, detected: dict, out: str) -> None:
    table = Table(title="format", show_header=True)
    table.add_column("what")
    table.add_column("rows", justify="right")
    table.add_row("read", str(counts["rows_in"]))
    table.add_row("kept", str(counts["rows_out"]))
    for reason, n in counts["rejects_by_reason"].items():
        table.add_row(f"rejected: {escape(reason)}", str(n))
    console.print(table)
    for file, layout in detected.items():
        cols = escape(", ".join(f"{k}={v}" for k, v in layout.items() if v and k != "layout"))
        console.print(f"[dim]{escape(file)}[/]: layout [bold]{layout['layout']}[/] ({cols})", highlight=False)
    console.print(escape(f"output: {out.rstrip('/')}/formatted/train.parquet "
                         f"(rejects: {out.rstrip('/')}/formatted/rejects.parquet)"), highlight=False)


@app.command("make-tiny-model")
def make_tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(help="Where to save the model (save_pretrained layout).")],
    preset: Annotated[str, typer.Option(
        help="tiny (~0.75M params, warmed up on the bundled sample; tests and demo) or bench (~47M params).")
    ] = "tiny",
) -> None:
    """Build a small Qwen2-style causal LM + locally trained tokenizer, deterministically, with no download."""
    from ads_core.models import TINY_PRESETS, make_tiny_model

    if preset not in TINY_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {', '.join(TINY_PRESETS)}")
    path = make_tiny_model(directory, preset)
    console.print(f"saved {preset} model to {path} (load it with --model {path})", highlight=False)


@app.command("build")
def build_cmd(
    source: Annotated[str, typer.Argument(
        help="Dataset file, directory or HF id (see `ads format --help`). Default: the bundled GSM8K sample.")] = "",
    out: Annotated[str, typer.Option("--out", "-o", help="Output root (local path or s3://).")] = defaults.DEFAULT_OUT,
    model: Annotated[str, typer.Option(
        help="Policy model: a local dir or hub id (local cache only); `default` builds a tiny local model.")
    ] = "default",
    clusters: Annotated[int, typer.Option("--clusters", "-k", help="K-Means clusters (clamped for small sets).")] = 64,
    max_length: Annotated[int, typer.Option(help="Max tokens per row for scoring; longer rows are flagged.")] = 2048,
    pca_dim: Annotated[int, typer.Option(help="PCA dimensions before K-Means (0 = off).")] = 128,
    text_mode: Annotated[str, typer.Option(
        help="question_plus_solution (embed both) or question_only (embed the question).")] = "question_plus_solution",
    shards: Annotated[int, typer.Option(help="Score shards (units of resume and parallelism).")] = 1,
    token_budget: Annotated[int, typer.Option(help="Padded tokens per forward batch.")] = 16_384,
    scoring_backend: Annotated[str, typer.Option(help="auto, transformers or vllm.")] = "auto",
    kmeans_backend: Annotated[str, typer.Option(help="auto, faiss, sklearn or cuml.")] = "auto",
    seed: Annotated[int, typer.Option(help="K-Means seed.")] = 42,
    name: Annotated[str | None, typer.Option(help="Dataset name (default: from SOURCE).")] = None,
    question_col: Annotated[str | None, typer.Option(help="Override the detected question column.")] = None,
    solution_col: Annotated[str | None, typer.Option(help="Override the detected solution column.")] = None,
    answer_col: Annotated[str | None, typer.Option(help="Override the detected answer column.")] = None,
    force_from: Annotated[str | None, typer.Option(
        help="Recompute this stage and every later one: format, score, merge, cluster or sort.")] = None,
    dask: Annotated[str | None, typer.Option(
        help="Score shards on Dask: local, local-cuda (one worker per GPU) or a scheduler address.")] = None,
) -> None:
    """Format → embed + NLL (one fused pass) → K-Means → sort: writes OUT/final/train.parquet for training.

    Runs the cached Prefect flow `ads-build`: a rerun resumes from the stages whose inputs did not change.
    With PREFECT_API_URL set (e.g. `ads server`), the run shows in that server's UI; without it, Prefect's
    ephemeral mode starts a temporary local server (~10-20 s) with PREFECT_HOME under the ADS cache dir.
    """
    from ads_core.build import BuildConfig
    from ads_core.cluster import ClusterConfig
    from ads_core.format import FormatConfig
    from ads_core.models import ModelLoadError
    from ads_core.score import ScoreConfig

    try:  # the same checks as before, so bad options fail before Prefect starts
        BuildConfig(
            format=FormatConfig(name=name, question_col=question_col, solution_col=solution_col,
                                answer_col=answer_col),
            score=ScoreConfig(model=model, max_length=max_length, text_mode=text_mode, num_shards=shards,
                              token_budget=token_budget, backend=scoring_backend),
            cluster=ClusterConfig(num_clusters=clusters, pca_dim=pca_dim or None, backend=kmeans_backend,
                                  seed=seed),
        )
    except (InputError, ValueError) as exc:
        raise fail(str(exc)) from None
    if source and _looks_like_path(source) and not _exists(source):  # fail before Prefect's start-up cost
        raise fail(f"{source}: no such file or directory")
    from flows import local_prefect_env

    def hide_run_errors(record: logging.LogRecord) -> bool:  # printed once, as the `error:` line
        return not (record.name.startswith(("prefect.flow_runs", "prefect.task_runs"))
                    and record.levelno >= logging.ERROR)

    # Prefect's INFO logs still reach its API/UI; the terminal shows warnings (all of it with -v).
    quiet = [] if logging.getLogger().level <= logging.DEBUG else list(logging.getLogger().handlers)
    levels = [h.level for h in quiet]
    for handler in quiet:
        handler.setLevel(max(handler.level, logging.WARNING))
        handler.addFilter(hide_run_errors)
    with local_prefect_env(defaults.cache_dir()) as api_url:
        if api_url is None:
            console.print("[dim]no Prefect server configured: starting a temporary local one (ephemeral mode, "
                          "~10-20 s); run `ads server` and set PREFECT_API_URL to skip this and watch in the UI[/]")
        from prefect.exceptions import ParameterTypeError

        from flows.ads_build import ads_build
        from tasks.base import set_progress_factory

        set_progress_factory(progress_bar)
        try:
            result = ads_build(source=source or None, dataset=name, out=out, model=model, clusters=clusters,
                               shards=shards, max_length=max_length, token_budget=token_budget, text_mode=text_mode,
                               scoring_backend=scoring_backend, pca_dim=pca_dim, kmeans_backend=kmeans_backend,
                               seed=seed, question_col=question_col, solution_col=solution_col,
                               answer_col=answer_col, dask=dask, force_from=force_from)
        except (InputError, ModelLoadError, ValueError, ParameterTypeError) as exc:
            raise fail(str(exc)) from None
        finally:
            set_progress_factory(None)
            for handler, level in zip(quiet, levels, strict=True):
                handler.setLevel(level)
                handler.removeFilter(hide_run_errors)
    from ads_core import manifest as mf
    from ads_core import storage

    formatted = mf.read(storage.join(result["out"], "formatted"))
    print_format_summary(formatted.counts, formatted.extra.get("detected", {}), out)
    states = result["stages"]
    console.print("stages: " + ", ".join(f"{k} [bold]{v}[/]" for k, v in states.items()), highlight=False)
    print_build_summary(result["final_uri"])


def _looks_like_path(source: str) -> bool:
    """A URI, an absolute/relative path or a data file name; `owner/name` alone may be a hub id."""
    from ads_core.readers import SUPPORTED_SUFFIXES, looks_like_hub_id

    return not looks_like_hub_id(source) or source.lower().endswith(SUPPORTED_SUFFIXES)


def _exists(uri: str) -> bool:
    from ads_core import storage

    try:
        return storage.exists(uri)
    except Exception:  # noqa: BLE001 - unreachable storage is reported by the flow with its own message
        return True


@app.command("server")
def server_cmd(
    host: Annotated[str, typer.Option(help="Interface to listen on (keep 127.0.0.1 unless you mean to expose it).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the API and the UI.")] = 4200,
) -> None:
    """Start a local Prefect server with its UI, in the foreground (Ctrl-C stops it), to watch builds.

    It uses the same PREFECT_HOME as `ads build` (default: <ADS cache dir>/prefect), so earlier local builds
    show up too. Point builds at it with `export PREFECT_API_URL=http://HOST:PORT/api`.
    """
    import os
    import sys

    from flows import local_prefect_home

    home = local_prefect_home(defaults.cache_dir())
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    console.print(f"Prefect UI: http://{host}:{port}  (PREFECT_HOME={home})\n"
                  f"in another shell: export PREFECT_API_URL=http://{host}:{port}/api  then `ads build`, "
                  "`prefect deploy`, `prefect worker start` report here", highlight=False, soft_wrap=True)
    os.execve(sys.executable, [sys.executable, "-m", "prefect", "server", "start", "--host", host,
                               "--port", str(port)], env)


def print_build_summary(final_uri: str) -> None:
    """Cluster sizes and a difficulty histogram, as text."""
    import numpy as np
    import polars as pl

    from ads_core import storage

    df = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "difficulty", "truncated"]))
    sizes = df.group_by("cluster_id").len().sort("cluster_id")["len"].to_numpy()
    console.print(f"[bold]{df.height}[/] rows in [bold]{len(sizes)}[/] clusters "
                  f"(sizes min {sizes.min()}, median {int(np.median(sizes))}, max {sizes.max()}); "
                  f"{int(df['truncated'].sum())} rows truncated at max_length")
    counts, edges = np.histogram(df["difficulty"].to_numpy(), bins=10)
    width = max(counts.max(), 1)
    console.print("difficulty (token-mean NLL of the reference solution):")
    for c, lo, hi in zip(counts, edges[:-1], edges[1:], strict=True):
        console.print(f"  {lo:7.3f} - {hi:7.3f} | {'#' * int(40 * c / width):<40} {c}", highlight=False)
    console.print(f"final artifact: {final_uri}", highlight=False)


def _parse_assignments(items: list[str] | None, what: str) -> dict[str, object]:
    """`KEY=VALUE` options into a dict; values are read as YAML scalars (0.5 -> float, true -> bool)."""
    import yaml

    out: dict[str, object] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"{what} {item!r} must look like KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else None
    return out


@app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train_cmd(
    ctx: typer.Context,
    artifact: Annotated[str, typer.Argument(help="The final artifact: OUT/final/train.parquet (local or s3://).")],
    model: Annotated[str | None, typer.Option(
        help="Policy to train. Default: the model the difficulties were scored with (manifest).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved verl config and command; "
                                          "don't train.")] = False,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs per node.")] = 1,
    nnodes: Annotated[int, typer.Option(help="Number of nodes.")] = 1,
    ray_address: Annotated[str | None, typer.Option(
        help="http://head:8265 submits a Ray job; auto or ray://head:10001 joins a running cluster.")] = None,
    sampler: Annotated[list[str] | None, typer.Option(
        "--sampler", "-s", help="ADS sampler setting KEY=VALUE (data.ads_sampler.*), repeatable.")] = None,
    eval_set: Annotated[list[str] | None, typer.Option(
        "--eval-set", help="Validation set: a name under OUT/eval or a .parquet path, repeatable. "
                           "Default: every set in OUT/eval.")] = None,
    no_eval: Annotated[bool, typer.Option("--no-eval", help="Train without validation sets.")] = False,
    steps: Annotated[int | None, typer.Option(help="trainer.total_training_steps.")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Checkpoints and metrics (default ./ads-runs/<name>).")] = None,
    name: Annotated[str | None, typer.Option(help="Experiment name (default <dataset>-ads; same name = resume).")
                    ] = None,
    decontaminate: Annotated[str, typer.Option(help="off, report or drop training rows that match eval questions."
                                               )] = "report",
) -> None:
    """Train GRPO with the ADS sampler on verl. Extra arguments are verl Hydra overrides (key=value)."""
    from ads_core import train as tr
    from ads_core.integrations.verl.config import ConfigError

    overrides = [a for a in ctx.args]
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise fail(f"unexpected arguments {bad}; verl overrides look like key=value")
    req = tr.TrainRequest(artifact_uri=artifact, model=model, n_gpus_per_node=gpus, nnodes=nnodes,
                          ray_address=ray_address, sampler=_parse_assignments(sampler, "--sampler"),
                          eval_sets=[] if no_eval else (eval_set or None), overrides=overrides, run_dir=run_dir,
                          experiment_name=name, total_training_steps=steps, decontaminate=decontaminate)
    try:
        if not dry_run:
            tr.check_launch_environment(req)
        with console.status("checking the artifact and composing the verl config"):
            plan = tr.plan_training(req, materialize=not dry_run)
    except (tr.ArtifactError, tr.LaunchError, ConfigError, ValueError, InputError) as exc:
        raise fail(str(exc)) from None
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if dry_run:
        import sys

        sys.stdout.write(plan.config_yaml)
        sys.stdout.write(f"\n# command:\n# {plan.command_line}\n")
        console.print(f"dry run: {plan.artifact.rows} rows, {plan.artifact.clusters} clusters, batch "
                      f"{plan.sampler_config.batch_size}; nothing launched", highlight=False)
        return
    console.print(f"launching: {escape(plan.command_line)}", highlight=False)
    code = tr.launch(plan)
    if code != 0:
        raise fail(f"verl exited with status {code}; see the log above (run dir {plan.run_dir})")
    metrics = tr.headline(tr.final_metrics(plan))
    for key, value in sorted(metrics.items()):
        console.print(f"  {escape(key)}: {value:g}", highlight=False)


@app.command("eval-sets")
def eval_sets_cmd(
    out: Annotated[str, typer.Option("--out", "-o", help="Output root; writes OUT/eval/<name>.parquet.")
                   ] = defaults.DEFAULT_OUT,
    source: Annotated[list[str] | None, typer.Option(
        "--set", help="NAME=PATH of an eval set (any format `ads format` reads), repeatable; replaces the "
                      "default set of that name.")] = None,
    names: Annotated[str | None, typer.Option(help="Comma-separated default sets (math500,aime24,amc23).")] = None,
    data_dir: Annotated[str | None, typer.Option(help="Directory with math500/, aime24/, amc23/ "
                                                 "(default: $ADS_EVAL_DATA_DIR or ../shared/data).")] = None,
    template: Annotated[str | None, typer.Option(help="Prompt template with {question} (default: the "
                                                 "training set's, from OUT/formatted).")] = None,
    train: Annotated[str | None, typer.Option(help="Training artifact to check for contamination "
                                              "(default: OUT/final/train.parquet if present).")] = None,
    drop: Annotated[bool, typer.Option("--drop", help="Also write OUT/eval/train_decontaminated.parquet "
                                       "without the matching rows.")] = False,
) -> None:
    """Write validation sets (MATH-500, AIME24, AMC23) in verl's schema and check the training set against them."""
    from ads_core import eval_sets as ev
    from ads_core import storage

    sources = {str(k): str(v) for k, v in _parse_assignments(source, "--set").items()}
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    try:
        results = ev.write_eval_sets(out, sources=sources, names=wanted, data_dir=data_dir, template=template)
    except InputError as exc:
        raise fail(str(exc)) from None
    table = Table(title="eval sets", show_header=True)
    for col in ("set", "rows", "rejected", "file"):
        table.add_column(col)
    for r in results.values():
        table.add_row(r.name, str(r.rows), str(r.rejected), escape(r.uri))
    console.print(table)
    train_uri = train or storage.join(out, "final", "train.parquet")
    if not storage.exists(train_uri):
        if train:
            raise fail(f"{train}: no such training artifact")
        return
    drop_to = storage.join(ev.eval_dir(out), "train_decontaminated.parquet") if drop else None
    report = ev.decontaminate(train_uri, {r.name: r.uri for r in results.values()}, drop_to=drop_to)
    storage.write_json(storage.join(ev.eval_dir(out), ev.REPORT_NAME), report.to_dict())
    console.print(f"decontamination: {report.contaminated} of {report.train_rows} training rows match an eval "
                  f"question {report.matches}", highlight=False)
    for ex in report.examples[:5]:
        console.print(f"  row {ex['row']} ({ex['eval_set']}): {escape(ex['question'][:100])}", highlight=False)
    if report.output_uri:
        console.print(f"without them: {escape(report.output_uri)}", highlight=False)


def _register_optional_commands() -> None:
    """Commands that live in their own modules register themselves here."""
    try:
        from ads_core import simulate_cli
    except ImportError:  # pragma: no cover - module not written yet
        return
    simulate_cli.register(app)


_register_optional_commands()


if __name__ == "__main__":  # pragma: no cover
    app()
