"""What a stage declares, and the context it runs in.

A `Stage` is declared once, in its own module (`ads_core/stages/<name>`): its name, the config section it is
configured by, the artifacts it reads (by name) and writes (by name and path under OUT), an explicit
version (bump it by hand when the output changes for the same input: it is part of the cache key, so a
docstring edit never recomputes anything), the resources it wants, a `setup()`/`teardown()` pair for
heavy state (the scorer's model), `run()`, and its UI hooks: the tables, markdown and images a run shows
(`ui`) and whether it reports progress.

A stage never builds a path itself: `StageContext.uri(name)` gives every input and output location, so the
same declarations run in-process (`ads_core.pipeline.build`), as Prefect tasks (`ads_prefect`), on Dask
workers, and into a staging folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ads_core import storage
from ads_core.common.progress import ProgressFactory, no_progress
from ads_core.config.build import BuildConfig
from ads_core.storage import manifest as mf

SHARD_SLOT = "{shard}"  # filled in for sharded artifacts: shard-00001-of-00004


@dataclass
class StageContext:
    """Where a build reads and writes, with which config; everything a stage's `run()` needs."""

    source: str
    out: str
    dataset: str
    config: BuildConfig
    layout: dict[str, str]  # artifact name -> path under OUT (from the declared stages)
    progress: ProgressFactory = no_progress
    state: Any = None  # what the stage's setup() returned, for its run()
    shard_counts: dict[str, int] = field(default_factory=dict)  # sharded artifact -> shards (its stage's count)

    def uri(self, artifact: str, shard: int | None = None) -> str:
        rel = self.layout[artifact]
        if SHARD_SLOT in rel:
            n = self.shard_counts[artifact]
            rel = rel.replace(SHARD_SLOT, f"shard-{shard:05d}-of-{n:05d}")
        return storage.join(self.out, *rel.split("/"))

    def uris(self, artifacts: tuple[str, ...] | dict[str, str], shard: int | None = None) -> dict[str, str]:
        return {name: self.uri(name, shard) for name in artifacts}

    def shard_uris(self, artifact: str) -> list[str]:
        return [self.uri(artifact, i) for i in range(self.shard_counts[artifact])]

    def stage_dir(self, artifact: str, shard: int | None = None) -> str:
        """The folder of an artifact: its stage's manifest sits there."""
        return mf.stage_dir_of(self.uri(artifact, shard))


@dataclass(frozen=True)
class Resources:
    """What a stage runs best on. `accelerator="optional"` uses a GPU when one is visible; `cpus` caps the
    threads of its numeric libraries (None: every core this process may use) and is what a Dask worker
    must offer (`--resources CPU=n`) when the workers declare resources."""

    accelerator: Literal["none", "optional", "required"] = "none"
    cpus: int | None = None


@dataclass(frozen=True)
class UIItem:
    """One thing a stage shows in a run's UI: a table (rows), markdown, or a PNG image (bytes)."""

    kind: Literal["table", "markdown", "image"]
    key: str  # short name; the UI key is ads-<dataset>-<key>
    content: Any
    description: str


@dataclass(frozen=True)
class Stage:
    name: str
    section: str | None  # the BuildConfig section it is configured by
    inputs: tuple[str, ...]  # artifact names ("source" = the dataset itself)
    outputs: dict[str, str]  # artifact name -> path under OUT; the first is the main output
    version: str
    run: Callable[[StageContext, int | None], mf.Manifest]
    resources: Resources = field(default_factory=Resources)
    # a sharded stage says how many runs (shards) the config asks of it; None: one run
    shard_count: Callable[[BuildConfig], int] | None = None
    progress: bool = False  # reports rows done while it runs (a progress bar / UI progress artifact)
    setup: Callable[[StageContext], Any] | None = None  # heavy state, made once per process and config
    teardown: Callable[[Any], None] | None = None
    ui: Callable[[StageContext, mf.Manifest], list[UIItem]] | None = None
    key_config: Callable[[BuildConfig], dict[str, Any]] | None = None  # default: the whole section
    key_extra: Callable[[StageContext], dict[str, Any]] | None = None  # more content the output depends on
    # manifest fields (dotted paths) that later work trusts, with the values this config gives them; default: the
    # section's fields under `config.`. Reuse checks them, so a hand-edited field is recomputed, never trusted.
    recorded: Callable[[StageContext, int | None], dict[str, Any]] | None = None

    @property
    def main(self) -> str:
        return next(iter(self.outputs))

    @property
    def sharded(self) -> bool:
        return self.shard_count is not None

    def shards(self, ctx: StageContext) -> list[int | None]:
        return [None] if self.shard_count is None else list(range(self.shard_count(ctx.config)))

    def label(self, shard: int | None) -> str:
        return self.name if shard is None else f"{self.name}-shard-{shard}"

    def main_uri(self, ctx: StageContext, shard: int | None = None) -> str:
        return ctx.uri(self.main, shard)

    def config_of(self, cfg: BuildConfig) -> dict[str, Any]:
        if self.key_config is not None:
            return self.key_config(cfg)
        return getattr(cfg, self.section).model_dump() if self.section else {}

    def recorded_fields(self, ctx: StageContext, shard: int | None) -> dict[str, Any]:
        """What this run's manifest must say in the fields later stages and training read (see `recorded`)."""
        if self.recorded is not None:
            return self.recorded(ctx, shard)
        if self.section is None:
            return {}
        return {f"config.{k}": v for k, v in getattr(ctx.config, self.section).model_dump().items()}


def outputs_under(out: str, stage: Stage, shard: int | None = None, num_shards: int = 1) -> dict[str, str]:
    """Where STAGE writes under OUT: artifact name -> URI (for library calls outside a build)."""
    rel = {
        name: path.replace(SHARD_SLOT, f"shard-{shard or 0:05d}-of-{num_shards:05d}")
        for name, path in stage.outputs.items()
    }
    return {name: storage.join(out, *path.split("/")) for name, path in rel.items()}
