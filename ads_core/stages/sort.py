"""Sort stage: join formatted rows, scores and clusters; order by (cluster, difficulty, sample_id).

The final artifact is the verl schema plus `sample_id, cluster_id, rank_in_cluster, cluster_size,
difficulty`; `extra_info` also carries sample_id, cluster_id, rank_in_cluster, difficulty and
index (the final row position), so they reach verl's batches. The column names are the contract in
`ads_core.common.contract`, which training checks. The invariants are checked before anything is written.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ads_core import storage
from ads_core.common.contract import EXTRA_INFO_WRITTEN, FINAL_PATH, SAMPLER_COLUMNS
from ads_core.stages.base import Stage, StageContext
from ads_core.storage import manifest as mf

VERSION = "1"  # bump by hand when the final rows change for the same input (it is in the cache key)


class InvariantError(Exception):
    """The sorted table breaks an invariant; nothing was written."""


def sort_rows(formatted: pl.DataFrame, scores: pl.DataFrame, assignments: pl.DataFrame) -> pl.DataFrame:
    joined = formatted.join(scores.select("sample_id", "difficulty", "truncated"), on="sample_id", how="left").join(
        assignments.select("sample_id", "cluster_id"), on="sample_id", how="left"
    )
    missing = joined.filter(pl.col("difficulty").is_null() | pl.col("cluster_id").is_null()).height
    if missing:
        raise InvariantError(f"{missing} formatted rows have no score or no cluster")
    out = (
        joined.sort(["cluster_id", "difficulty", "sample_id"])
        .with_columns(
            pl.col("cluster_id").cum_count().over("cluster_id").cast(pl.Int64).sub(1).alias("rank_in_cluster"),
            pl.len().over("cluster_id").cast(pl.Int64).alias("cluster_size"),
        )
        .with_row_index("_pos")
    )
    inner = {
        "sample_id": pl.col("sample_id"),
        "cluster_id": pl.col("cluster_id").cast(pl.Int64),
        "rank_in_cluster": pl.col("rank_in_cluster"),
        "difficulty": pl.col("difficulty"),
        "index": pl.col("_pos").cast(pl.Int64).alias("index"),
    }
    out = out.with_columns(pl.col("extra_info").struct.with_fields(*(inner[name] for name in EXTRA_INFO_WRITTEN))).drop(
        "_pos"
    )
    return out.select(
        [c for c in out.columns if c not in SAMPLER_COLUMNS and c != "truncated"] + [*SAMPLER_COLUMNS, "truncated"]
    )


def check_invariants(df: pl.DataFrame, expected_rows: int) -> None:
    """Ranks are exactly 0..size-1 per cluster, difficulty never decreases with rank, no row lost."""
    if df.height != expected_rows:
        raise InvariantError(f"sorted table has {df.height} rows, the formatted table {expected_rows}")
    per = df.group_by("cluster_id").agg(
        pl.col("rank_in_cluster").sort().alias("ranks"),
        pl.col("cluster_size").first(),
        pl.len().alias("n"),
        (pl.col("difficulty").sort_by("rank_in_cluster").diff() < 0).any().alias("decreasing"),
        (pl.col("rank_in_cluster").sort().diff() != 1).any().alias("rank_gap"),
        pl.col("rank_in_cluster").min().alias("rank_min"),
    )
    bad = per.filter(
        (pl.col("n") != pl.col("cluster_size")) | pl.col("decreasing") | pl.col("rank_gap") | (pl.col("rank_min") != 0)
    )
    if bad.height:
        raise InvariantError(f"clusters break the rank/difficulty invariants: {bad['cluster_id'].to_list()[:10]}")
    if df["sample_id"].n_unique() != df.height:
        raise InvariantError("sample_id is not unique in the sorted table")
    if (df["extra_info"].struct.field("index") != pl.int_range(df.height, eager=True)).any():
        raise InvariantError("extra_info.index is not the row position")


def sort_stage(
    formatted_uri: str, scores_uri: str, assignments_uri: str, final_uri: str, extra: dict[str, Any] | None = None
) -> mf.Manifest:
    """Write FINAL_URI (its manifest beside it); `extra` (e.g. the policy model) is recorded in the manifest."""
    formatted = pl.from_arrow(storage.read_parquet(formatted_uri))
    scores = pl.from_arrow(storage.read_parquet(scores_uri, columns=["sample_id", "difficulty", "truncated"]))
    assignments = pl.from_arrow(storage.read_parquet(assignments_uri, columns=["sample_id", "cluster_id"]))
    df = sort_rows(formatted, scores, assignments)
    check_invariants(df, formatted.height)
    directory, uri = mf.stage_dir_of(final_uri), final_uri
    storage.write_parquet(uri, df.to_arrow())
    sizes = df.group_by("cluster_id").len().sort("cluster_id")
    manifest = mf.Manifest(
        stage="sort",
        inputs={
            "formatted": mf.input_entry(formatted_uri),
            "scores": mf.input_entry(scores_uri),
            "assignments": mf.input_entry(assignments_uri),
        },
        outputs={"train": mf.output_entry(uri, df.height)},
        config={},
        code_version=mf.version_of("sort", VERSION),
        counts={"rows": df.height, "clusters": sizes.height, "truncated": int(df["truncated"].sum())},
        extra={
            "cluster_sizes": dict(zip(map(str, sizes["cluster_id"]), sizes["len"], strict=True)),
            "difficulty": {q: float(df["difficulty"].quantile(q)) for q in (0.0, 0.25, 0.5, 0.75, 1.0)},
            **(extra or {}),
        },
    )
    mf.write(directory, manifest)
    return manifest


# ---------------------------------------------------------------------------------------------
# the declaration


def recorded(ctx: StageContext, _: int | None = None) -> dict[str, Any]:
    """What training and the report read from the final manifest: the policy the difficulties were scored with,
    the measure they are (score.difficulty: every label of the difficulty is read from here), the dataset."""
    from ads_core.models import resolve_model

    return {
        "extra.policy_model": resolve_model(ctx.config.score.model),
        "extra.difficulty_measure": ctx.config.score.difficulty,
        "extra.dataset": ctx.dataset,
    }


def run(ctx: StageContext, _: int | None) -> mf.Manifest:
    with ctx.progress("sort", None):
        return sort_stage(
            ctx.uri("formatted"),
            ctx.uri("scores"),
            ctx.uri("assignments"),
            ctx.uri("final"),
            extra={field.removeprefix("extra."): value for field, value in recorded(ctx).items()},
        )


STAGE = Stage(
    name="sort",
    section=None,
    inputs=("formatted", "scores", "assignments"),
    outputs={"final": FINAL_PATH},
    version=VERSION,
    run=run,
    # the manifest records the policy and the dataset name, which training reads
    key_config=lambda cfg: {"model": cfg.score.model, "dataset": cfg.format.name},
    recorded=recorded,
)
