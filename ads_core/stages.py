"""The build's stages, each declared once: format -> score (shards) -> merge -> cluster -> sort -> report.

A `Stage` names its config section, the artifacts it reads and writes (names in `ARTIFACTS`, laid
out under OUT), an explicit `version` (bump it by hand when the stage's output changes: it is part
of the cache key, so a docstring edit never rescores anything), the resources it wants, and `run()`.

The in-process `build()` (ads_core.build) and the Prefect flow `ads-build` (flows/ads_build.py,
through the one generic task wrapper in tasks/stage_task.py) iterate this same list, so both write
the same OUT tree. `stage_key()` is the content key both the Prefect cache and the refresh logic use:
input artifacts by content hash, never by path or run id; it is stamped into each manifest, so
`reusable()` can tell from storage alone that a stage need not run again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

from ads_core import cluster as cluster_stage
from ads_core import format as format_stage
from ads_core import manifest as mf
from ads_core import models, storage
from ads_core import report as report_stage
from ads_core import score as score_stage
from ads_core.config import STAGE_NAMES, BuildConfig, ScoreConfig
from ads_core.readers import InputError

ProgressFactory = Callable[[str, int | None], AbstractContextManager[Callable[[int], None] | None]]

# Artifact name -> path under OUT ({shard} is filled in for sharded artifacts).
ARTIFACTS: dict[str, str] = {
    "formatted": "formatted/train.parquet",
    "rejects": "formatted/rejects.parquet",
    "score_shard": "scores/shards/{shard}/scores.parquet",
    "scores": "scores/scores.parquet",
    "assignments": "clusters/assignments.parquet",
    "centroids": "clusters/centroids.npy",
    "final": "final/train.parquet",
    "report": "report/build_report.png",
}
MIN_ROWS = 2


def _no_progress(_: str, __: int | None) -> AbstractContextManager[None]:
    return nullcontext()


@dataclass
class BuildContext:
    """Where a build reads and writes, and with which config; everything a stage's run() needs."""

    source: str
    out: str
    config: BuildConfig
    progress: ProgressFactory = _no_progress

    @property
    def dataset(self) -> str:
        from ads_core.format import dataset_name

        return self.config.format.name or dataset_name(self.source)

    def uri(self, artifact: str, shard: int | None = None) -> str:
        rel = ARTIFACTS[artifact]
        if "{shard}" in rel:
            n = self.config.score.num_shards
            rel = rel.format(shard=f"shard-{shard:05d}-of-{n:05d}")
        return storage.join(self.out, *rel.split("/"))

    def shard_uris(self) -> list[str]:
        return [self.uri("score_shard", i) for i in range(self.config.score.num_shards)]


@dataclass(frozen=True)
class Resources:
    """What a stage runs best on; `accelerator="optional"` uses a GPU when one is visible."""

    accelerator: Literal["none", "optional", "required"] = "none"
    cpus: int = 1


@dataclass(frozen=True)
class Stage:
    name: str
    section: str | None  # the BuildConfig section it is configured by
    inputs: tuple[str, ...]  # artifact names ("source" = the dataset itself)
    outputs: tuple[str, ...]  # artifact names; the first is the main output
    version: str
    run: Callable[[BuildContext, int | None], mf.Manifest]
    resources: Resources = field(default_factory=Resources)
    sharded: bool = False  # one run per score shard
    key_config: Callable[[BuildConfig], dict[str, Any]] | None = None  # default: the whole section
    key_extra: Callable[[BuildContext], dict[str, Any]] | None = None

    def shards(self, ctx: BuildContext) -> list[int | None]:
        return list(range(ctx.config.score.num_shards)) if self.sharded else [None]

    def label(self, shard: int | None) -> str:
        return self.name if shard is None else f"{self.name}-shard-{shard}"

    def main_uri(self, ctx: BuildContext, shard: int | None = None) -> str:
        return ctx.uri(self.outputs[0], shard)

    def config_of(self, cfg: BuildConfig) -> dict[str, Any]:
        if self.key_config is not None:
            return self.key_config(cfg)
        return getattr(cfg, self.section).model_dump() if self.section else {}


# ---------------------------------------------------------------------------------------------
# run() of each stage


def run_format(ctx: BuildContext, _: int | None) -> mf.Manifest:
    from ads_core.format import format_dataset

    fmt = ctx.config.format.model_copy(update={"name": ctx.dataset})
    with ctx.progress("format", None) as advance:
        manifest = format_dataset(ctx.source, ctx.out, fmt, progress=advance)
    if manifest.counts["rows_out"] < MIN_ROWS:
        raise InputError(
            f"only {manifest.counts['rows_out']} usable rows after formatting; need at least {MIN_ROWS} to cluster"
        )
    return manifest


