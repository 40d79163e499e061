"""The score stage: shards of the formatted table are scored and written independently, so they can be
mapped in parallel and resumed one by one; `merge_scores` checks every sample_id appears once.

The scorer itself sits behind `ads_core.stages.score.scorer` (interface + registry); see
`ads_core.stages.score.transformers_scorer`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ads_core import models, storage
from ads_core.common import progress as progress_lines
from ads_core.common.progress import ProgressFactory, no_progress
from ads_core.config.build import ScoreConfig
from ads_core.stages.base import SHARD_SLOT, Resources, Stage, StageContext
from ads_core.stages.score import cache as score_cache
from ads_core.stages.score.scorer import ScorerBackend, make_backend, tokenize_row
from ads_core.storage import manifest as mf

log = logging.getLogger("ads.score")

STAGE_SHARD = "score_shard"
STAGE_MERGE = "merge_scores"
VERSION = "1"  # bump when the scores change for the same input (part of the cache key)


def shard_bounds(n_rows: int, num_shards: int, index: int) -> tuple[int, int]:
    return index * n_rows // num_shards, (index + 1) * n_rows // num_shards


def _inputs_table(formatted_uri: str) -> pa.Table:
    table = storage.read_parquet(formatted_uri, columns=["sample_id", "extra_info"])
    info = table.column("extra_info").combine_chunks()
    return pa.table(
        {
            "sample_id": table.column("sample_id"),
            "question": info.field("question"),
            "solution": info.field("solution"),
            "answer": info.field("answer"),
        }
    )


def score_shard(
    formatted_uri: str,
    shard_uri: str,
    index: int,
    cfg: ScoreConfig,
    progress: ProgressFactory | None = None,
    scorer: tuple[ScorerBackend, Any] | Callable[[], tuple[ScorerBackend, Any]] | None = None,
    label: str = "score",
) -> mf.Manifest:
    """Score rows [start, end) of shard `index` of `cfg.num_shards` into SHARD_URI (its manifest beside it).

    Rows found in the row score cache keep their stored values; only the others are scored, and the
    model is loaded only when there are any (`scorer` may be a loader called on first need). PROGRESS (a
    factory, `ads_core.common.progress`) counts the tokens to score, LABEL names the bar: rows differ in length
    tenfold, so only tokens per second give an ETA that holds.
    """
    table = _inputs_table(formatted_uri)
    start, end = shard_bounds(table.num_rows, cfg.num_shards, index)
    part = table.slice(start, end - start).to_pylist()
    keys = [score_cache.row_key(r["question"], r["solution"], r["answer"]) for r in part]
    cache = _open_cache(cfg)
    values = cache.lookup(keys) if cache else {}
    missing = [i for i, k in enumerate(keys) if k not in values]
    backend_name, stats = "cache", {}
    if missing:
        backend, tokenizer = scorer() if callable(scorer) else (scorer or make_backend(cfg))
        rows = [
            tokenize_row(tokenizer, part[i]["question"], part[i]["solution"], part[i]["answer"], cfg) for i in missing
        ]
        answers = []
        if cfg.difficulty == "nll_answer":  # the final answer given the question alone: a second, short pass
            answers = [tokenize_row(tokenizer, part[i]["question"], None, part[i]["answer"], cfg) for i in missing]
        work = sum(len(r.input_ids) for r in rows + answers)
        shown = f"{label}: {len(missing)} rows" + (
            f" ({len(part) - len(missing)} more from the cache)" if values else ""
        )
        with (progress or no_progress)(shown, work, "tokens") as advance:
            result = backend.score(rows, advance)
            second = backend.score(answers, advance) if answers else None
        backend_name, stats = backend.name, result.stats
        difficulty, n_target, nll_target = result.difficulty, result.n_target_tokens, [r.nll_target for r in rows]
        if cfg.difficulty == "nll_sum":
            difficulty = result.difficulty * result.n_target_tokens
        elif second is not None:
            difficulty, n_target, nll_target = second.difficulty, second.n_target_tokens, ["answer"] * len(answers)
        fresh = pa.table(
            {
                "row_key": pa.array([keys[i] for i in missing], pa.string()),
                "embedding": pa.array(list(result.embeddings.astype(np.float32)), pa.list_(pa.float32())),
                "difficulty": pa.array(difficulty, pa.float64()),
                "n_tokens": pa.array(result.n_tokens, pa.int32()),
                "n_target_tokens": pa.array(n_target, pa.int32()),
                "truncated": pa.array([r.truncated for r in rows], pa.bool_()),
                "nll_target": pa.array(nll_target, pa.string()),
            }
        )
        if cache:
            cache.add(fresh)
        values.update({row["row_key"]: row for row in fresh.to_pylist()})
    out = _scores_table([r["sample_id"] for r in part], [values[k] for k in keys])
    directory, uri = mf.stage_dir_of(shard_uri), shard_uri
    storage.write_parquet(uri, out)
    truncated = int(pc.sum(out.column("truncated")).as_py() or 0)
    manifest = mf.Manifest(
        stage=STAGE_SHARD,
        inputs={"formatted": mf.input_entry(formatted_uri)},
        outputs={"scores": mf.output_entry(uri, out.num_rows)},
        config={**mf.config_dict(cfg), "shard_index": index, "row_start": start, "row_end": end},
        code_version=mf.version_of("score", VERSION),
        counts={
            "rows": out.num_rows,
            "rows_scored": len(missing),
            "rows_reused": out.num_rows - len(missing),
            "truncated": truncated,
            "nll_on_answer": int(pc.sum(pc.equal(out.column("nll_target"), "answer")).as_py() or 0),
        },
        # the dtype the rows were scored in (auto resolved for this machine; also part of the row cache key)
        extra={
            "backend": backend_name,
            "hidden_size": _hidden(out),
            "dtype": models.dtype_name(cfg.device, cfg.dtype, cfg.model),
            **stats,
        },
    )
    mf.write(directory, manifest)
    return manifest


def _open_cache(cfg: ScoreConfig) -> score_cache.ScoreCache | None:
    if not cfg.cache:
        return None
    from ads_core.models.tiny import model_fingerprint

    space = score_cache.namespace(cfg, model_fingerprint(cfg.model), VERSION)
    return score_cache.ScoreCache(cfg.cache_uri or score_cache.default_root(), space)


def _hidden(table: pa.Table) -> int:
    typ = table.schema.field("embedding").type
    return int(typ.list_size) if pa.types.is_fixed_size_list(typ) else 0


def _scores_table(sample_ids: list[int], rows: list[dict[str, Any]]) -> pa.Table:
    """The shard's scores in row order, embeddings as float32 fixed-size lists."""
    hidden = len(rows[0]["embedding"]) if rows else 0
    flat = np.asarray([r["embedding"] for r in rows], np.float32).reshape(-1)
    return pa.table(
        {
            "sample_id": pa.array(sample_ids, pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), hidden),
            "difficulty": pa.array([r["difficulty"] for r in rows], pa.float64()),
            "n_tokens": pa.array([r["n_tokens"] for r in rows], pa.int32()),
            "n_target_tokens": pa.array([r["n_target_tokens"] for r in rows], pa.int32()),
            "truncated": pa.array([r["truncated"] for r in rows], pa.bool_()),
            "nll_target": pa.array([r["nll_target"] for r in rows], pa.string()),
        }
    )


