"""The record a stage task returns, and the check that a cached one still describes what is in storage.

A stage task returns a small JSON record `{"uri": <main output>, "digest": <hash of every output>}`,
persisted as the Prefect cache record (JSON serializer: nothing is pickled). `intact()` re-checks
that record against the manifest and the files in storage, so a cached stage whose artifact vanished
or was replaced is recomputed rather than trusted (see `tasks.stage_task.checked`).
"""

from __future__ import annotations

from ads_core.pipeline.stage_keys import outputs_digest, reusable
from ads_core.stages.base import Stage, StageContext
from ads_core.storage import manifest as mf

StageOutput = dict[str, str]  # {"uri": main output URI, "digest": hash of all the stage's output hashes}


def stage_output(manifest: mf.Manifest, main: str) -> StageOutput:
    return {"uri": manifest.output_uri(main), "digest": outputs_digest(manifest)}


def intact(
    output: StageOutput,
    stage: Stage | None = None,
    ctx: StageContext | None = None,
    shard: int | None = None,
    key: str | None = None,
) -> bool:
    """True if the artifact a (cached) record points to is still there, unchanged, with a manifest that checks out.

    With the stage run it is for (STAGE, CTX, SHARD, KEY), the manifest must also record that stage key and say what
    this build's config gives the fields later work reads (`keys.reusable`): a record stored under the key of a
    source as it was before a run is not trusted for the different bytes that run read."""
    if stage is not None and ctx is not None and key is not None:
        current = reusable(stage, ctx, shard, key)
    else:
        current = mf.verify(mf.stage_dir_of(output["uri"]))
    return current is not None and outputs_digest(current) == output["digest"]
