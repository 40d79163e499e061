"""Content keys: whether a stage must run again is decided from what it reads, never from paths or run ids.

`stage_key` = the stage's version, its config section and the content hash of each input (an artifact's hash
comes from the manifest beside it; the source is hashed). It is stamped into the stage's manifest, so
`reusable()` can tell from storage alone, from any machine sharing OUT, that a stage need not run again.
The Prefect cache key adds the output root (`cache_key`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ads_core import storage
from ads_core.stages.base import SHARD_SLOT, Stage, StageContext
from ads_core.stages.format.records import SUPPORTED_SUFFIXES
from ads_core.storage import manifest as mf


def source_digest(source: str) -> str:
    """Tree hash of a local/remote dataset file or directory; a hub id is keyed by its name."""
    if storage.exists(source):
        return storage.tree_hash(source, SUPPORTED_SUFFIXES)
    return f"id:{source}"


def input_digests(stage: Stage, ctx: StageContext) -> dict[str, Any]:
    """The content of every input: artifacts by their sha256 (from the manifest beside them)."""
    digests: dict[str, Any] = {}
    for name in stage.inputs:
        if name == "source":  # the path too: rows record it (extra_info.source_file)
            digests[name] = [ctx.source, source_digest(ctx.source)]
        elif SHARD_SLOT in ctx.layout[name]:
            digests[name] = [mf.artifact_hash(u) for u in ctx.shard_uris(name)]
        else:
            digests[name] = mf.artifact_hash(ctx.uri(name))
    return digests


def stage_key(stage: Stage, ctx: StageContext, shard: int | None = None) -> str:
    """Content identity of one stage run: its version, config and the content of its inputs."""
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


def cache_key(key: str, out: str) -> str:
    """The Prefect cache key: a stage key plus the output root (a build into another OUT writes there)."""
    return f"{key}-{hashlib.sha256(out.encode()).hexdigest()[:12]}"


def run_stage(stage: Stage, ctx: StageContext, shard: int | None, key: str) -> mf.Manifest:
    """Run one stage and stamp its stage key into the manifest it wrote (the manifest is written last)."""
    manifest = stage.run(ctx, shard)
    manifest.extra["stage_key"] = key
    mf.write(ctx.stage_dir(stage.main, shard), manifest)
    return manifest


def reusable(stage: Stage, ctx: StageContext, shard: int | None, key: str) -> mf.Manifest | None:
    """The stage's manifest in OUT when it records this very stage key and its outputs are intact.

    The recorded key is compared first, so a stage that must run anyway never has its outputs hashed.
    """
    directory = ctx.stage_dir(stage.main, shard)
    try:
        recorded = mf.read(directory).extra.get("stage_key")
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    if recorded != key:
        return None
    return mf.verify(directory)


def outputs_digest(manifest: mf.Manifest) -> str:
    """One hash over every output hash a manifest lists (a stage's identity in storage)."""
    hashes = {name: entry["sha256"] for name, entry in sorted(manifest.outputs.items())}
    return "sha256:" + hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()
