"""The eval sets by name: the packaged ones, the ones a user keeps in an eval data folder, the paper's seven.

Packaged (``ads_core/data/eval``, with their licence notes, so validation works from any install): MATH-500,
AIME 2024, AIME 2025, AMC 2023. Kept by the user in an eval data folder (``--data-dir`` / ``data_dir``, or
``$ADS_EVAL_DATA_DIR``, several joined by ``:``; searched before the packaged copy): Minerva Math (CC BY-NC-SA,
not shipped), GPQA-Diamond and MMLU-Pro (gated or large; their published layouts), each in a folder of its own
(``EXTERNAL_SETS``). ``paper`` is the ADS paper's table: ``PAPER_SETS`` in its column order.

``write_eval_sets(out)`` (``ads_core.evaluation.sets.writer``) formats sets with the format conversion
(``ads_core.ingest``: same detection, prompt template and ``sample_id``) into ``OUT/eval/<name>.parquet``;
``data_source`` is the set's name, so verl reports ``val-core/<name>/acc/mean@n``. ``decontaminate(train, evals)``
(``ads_core.evaluation.sets.decontam``) finds training rows that match an eval question exactly or by 13-gram
overlap.
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
    "aime25": "aime25/test.jsonl",
    "amc23": "amc23/test.jsonl",
}
# name -> (folders tried in a data directory, files tried in each, how to get it): never shipped
EXTERNAL_SETS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "minerva": (
        ("minerva", "minerva_math"),
        ("test.jsonl",),
        "Minerva Math (272 problems, CC BY-NC-SA): test.jsonl from Qwen2.5-Math's evaluation/data/minerva_math",
    ),
    "gpqa_diamond": (
        ("gpqa_diamond", "gpqa"),
        ("gpqa_diamond.csv", "test.csv", "test.jsonl", "test.parquet"),
        "GPQA-Diamond (198 questions, gated: Idavidrein/gpqa): gpqa_diamond.csv as published",
    ),
    "mmlu_pro": (
        ("mmlu_pro", "mmlu-pro"),
        ("test.parquet", "test-00000-of-00001.parquet", "data/test-00000-of-00001.parquet", "test.jsonl"),
        "MMLU-Pro (12,032 questions, TIGER-Lab/MMLU-Pro): its test split's Parquet as published",
    ),
}
PAPER_SETS = ("math500", "aime25", "aime24", "minerva", "amc23", "gpqa_diamond", "mmlu_pro")
PAPER_TITLES = {
    "math500": "MATH-500",
    "aime25": "AIME 25",
    "aime24": "AIME 24",
    "minerva": "Minerva",
    "amc23": "AMC 23",
    "gpqa_diamond": "GPQA-Diamond",
    "mmlu_pro": "MMLU-Pro",
}
PAPER = "paper"
DATA_DIR_ENV = "ADS_EVAL_DATA_DIR"
EVAL_DIR = "eval"
REPORT_NAME = "decontamination.json"


def packaged_data_dir() -> Path:
    """The eval sets shipped inside the package (MATH-500, AIME 24/25, AMC23 with their license notes)."""
    return Path(str(resources.files("ads_core") / "data" / "eval"))


def user_data_dirs(data_dir: str | Path | None = None) -> list[Path]:
    """The eval data folders a user keeps sets in: DATA_DIR, else ``$ADS_EVAL_DATA_DIR`` (``:``-separated)."""
    spec = str(data_dir) if data_dir else os.environ.get(DATA_DIR_ENV, "")
    folders = [Path(p).expanduser() for p in spec.split(os.pathsep) if p]
    for folder in folders:
        if not folder.is_dir():
            where = "--data-dir" if data_dir else DATA_DIR_ENV
            raise InputError(f"{where}={folder} is not a directory")
    return folders


def default_data_dir() -> Path:
    """The first user eval data folder when one is set, else the packaged sets."""
    return (user_data_dirs() or [packaged_data_dir()])[0]


def find_named(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The file of a named set (packaged or external): the user's folders first, then the package; None if absent."""
    folders = [*user_data_dirs(data_dir), packaged_data_dir()]
    if name in EVAL_SETS:
        candidates = [EVAL_SETS[name]]
    else:
        dirs, files, _ = EXTERNAL_SETS[name]
        candidates = [f"{d}/{f}" for d in dirs for f in files]
    for folder in folders:
        for rel in candidates:
            if (folder / rel).is_file():
                return folder / rel
    return None


def how_to_supply(name: str) -> str:
    """One line: where to put a missing named set."""
    dirs, files, what = EXTERNAL_SETS[name]
    return (
        f"{name}: {what}; put it at DATA/{dirs[0]}/{files[0]} with --data-dir DATA (or ${DATA_DIR_ENV}), "
        f"or pass --set {name}=PATH"
    )


def is_named(spec: str) -> bool:
    return spec in EVAL_SETS or spec in EXTERNAL_SETS


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


def eval_dir(out: str) -> str:
    return storage.join(out, EVAL_DIR)


def eval_uri(out: str, name: str) -> str:
    return storage.join(out, EVAL_DIR, f"{name}.parquet")


def resolve_sources(
    sources: Mapping[str, str] | None = None, names: Sequence[str] | None = None, data_dir: str | Path | None = None
) -> dict[str, str]:
    """name -> source path: explicit ``sources`` win, the rest of ``names`` are found by name (`find_named`)."""
    explicit = dict(sources or {})
    wanted = list(names) if names is not None else ([] if explicit else list(EVAL_SETS))
    out: dict[str, str] = {}
    for name in wanted:
        if name in explicit:
            continue
        if not is_named(name):
            known = ", ".join([*EVAL_SETS, *EXTERNAL_SETS])
            raise InputError(f"unknown eval set {name!r}; known: {known} (or pass NAME=PATH)")
        path = find_named(name, data_dir)
        if path is None:
            raise InputError(f"eval set {name!r} not found: " + how_to_supply(name))
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
