"""The model stage: the policy the score stage embeds and scores with, made ready before scoring starts.

`score.model` is a local directory, a hub id in the local cache, or a model built on this machine (`default` is
the `tiny` preset; also `bench`; `smollm2` is converted from the `smollm2` extra's GGUF file). A preset not built
yet is built here: a tokenizer trained on the bundled
sample, then 100 seeded training steps, minutes on a busy CPU. So the first build shows that work as its own
step, with progress and its own wall time, instead of a score shard that sits at 0 rows. For every model the
stage records its content fingerprint (each file's sha256, memoised by path, size and mtime), the identity the
score stage keys on.

OUT/model/model.json holds the model as given, its preset and its fingerprint, and no path, so the file is the
same on every machine that has the same model. The manifest beside it records where the model is.
"""

from __future__ import annotations

import time
from typing import Any

from ads_core import models, storage
from ads_core.models.tiny import model_fingerprint
from ads_core.stages.base import Stage, StageContext
from ads_core.storage import manifest as mf

VERSION = "1"


def present_fingerprint(model: str | None) -> str:
    """The model's fingerprint when it is there; a preset not built yet is `absent:...` (never built here:
    a stage key must not do the stage's work)."""
    preset = models.preset_of(model)
    if preset is not None and not models.is_built(models.cached_model_dir(preset)):
        return models.absent_key(preset)
    return model_fingerprint(model)


def run(ctx: StageContext, _: int | None) -> mf.Manifest:
    name = ctx.config.score.model
    preset = models.preset_of(name)
    built = preset is not None and not models.is_built(models.cached_model_dir(preset))
    t0 = time.perf_counter()
    path = models.resolve_model(name, progress=ctx.progress)
    seconds = time.perf_counter() - t0
    with ctx.progress(f"fingerprinting the model {name}", None, unit="files"):
        fingerprint = model_fingerprint(name)
    uri = ctx.uri("model")
    storage.write_json(uri, {"model": name, "preset": preset, "fingerprint": fingerprint})
    manifest = mf.Manifest(
        stage="model",
        inputs={},
        outputs={"model": mf.output_entry(uri)},
        config={"model": name},
        code_version=mf.version_of("model", VERSION),
        counts={"built": int(built)},
        extra={"path": path, "preset": preset, "fingerprint": fingerprint, "seconds": round(seconds, 2)},
    )
    mf.write(ctx.stage_dir("model"), manifest)
    return manifest


def key_extra(ctx: StageContext) -> dict[str, Any]:
    return {"model": present_fingerprint(ctx.config.score.model)}


STAGE = Stage(
    name="model",
    section="score",
    inputs=(),
    outputs={"model": "model/model.json"},
    version=VERSION,
    run=run,
    progress=True,
    key_config=lambda cfg: {"model": cfg.score.model},
    key_extra=key_extra,
    recorded=lambda ctx, _: {"config.model": ctx.config.score.model},  # the one score field this stage records
)