_scorer_lock = threading.Lock()
_scorer: tuple[str, Any] | None = None  # (config key, (backend, tokenizer)): one model per process


def cached_scorer(cfg: ScoreConfig) -> Any:
    """Load the model once per process (a build, or a Dask worker) and reuse it for every shard."""
    global _scorer
    from ads_core.fingerprint import model_fingerprint

    # The weights' content too: a checkpoint rewritten in place must not be served from memory.
    key = json.dumps(
        [cfg.model_dump(exclude={"num_shards"}), model_fingerprint(cfg.model)], sort_keys=True, default=str
    )
    with _scorer_lock:
        if _scorer is None or _scorer[0] != key:
            from ads_core.scorer import make_backend

            _scorer = None  # drop the old model before loading another
            _scorer = (key, make_backend(cfg))
        return _scorer[1]


def run_score_shard(ctx: BuildContext, shard: int | None) -> mf.Manifest:
    from ads_core.score import score_shard, shard_bounds

    cfg = ctx.config.score
    index = shard or 0
    start, end = shard_bounds(storage.parquet_num_rows(ctx.uri("formatted")), cfg.num_shards, index)
    with ctx.progress(f"score (embed + NLL) shard {index + 1}/{cfg.num_shards}", end - start) as advance:
        return score_shard(ctx.uri("formatted"), ctx.out, index, cfg, advance, scorer=lambda: cached_scorer(cfg))


def run_merge(ctx: BuildContext, _: int | None) -> mf.Manifest:
    from ads_core.score import merge_scores

    return merge_scores(ctx.uri("formatted"), ctx.shard_uris(), ctx.out)


def run_cluster(ctx: BuildContext, _: int | None) -> mf.Manifest:
    from ads_core.cluster import cluster_stage

    with ctx.progress("cluster", None):
        return cluster_stage(ctx.uri("scores"), ctx.out, ctx.config.cluster, previous_dir=previous_clusters(ctx))


def previous_clusters(ctx: BuildContext) -> str:
    """Where the previous build's cluster state is: `cluster.previous`, else this OUT's own clusters/."""
    previous = ctx.config.cluster.previous
    if not previous:
        return storage.join(ctx.out, "clusters")
    previous = previous.rstrip("/")
    return previous if previous.endswith("/clusters") else storage.join(previous, "clusters")


def _previous_key(ctx: BuildContext) -> dict[str, Any]:
    """An explicit previous build is an input (its centroids by content). This OUT's own previous state
    is not: keying on it would make every rerun a miss, and a changed OUT fails the intact check anyway."""
    if not ctx.config.cluster.previous:
        return {}
    centroids = storage.join(previous_clusters(ctx), "centroids.npy")
    return {"previous": mf.artifact_hash(centroids) if storage.exists(centroids) else None}


def run_sort(ctx: BuildContext, _: int | None) -> mf.Manifest:
    from ads_core.sort import sort_stage

    with ctx.progress("sort", None):
        return sort_stage(
            ctx.uri("formatted"),
            ctx.uri("scores"),
            ctx.uri("assignments"),
            ctx.out,
            extra={"policy_model": models.resolve_model(ctx.config.score.model), "dataset": ctx.dataset},
        )


def run_report(ctx: BuildContext, _: int | None) -> mf.Manifest:
    from ads_core.report import write_report

    with ctx.progress("report", None):
        manifest = write_report(ctx.uri("final"), ctx.uri("assignments"), ctx.out, ctx.config.report, ctx.dataset)
        if ctx.config.report.decontaminate:
            from ads_core.decontam import add_to_report

            manifest = add_to_report(ctx.uri("final"), mf.stage_dir_of(ctx.uri("report")), manifest)
    return manifest


def _model_key(ctx: BuildContext) -> dict[str, Any]:
    from ads_core.fingerprint import model_fingerprint

    return {"model": model_fingerprint(ctx.config.score.model)}


