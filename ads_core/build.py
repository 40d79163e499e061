"""The whole offline build in one process: format → score (shards) → merge → cluster → sort.

The Prefect flow `ads-build` composes the same stage functions as cached tasks; this in-process
path has no caching and is what tests and quick local runs use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from ads_core import defaults, models, storage
from ads_core import manifest as mf
from ads_core.cluster import ClusterConfig, cluster_stage
from ads_core.format import FormatConfig, format_dataset
from ads_core.score import ScoreConfig, make_backend, merge_scores, score_shard
from ads_core.sort import sort_stage

ProgressFactory = Callable[[str, int | None], AbstractContextManager[Callable[[int], None] | None]]


@dataclass
class BuildConfig:
    format: FormatConfig = field(default_factory=FormatConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)


@dataclass
class BuildResult:
    formatted: mf.Manifest
    scores: mf.Manifest
    clusters: mf.Manifest
    final: mf.Manifest

    @property
    def final_uri(self) -> str:
        return self.final.output_uri("train")


def _no_progress(_: str, __: int | None) -> Iterator[None]:
    return nullcontext()  # type: ignore[return-value]


def stage_uris(out: str) -> dict[str, str]:
    """Where each stage's main artifact lives under OUT."""
    return {
        "formatted": storage.join(out, "formatted", "train.parquet"),
        "scores": storage.join(out, "scores", "scores.parquet"),
        "assignments": storage.join(out, "clusters", "assignments.parquet"),
        "final": storage.join(out, "final", "train.parquet"),
    }


def build(source: str | None, out: str, cfg: BuildConfig | None = None,
          progress: ProgressFactory | None = None) -> BuildResult:
    cfg = cfg or BuildConfig()
    progress = progress or _no_progress  # type: ignore[assignment]
    source = source or defaults.sample_path()
    uris = stage_uris(out)
    with progress("format", None) as advance:
        formatted = format_dataset(source, out, cfg.format, progress=advance)
    n_rows = formatted.counts["rows_out"]
    if n_rows < 2:
        raise ValueError(f"only {n_rows} usable rows after formatting; need at least 2 to cluster")
    scorer = make_backend(cfg.score)
    shard_uris = []
    with progress("score (embed + NLL)", n_rows) as advance:
        for i in range(cfg.score.num_shards):
            shard = score_shard(uris["formatted"], out, i, cfg.score, advance, scorer=scorer)
            shard_uris.append(shard.output_uri("scores"))
    scores = merge_scores(uris["formatted"], shard_uris, out)
    with progress("cluster", None):
        clusters = cluster_stage(uris["scores"], out, cfg.cluster)
    with progress("sort", None):
        final = sort_stage(uris["formatted"], uris["scores"], uris["assignments"], out,
                           extra={"policy_model": models.resolve_model(cfg.score.model),
                                  "dataset": formatted.extra.get("name")})
    return BuildResult(formatted, scores, clusters, final)
