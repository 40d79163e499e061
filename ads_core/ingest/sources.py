"""Which files a SOURCE names, and what to call the dataset.

SOURCE may be one file, a directory tree (one-object JSON files in subject folders, `.jsonl.gz`,
Parquet shards ...), a `datasets.save_to_disk` folder (Arrow shards listed in `state.json`, or a
`dataset_dict.json` with one folder per split), or a Hugging Face hub cache folder
(`datasets--org--name`, whose `snapshots/<commit>/` holds the files). For the last two, where one
folder holds several splits, only the files of the configured split are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.ingest.readers import iter_file_batches, iter_hub_batches, looks_like_hub_id
from ads_core.ingest.records import (
    SUPPORTED_SUFFIXES,
    RawRow,
    ReadLedger,
    combine,
    is_supported,
    relative_name,
)

# `datasets` metadata, never rows.
HF_METADATA = frozenset({"dataset_info.json", "dataset_infos.json", "state.json", "dataset_dict.json"})
SPLITS = ("train", "test", "validation", "valid", "val", "dev")
_SHARD = re.compile(r"(?:[-_.]\d{3,}(?:-of-\d+)?|[-_.]?(?:part|shard)[-_]?\d+)$", re.IGNORECASE)
_GENERIC = frozenset(
    {
        *SPLITS,
        "data",
        "default",
        "main",
        "all",
        "full",
        "dataset",
        "datasets",
        "raw",
        "part",
        "shard",
        "snapshots",
        "files",
        "json",
        "jsonl",
        "parquet",
        "arrow",
        "csv",
        "hub",
        "tmp",
    }
)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def list_source_files(source: str, split: str = "train") -> list[str]:
    """The data files SOURCE names, in sorted order; FileNotFoundError if SOURCE does not exist."""
    with storage.translating(source, reading=True):  # an unreachable store or no permission: one line
        return _list_source_files(source, split)


def _list_source_files(source: str, split: str) -> list[str]:
    fs, path = storage.get_fs(source)
    if not fs.exists(path):
        raise FileNotFoundError(source)
    if not fs.isdir(path):
        if not is_supported(path):
            raise InputError(
                f"{source}: unknown file type (supported: {', '.join(SUPPORTED_SUFFIXES)}, a "
                "directory of those, or a Hugging Face dataset id)"
            )
        return [source]
    root = path.rstrip("/")
    by_split = False
    if fs.isdir(root + "/snapshots"):  # a hub cache folder: datasets--org--name/{blobs,refs,snapshots}
        root, by_split = _snapshot(fs, root), True
    files = _data_files(fs, root)
    if fs.exists(root + "/dataset_dict.json"):
        by_split = True
    if not files:
        raise InputError(f"{source}: directory holds no {', '.join(SUPPORTED_SUFFIXES)} files")
    if by_split:
        files = _one_split(source, root, files, split)
    proto = source.split("://", 1)[0] + "://" if "://" in source else ""
    return [proto + f if proto and not f.startswith(proto) else f for f in files]


def _snapshot(fs: object, root: str) -> str:
    """The snapshot `refs/main` points at, else the newest one."""
    try:
        commit = storage.read_bytes(root + "/refs/main").decode().strip()
        if fs.isdir(f"{root}/snapshots/{commit}"):  # type: ignore[attr-defined]
            return f"{root}/snapshots/{commit}"
    except (OSError, UnicodeDecodeError):
        pass
    snaps = [p for p in fs.ls(root + "/snapshots", detail=True) if p["type"] == "directory"]  # type: ignore[attr-defined]
    if not snaps:
        raise InputError(f"{root}: a Hugging Face cache folder with no snapshot in snapshots/")
    return max(snaps, key=lambda p: (p.get("mtime") or 0, p["name"]))["name"].rstrip("/")


def _data_files(fs: object, root: str) -> list[str]:
    """Supported files below ROOT: hidden names, `datasets` metadata and stray Arrow caches left out."""
    prefix = root + "/"
    found = sorted(
        f
        for f in fs.find(root)
        if is_supported(f)  # type: ignore[attr-defined]
        and not any(part.startswith(".") for part in f.removeprefix(prefix).split("/"))
        and f.rsplit("/", 1)[-1] not in HF_METADATA
    )
    listed: dict[str, set[str]] = {}  # save_to_disk folder -> the Arrow shards its state.json names
    for state in (f for f in fs.find(root) if f.endswith("/state.json")):  # type: ignore[attr-defined]
        try:
            meta = json.loads(storage.read_bytes(state))
            names = {d["filename"] for d in meta.get("_data_files", []) if isinstance(d, dict)}
        except (ValueError, KeyError, TypeError, AttributeError, OSError):
            continue
        if names:
            listed[state.rsplit("/", 1)[0]] = names
    return [
        f
        for f in found
        if not (
            f.lower().endswith(".arrow")
            and f.rsplit("/", 1)[0] in listed
            and f.rsplit("/", 1)[-1] not in listed[f.rsplit("/", 1)[0]]
        )
    ]


def _split_of(rel: str) -> str | None:
    for part in rel.lower().split("/"):
        stem = _strip_suffix(part)
        for split in SPLITS:
            if stem == split or re.match(rf"^{split}([-_.]|$)", stem):
                return split
    return None


def _one_split(source: str, root: str, files: list[str], split: str) -> list[str]:
    rels = {f: f.removeprefix(root + "/") for f in files}
    splits = {f: _split_of(r) for f, r in rels.items()}
    if not any(splits.values()):
        return files
    chosen = [f for f in files if splits[f] == split.lower()]
    if not chosen:
        found = sorted({s for s in splits.values() if s})
        raise InputError(
            f"{source}: no files for split {split!r} (splits found: {', '.join(found)}); set split", options=("split",)
        )
    configs: dict[str, list[str]] = {}
    for f in chosen:
        parts = [p for p in rels[f].split("/")[:-1] if _split_of(p) is None]
        configs.setdefault("/".join(parts), []).append(f)
    if len(configs) == 1:
        return chosen
    for preferred in ("", "default", "main", "data", "plain_text"):
        if preferred in configs:
            return configs[preferred]
    raise InputError(
        f"{source}: several configurations hold split {split!r} ({', '.join(sorted(configs))}); "
        "point SOURCE at one of their folders"
    )


def folder_of(source: str, file: str) -> str | None:
    """FILE's folder relative to a directory SOURCE (the subject folder of MATH), None at the top."""
    root = storage.get_fs(source)[1].rstrip("/") + "/"
    rel = storage.get_fs(file)[1].removeprefix(root)
    if rel == storage.get_fs(file)[1] or "/" not in rel:
        return None
    return rel.rsplit("/", 1)[0]