STAGES: tuple[Stage, ...] = (
    Stage("format", "format", ("source",), ("formatted", "rejects"), format_stage.VERSION, run_format),
    Stage(
        "score",
        "score",
        ("formatted",),
        ("score_shard",),
        score_stage.VERSION,
        run_score_shard,
        resources=Resources(accelerator="optional"),
        sharded=True,
        key_extra=_model_key,
    ),
    Stage(
        "merge",
        None,
        ("formatted", "score_shard"),
        ("scores",),
        score_stage.VERSION,
        run_merge,
        key_config=lambda cfg: {"num_shards": cfg.score.num_shards},
    ),
    Stage(
        "cluster",
        "cluster",
        ("scores",),
        ("assignments", "centroids"),
        cluster_stage.VERSION,
        run_cluster,
        resources=Resources(accelerator="optional"),
        key_extra=_previous_key,
    ),
    Stage(
        "sort",
        None,
        ("formatted", "scores", "assignments"),
        ("final",),
        "1",
        run_sort,
        key_config=lambda cfg: {"model": cfg.score.model, "dataset": cfg.format.name},
    ),
    Stage(
        "report",
        "report",
        ("final", "assignments"),
        ("report",),
        report_stage.VERSION,
        run_report,
        key_config=lambda cfg: {**cfg.report.model_dump(), "dataset": cfg.format.name},
    ),
)
STAGES_BY_NAME = {s.name: s for s in STAGES}
assert tuple(STAGES_BY_NAME) == STAGE_NAMES, "config.STAGE_NAMES must list the stages in order"


def stages_from(name: str | None) -> set[str]:
    """`force_from=name`: that stage and every later one."""
    if not name:
        return set()
    return set(STAGE_NAMES[STAGE_NAMES.index(name) :])


# ---------------------------------------------------------------------------------------------
# content keys


def source_digest(source: str) -> str:
    """Tree hash of a local/remote dataset file or directory; a hub id is keyed by its name."""
    from ads_core import readers

    if storage.exists(source):
        return storage.tree_hash(source, readers.SUPPORTED_SUFFIXES)
    return f"id:{source}"


def input_digests(stage: Stage, ctx: BuildContext) -> dict[str, Any]:
    """The content of every input: artifacts by their sha256 (from the manifest beside them)."""
    digests: dict[str, Any] = {}
    for name in stage.inputs:
        if name == "source":  # the path too: rows record it (extra_info.source_file)
            digests[name] = [ctx.source, source_digest(ctx.source)]
        elif name == "score_shard":
            digests[name] = [mf.artifact_hash(u) for u in ctx.shard_uris()]
        else:
            digests[name] = mf.artifact_hash(ctx.uri(name))
    return digests


def stage_key(stage: Stage, ctx: BuildContext, shard: int | None = None) -> str:
    """Content identity of one stage run: its version, config and the content of its inputs.

    It is stamped into the stage's manifest (`extra.stage_key`), so whether a stage can be reused is
    decided from storage alone, however Prefect is configured and from any machine sharing OUT.
    """
    payload = {
        "stage": stage.name,
        "version": stage.version,
        "shard": shard,
        "config": stage.config_of(ctx.config),
        "inputs": input_digests(stage, ctx),
        "extra": stage.key_extra(ctx) if stage.key_extra else None,
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return f"{stage.label(shard)}-{hashlib.sha256(blob).hexdigest()[:40]}"


def cache_key(stage: Stage, ctx: BuildContext, shard: int | None = None) -> str:
    """The Prefect cache key: the stage key plus the output root (a build into another OUT writes there)."""
    return f"{stage_key(stage, ctx, shard)}-{hashlib.sha256(ctx.out.encode()).hexdigest()[:12]}"


def run_stage(stage: Stage, ctx: BuildContext, shard: int | None = None, key: str | None = None) -> mf.Manifest:
    """Run one stage and stamp its stage key into the manifest it wrote (the manifest is written last).

    `key`: the stage key when the caller already computed it (it hashes the inputs, the source included).
    """
    key = key or stage_key(stage, ctx, shard)
    manifest = stage.run(ctx, shard)
    manifest.extra["stage_key"] = key
    mf.write(mf.stage_dir_of(stage.main_uri(ctx, shard)), manifest)
    return manifest


def reusable(stage: Stage, ctx: BuildContext, shard: int | None = None, key: str | None = None) -> mf.Manifest | None:
    """The stage's manifest in OUT when it records this very stage key and its outputs are intact.

    The recorded key is compared first, so a stage that must run anyway never has its outputs hashed.
    """
    directory = mf.stage_dir_of(stage.main_uri(ctx, shard))
    try:
        recorded = mf.read(directory).extra.get("stage_key")
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    if recorded != (key or stage_key(stage, ctx, shard)):
        return None
    return mf.verify(directory)


def outputs_digest(manifest: mf.Manifest) -> str:
    """One hash over every output hash a manifest lists (a stage's identity in storage)."""
    hashes = {name: entry["sha256"] for name, entry in sorted(manifest.outputs.items())}
    return "sha256:" + hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def iter_runs(ctx: BuildContext) -> Iterator[tuple[Stage, int | None]]:
    for stage in STAGES:
        for shard in stage.shards(ctx):
            yield stage, shard
