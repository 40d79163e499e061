"""`manifest.json` beside every artifact: what a stage read, with which config and code, and what it wrote.

A stage directory is complete only once its manifest exists and the output hashes it lists still
match the files (`verify`). The manifest is written last, so a crash mid-stage leaves no
manifest and the stage is recomputed. Later stages key their caches on these hashes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ads_core import __version__, storage

MANIFEST_NAME = "manifest.json"


def version_of(stage: str, version: str) -> str:
    """A stage's code version: the package version plus the stage's explicit VERSION (bumped by hand)."""
    return f"{__version__}+{stage}.v{version}"


def config_dict(config: Any) -> dict[str, Any]:
    """Plain dict of a config (pydantic model, dataclass or dict), safe to write into a manifest."""
    if hasattr(config, "model_dump"):
        return config.model_dump()
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return dict(config or {})


@dataclass
class Manifest:
    stage: str
    inputs: dict[str, dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    config: dict[str, Any]
    code_version: str
    counts: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def output_uri(self, name: str) -> str:
        return self.outputs[name]["uri"]

    def output_hash(self, name: str) -> str:
        return self.outputs[name]["sha256"]


def output_entry(uri: str, rows: int | None = None) -> dict[str, Any]:
    """Describe one written file: its URI, content hash and (optionally) row count."""
    entry: dict[str, Any] = {"uri": uri, "sha256": storage.content_hash(uri)}
    if rows is not None:
        entry["rows"] = int(rows)
    return entry


def stage_dir_of(uri: str) -> str:
    """A stage's main outputs sit beside its manifest.json."""
    return uri.rstrip("/").rsplit("/", 1)[0]


def artifact_hash(uri: str) -> str:
    """sha256 of an artifact: from the manifest beside it when it lists this file, else hashed.

    Every stage records its outputs' hashes, so later stages and cache keys need not read them again.
    """
    try:
        for entry in read(stage_dir_of(uri)).outputs.values():
            if entry.get("uri") == uri and entry.get("sha256"):
                return str(entry["sha256"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return storage.tree_hash(uri)


def input_entry(uri: str, sha256: str | None = None) -> dict[str, Any]:
    return {"uri": uri, "sha256": sha256 or artifact_hash(uri)}


def write(stage_dir: str, manifest: Manifest) -> str:
    uri = storage.join(stage_dir, MANIFEST_NAME)
    storage.write_json(uri, manifest.to_dict())
    return uri


def read(stage_dir: str) -> Manifest:
    return Manifest.from_dict(storage.read_json(storage.join(stage_dir, MANIFEST_NAME)))


def verify(stage_dir: str) -> Manifest | None:
    """The stage's manifest if it and every output it lists are intact and beside it, else None."""
    try:
        manifest = read(stage_dir)
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    prefix = stage_dir.rstrip("/") + "/"
    for entry in manifest.outputs.values():
        try:
            if not str(entry["uri"]).startswith(prefix):  # a copied manifest describing files elsewhere
                return None
            if storage.content_hash(entry["uri"]) != entry["sha256"]:
                return None
        except (OSError, KeyError, TypeError):  # output gone or unreadable, or an entry without uri/sha256
            return None
    return manifest