def merge_scores(formatted_uri: str, shard_uris: list[str], scores_uri: str) -> mf.Manifest:
    """Concatenate shard scores in formatted-row order; every sample_id must appear exactly once."""
    tables = [storage.read_parquet(u) for u in shard_uris]
    merged = pa.concat_tables(tables) if tables else None
    expected = storage.read_parquet(formatted_uri, columns=["sample_id"]).column("sample_id")
    if merged is None or merged.num_rows != len(expected):
        got = 0 if merged is None else merged.num_rows
        raise MergeError(f"score shards hold {got} rows, the formatted table {len(expected)}")
    ids = merged.column("sample_id")
    if pc.count_distinct(ids).as_py() != merged.num_rows:
        raise MergeError("a sample_id appears in more than one score shard")
    missing = pc.sum(pc.invert(pc.is_in(expected, value_set=ids))).as_py() or 0
    if missing:
        raise MergeError(f"{missing} formatted rows have no score")
    order = pc.index_in(expected, value_set=ids)
    merged = merged.take(order)
    if pc.any(pc.is_nan(merged.column("difficulty"))).as_py():
        raise MergeError("a difficulty is NaN; the model produced non-finite values")
    shard_manifests = [mf.read(mf.stage_dir_of(u)) for u in shard_uris]
    scored = sum(int(m.counts.get("rows_scored", 0)) for m in shard_manifests)
    dtypes = sorted({str(m.extra["dtype"]) for m in shard_manifests if m.extra.get("dtype")})
    directory, uri = mf.stage_dir_of(scores_uri), scores_uri
    storage.write_parquet(uri, merged)
    manifest = mf.Manifest(
        stage=STAGE_MERGE,
        inputs={
            "formatted": mf.input_entry(formatted_uri),
            **{f"shard_{i}": mf.input_entry(u) for i, u in enumerate(shard_uris)},
        },
        outputs={"scores": mf.output_entry(uri, merged.num_rows)},
        config={"num_shards": len(shard_uris)},
        code_version=mf.version_of("score", VERSION),
        counts={
            "rows": merged.num_rows,
            "rows_scored": scored,
            "rows_reused": merged.num_rows - scored,
            "truncated": int(pc.sum(merged.column("truncated")).as_py() or 0),
        },
        extra={"dtype": ",".join(dtypes)} if dtypes else {},
    )
    mf.write(directory, manifest)
    return manifest


