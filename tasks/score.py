"""Scoring tasks: one cached task per shard (the unit of resume and parallelism) and the merge."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from ads_core import models, storage
from ads_core import score as score_module
from ads_core.score import ScoreConfig, make_backend, merge_scores, score_shard, shard_bounds
from tasks.base import StageOutput, fault_point, progress, stage_output, stage_task

_scorer_lock = threading.Lock()
_scorer: tuple[str, Any] | None = None  # (config key, (backend, tokenizer)): one model per process


def cached_backend(cfg: ScoreConfig) -> Any:
    """Load the model once per process (a flow run, or a Dask worker) and reuse it for every shard."""
    global _scorer
    key = json.dumps({k: v for k, v in vars(cfg).items() if k != "num_shards"}, sort_keys=True, default=str)
    with _scorer_lock:
        if _scorer is None or _scorer[0] != key:
            _scorer = None  # drop the old model before loading another
            _scorer = (key, make_backend(cfg))
        return _scorer[1]


def model_fingerprint(model: str | None) -> str:
    """Identity of the policy model for the cache key, cheap enough to compute on every run.

    A local directory: file names and sizes plus the bytes of its small JSON files (config, tokenizer
    config, the tiny model's spec); weights are not re-hashed. A hub id: the cached snapshot's commit.
    """
    resolved = models.resolve_model(model)
    path = Path(resolved)
    if path.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = file.relative_to(path).as_posix()
            size = file.stat().st_size
            digest.update(f"{rel}\0{size}\0".encode())
            if file.suffix == ".json" and size <= 1 << 20:
                digest.update(file.read_bytes())
        return "sha256:" + digest.hexdigest()
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(resolved, "config.json")
        if isinstance(cached, str):
            return f"hub:{resolved}@{Path(cached).parent.name}"
    except Exception:  # noqa: BLE001 - no hub cache: key on the name alone
        pass
    return f"hub:{resolved}"


def _shard_key_extra(params: dict[str, Any]) -> dict[str, str]:
    return {"model": model_fingerprint(params["config"].get("model"))}


@stage_task("score_shard", wraps=(score_module,), key_extra=_shard_key_extra, task_run_name="score-shard-{index}")
def score_shard_stage(formatted_uri: str, out: str, index: int, config: dict[str, Any]) -> StageOutput:
    """Embed + NLL for rows of shard `index` of `config['num_shards']`; writes OUT/scores/shards/shard-i-of-n/."""
    fault_point("score")
    cfg = ScoreConfig(**config)
    start, end = shard_bounds(storage.parquet_num_rows(formatted_uri), cfg.num_shards, index)
    scorer = cached_backend(cfg)
    with progress(f"score (embed + NLL) shard {index + 1}/{cfg.num_shards}", end - start) as advance:
        manifest = score_shard(formatted_uri, out, index, cfg, advance, scorer=scorer)
    extra = manifest.extra
    get_run_logger().info("shard %d/%d: %d rows on %s (%.0f tokens/s, %d truncated)", index + 1, cfg.num_shards,
                          manifest.counts["rows"], extra.get("backend"), extra.get("tokens_per_s", 0.0),
                          manifest.counts["truncated"])
    return stage_output(manifest, "scores")


@stage_task("merge_scores", wraps=(score_module,), task_run_name="merge-scores")
def merge_scores_stage(formatted_uri: str, shard_uris: list[str], out: str) -> StageOutput:
    """Concatenate shard scores in formatted-row order into OUT/scores/scores.parquet."""
    fault_point("merge")
    manifest = merge_scores(formatted_uri, shard_uris, out)
    get_run_logger().info("merged %d shards: %d rows", len(shard_uris), manifest.counts["rows"])
    return stage_output(manifest, "scores")
