"""Content keys: whether a stage must run again is decided from what it reads, never from paths or run ids.

`stage_key` = the stage's version, its config section and the content hash of each input (an artifact's hash
comes from the manifest beside it, once that manifest checks out; the source is hashed). It is stamped into the
stage's manifest, so `reusable()` can tell from storage alone, from any machine sharing OUT, that a stage need
not run again: the manifest is the build's one cache, for the in-process build and the `ads-build` flow alike.

The key computed before a run only finds earlier work. The key stamped after it describes what the run actually
read: the format stage records the digest of the source bytes it consumed, and `run_stage` keys it on that, so
rows appended between the two never hide behind the key of the file as it was before (`read_key`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from ads_core.ingest import sources
from ads_core.stages.base import SHARD_SLOT, Stage, StageContext
from ads_core.storage import manifest as mf

log = logging.getLogger("ads.pipeline")


def source_digest(source: str, split: str = "train") -> str:
    """The digest of the files SOURCE names (names and bytes), as the format stage's read of them gives it; a hub id
    is keyed by its name."""
    return sources.source_digest(source, split)


def input_digests(stage: Stage, ctx: StageContext, source: str | None = None) -> dict[str, Any]:
    """The content of every input: artifacts by their sha256 (from the manifest beside them); the source by SOURCE
    (the digest of what a run read) or, before a run, by hashing it now."""
    digests: dict[str, Any] = {}
    for name in stage.inputs:
        if name == "source":  # names relative to the source and bytes: where it sits is provenance (the manifest)
            digests[name] = source or source_digest(ctx.source, ctx.config.format.split)
        elif SHARD_SLOT in ctx.layout[name]:
            digests[name] = [mf.artifact_hash(u) for u in ctx.shard_uris(name)]
        else:
            digests[name] = mf.artifact_hash(ctx.uri(name))
    return digests


def stage_key(stage: Stage, ctx: StageContext, shard: int | None = None, source: str | None = None) -> str:
    """Content identity of one stage run: its version, config and the content of its inputs."""
    payload = {
        "stage": stage.name,
        "version": stage.version,
        "shard": shard,
        "config": stage.config_of(ctx.config),
        "inputs": input_digests(stage, ctx, source),
        "extra": stage.key_extra(ctx) if stage.key_extra else None,
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return f"{stage.label(shard)}-{hashlib.sha256(blob).hexdigest()[:40]}"


def read_key(stage: Stage, ctx: StageContext, shard: int | None, manifest: mf.Manifest, key: str) -> str:
    """The key of what a run read: for a stage that reads the source, keyed on the digest of the bytes it consumed
    (recorded in its manifest), which differs from KEY when the source changed between the key and the read."""
    consumed = (manifest.inputs.get("source") or {}).get("sha256") if "source" in stage.inputs else None
    if not consumed:
        return key
    read = stage_key(stage, ctx, shard, source=str(consumed))
    if read != key:
        log.warning(
            "%s: the source changed after this build hashed it; the stage is keyed on what it read (%s)",
            stage.label(shard),
            consumed,
        )
    return read


def run_stage(stage: Stage, ctx: StageContext, shard: int | None, key: str) -> mf.Manifest:
    """Run one stage and stamp the key of what it read into the manifest it wrote (the manifest is written last)."""
    manifest = stage.run(ctx, shard)
    manifest.extra["stage_key"] = read_key(stage, ctx, shard, manifest, key)
    mf.write(ctx.stage_dir(stage.main, shard), manifest)
    return manifest


def _field(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data


def _as_stored(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def reusable(stage: Stage, ctx: StageContext, shard: int | None, key: str) -> mf.Manifest | None:
    """The stage's manifest in OUT when it records this very stage key, checks out (digest, counts), its outputs are
    intact, and the fields later work reads from it say what this build's config gives them.

    The recorded key is compared first, so a stage that must run anyway never has its outputs hashed. A manifest
    that records the key but fails a check is logged (naming the file) and the stage is recomputed.
    """
    directory = ctx.stage_dir(stage.main, shard)
    try:
        recorded = mf.read(directory).extra.get("stage_key")
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if recorded != key:
        return None
    manifest, why = mf.why_not_intact(directory)
    if manifest is not None:
        stored = manifest.to_dict()
        wrong = [f for f, v in stage.recorded_fields(ctx, shard).items() if _field(stored, f) != _as_stored(v)]
        if wrong:
            manifest, why = None, f"{', '.join(wrong)} differ from what this build would record"
    if manifest is None:
        log.warning("%s/%s: %s; recomputing %s", directory, mf.MANIFEST_NAME, why, stage.label(shard))
    return manifest


def outputs_digest(manifest: mf.Manifest) -> str:
    """One hash over every output hash a manifest lists (a stage's identity in storage)."""
    hashes = {name: entry["sha256"] for name, entry in sorted(manifest.outputs.items())}
    return "sha256:" + hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()
