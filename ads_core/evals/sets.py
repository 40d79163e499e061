"""Validation sets for training (MATH-500, AIME24, AMC23) in verl's schema, and a decontamination check.

This package sits below the stages (it imports none): the sets' names, files and paths are here, and
``write_eval_sets(out)`` (``ads_core.stages.eval_sets``) formats each set with the format stage (same
detection, prompt template and ``sample_id``) into ``OUT/eval/<name>.parquet``; ``data_source`` is the set's
name, so verl reports ``val-core/<name>/acc/mean@n``. The three sets ship in the package
(``ads_core/data/eval``, with their license notes), so this works from any install; ``--data-dir`` or
``$ADS_EVAL_DATA_DIR`` override them. ``decontaminate(train, evals)`` (``ads_core.evals.decontam``) finds
training rows that match an eval question exactly or by 13-gram overlap, and can write a copy of the training
set without them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ads_core import storage
from ads_core.common.errors import InputError

# name -> path under the data directory (the publisher's layout; see ads_core/data/eval/README.md)
EVAL_SETS: dict[str, str] = {
    "math500": "math500/test.jsonl",
    "aime24": "aime24/test.jsonl",
    "amc23": "amc23/test.jsonl",
}
EVAL_DIR = "eval"
REPORT_NAME = "decontamination.json"


def packaged_data_dir() -> Path:
    """The eval sets shipped inside the package (MATH-500, AIME24, AMC23 with their license notes)."""
    return Path(str(resources.files("ads_core") / "data" / "eval"))


def default_data_dir() -> Path:
    """``$ADS_EVAL_DATA_DIR`` when set (it must be a directory), else the packaged sets."""
    env = os.environ.get("ADS_EVAL_DATA_DIR")
    if env:
        if not Path(env).is_dir():
            raise InputError(f"ADS_EVAL_DATA_DIR={env} is not a directory")
        return Path(env)
    return packaged_data_dir()


def eval_dir(out: str) -> str:
    return storage.join(out, EVAL_DIR)


def eval_uri(out: str, name: str) -> str:
    return storage.join(out, EVAL_DIR, f"{name}.parquet")


def training_template(out: str) -> str | None:
    """The prompt template the training set under OUT was formatted with (from its format manifest)."""
    uri = storage.join(out, "formatted", "manifest.json")
    try:
        if storage.exists(uri):
            return storage.read_json(uri).get("config", {}).get("template_string")
    except (OSError, ValueError):
        return None
    return None


@dataclass
class EvalSet:
    name: str
    source: str
    uri: str
    rows: int
    rejected: int
    rejects_by_reason: dict[str, int] = field(default_factory=dict)


def resolve_sources(
    sources: Mapping[str, str] | None = None, names: Sequence[str] | None = None, data_dir: str | Path | None = None
) -> dict[str, str]:
    """name -> source path: explicit ``sources`` win, the rest of ``names`` come from the data directory."""
    explicit = dict(sources or {})
    wanted = list(names) if names is not None else ([] if explicit else list(EVAL_SETS))
    out: dict[str, str] = {}
    base: Path | None = None
    for name in wanted:
        if name in explicit:
            continue
        if name not in EVAL_SETS:
            raise InputError(f"unknown eval set {name!r}; known: {', '.join(EVAL_SETS)} (or pass NAME=PATH)")
        base = base or (Path(data_dir) if data_dir else default_data_dir())
        path = base / EVAL_SETS[name]
        if not path.exists():
            raise InputError(f"eval set {name!r} not found at {path}")
        out[name] = str(path)
    for name, path in explicit.items():
        if not name or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in name):
            raise InputError(f"eval set name {name!r} must be lowercase letters, digits, '-' or '_'")
        out[name] = path
    return out


def existing_eval_sets(out: str) -> dict[str, str]:
    """name -> URI of the eval sets already written under ``OUT/eval``."""
    base = eval_dir(out)
    if not storage.exists(base):
        return {}
    fs, path = storage.get_fs(base)
    found = {}
    for entry in sorted(fs.ls(path, detail=False)):
        name = entry.rstrip("/").split("/")[-1]
        if name.endswith(".parquet") and not name.startswith("train"):
            found[name[: -len(".parquet")]] = storage.join(base, name)
    return found