class MergeError(Exception):
    """Shards do not cover the formatted rows exactly once."""


def embeddings_matrix(table: pa.Table) -> np.ndarray:
    """[n, hidden] float32 view of a scores table's fixed-size-list embedding column (no copy)."""
    col = table.column("embedding").combine_chunks()
    width = col.type.list_size
    return col.values.to_numpy(zero_copy_only=False).reshape(-1, width)


# ---------------------------------------------------------------------------------------------
# the declarations: score (one run per shard) and merge


class Scorer:
    """The score stage's set-up state: the model, loaded on first need (a shard whose rows are all in the
    row cache never loads it), once per process and config; `close()` drops it."""

    def __init__(self, cfg: ScoreConfig) -> None:
        self.cfg = cfg
        self._loaded: tuple[ScorerBackend, Any] | None = None

    def get(self) -> tuple[ScorerBackend, Any]:
        if self._loaded is None:
            self._loaded = make_backend(self.cfg)
        return self._loaded

    def close(self) -> None:
        self._loaded = None


def setup(ctx: StageContext) -> Scorer:
    return Scorer(ctx.config.score)


def run_shard(ctx: StageContext, shard: int | None) -> mf.Manifest:
    cfg = ctx.config.score
    index = shard or 0
    start, end = shard_bounds(storage.parquet_num_rows(ctx.uri("formatted")), cfg.num_shards, index)
    scorer: Scorer = ctx.state if ctx.state is not None else Scorer(cfg)
    label = f"score (embed + NLL) shard {index + 1}/{cfg.num_shards}"
    with progress_lines.working_on(f"{label}: {end - start} rows (loading the model, tokenizing)"):
        return score_shard(
            ctx.uri("formatted"), ctx.uri("score_shard", index), index, cfg, ctx.progress, scorer.get, label
        )


def run_merge(ctx: StageContext, _: int | None) -> mf.Manifest:
    return merge_scores(ctx.uri("formatted"), ctx.shard_uris("score_shard"), ctx.uri("scores"))


def model_key(ctx: StageContext) -> dict[str, Any]:
    """The weights' content: a checkpoint rewritten in place must rescore (and must not be served from memory)."""
    from ads_core.models.tiny import model_fingerprint

    return {"model": model_fingerprint(ctx.config.score.model)}


SCORE = Stage(
    name="score",
    section="score",
    inputs=("formatted",),
    outputs={"score_shard": f"scores/shards/{SHARD_SLOT}/scores.parquet"},
    version=VERSION,
    run=run_shard,
    resources=Resources(accelerator="optional"),
    shard_count=lambda cfg: cfg.score.num_shards,
    progress=True,
    setup=setup,
    teardown=Scorer.close,
    key_extra=model_key,
)
MERGE = Stage(
    name="merge",
    section=None,
    inputs=("formatted", "score_shard"),
    outputs={"scores": "scores/scores.parquet"},
    version=VERSION,
    run=run_merge,
    key_config=lambda cfg: {"num_shards": cfg.score.num_shards},
    recorded=lambda ctx, _: {"config.num_shards": ctx.config.score.num_shards},
)