def _strip_suffix(name: str) -> str:
    lower = name.lower()
    for suffix in sorted(SUPPORTED_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _meaningful(part: str) -> str | None:
    """PART as a dataset name, or None if it says nothing about the data (train, part-00000, a commit)."""
    if part.startswith("datasets--"):  # hub cache folder: datasets--org--name
        return part.split("--")[-1] or None
    stem = _strip_suffix(part)
    if _COMMIT.match(stem.lower()):
        return None
    while True:
        shorter = _SHARD.sub("", stem)
        if shorter == stem:
            break
        stem = shorter
    if not stem or stem.isdigit() or stem.lower() in _GENERIC or _split_of(stem) == stem.lower():
        return None
    return stem


def dataset_name(source: str) -> str:
    """Run name from a source: its last meaningful path part (`math500/test.jsonl` -> `math500`), sanitised."""
    parts = [p for p in source.split("://", 1)[-1].rstrip("/").split("/") if p]
    for name in [_meaningful(p) for p in reversed(parts)] + [_strip_suffix(parts[-1]) if parts else None]:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", name or "").strip("_.")
        if name:
            return name
    return "dataset"


def source_digest(source: str, split: str = "train") -> str:
    """The digest of the files SOURCE names (their names and content hashes), as `ReadLedger.digest` of a read of
    the same bytes gives it; a Hugging Face id (read through `datasets`) is keyed by its name."""
    try:
        files = list_source_files(source, split)
    except FileNotFoundError:
        return f"id:{source}"
    return combine([(relative_name(source, f), storage.content_hash(f)) for f in files])


_NOT_DATA = (".md", ".py", ".yaml", ".yml", ".cff", ".lock", ".license", ".gitattributes", ".gitignore")
_NOT_DATA_NAMES = ("readme", "license", "licence", "notice", "copying", "changelog", "citation")


def skipped_files(source: str) -> list[str]:
    """Files below a directory SOURCE that are not read because their format is not supported (`.tsv`, `.zst`,
    `.parquet.gz` ...), so a build can say so; hidden files, `datasets` metadata and documentation left out."""
    fs, path = storage.get_fs(source)
    if not fs.isdir(path):
        return []
    root = path.rstrip("/") + "/"
    found = []
    for f in sorted(fs.find(path)):
        rel = f.removeprefix(root)
        name = rel.rsplit("/", 1)[-1]
        if is_supported(f) or name in HF_METADATA or any(p.startswith(".") for p in rel.split("/")):
            continue
        if name.lower().endswith(_NOT_DATA) or name.lower().startswith(_NOT_DATA_NAMES) or "/refs/" in f"/{rel}":
            continue
        found.append(rel)
    return found


def iter_source_batches(
    source: str, split: str, batch_rows: int, ledger: ReadLedger | None = None, max_record_lines: int = 1000
) -> Iterator[list[RawRow]]:
    """Batches of rows from every file of SOURCE; small files (one problem per file) share a batch.

    LEDGER records the bytes read from each file (a hub dataset, read through `datasets`, has none)."""
    ledger = ledger if ledger is not None else ReadLedger(source)
    try:
        files = list_source_files(source, split)
    except FileNotFoundError:
        if looks_like_hub_id(source):
            yield from iter_hub_batches(source, split, batch_rows)
            return
        raise InputError(f"{source}: no such file or directory") from None
    pending: list[RawRow] = []
    for file in files:
        for batch in iter_file_batches(file, batch_rows, ledger, max_record_lines):
            if not pending and len(batch) >= batch_rows:
                yield batch
                continue
            pending.extend(batch)
            if len(pending) >= batch_rows:
                yield pending
                pending = []
    if pending:
        yield pending
