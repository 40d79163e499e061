"""The one manifest module: files listed with their checksums, checked before they are trusted. Two kinds:

- `manifest.json` beside every artifact (below): what a stage read, with which config and code, and what it wrote;
- `ads_manifest.json` in every training checkpoint (`write_checkpoint`, `checkpoint_problem`, at the end): each
  file's size and sha256, the step and the run's identity. Which checkpoint a resume uses, rotation and setting
  failed ones aside are the resume's business (`ads_core.train.resume.checkpoints`).

Artifact manifests:

A stage directory is complete only once its manifest exists and the output hashes it lists still
match the files (`verify`). The manifest is written last, so a crash mid-stage leaves no
manifest and the stage is recomputed. Later stages key their caches on these hashes.

Nothing in a manifest is trusted unchecked: each carries `digest`, the sha256 of the rest of its content,
which `problems()` recomputes (a hand edit, or a manifest written before digests, fails it), and its counts
must add up and agree with the row counts of the files it lists (`verify` reads each Parquet footer).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core import __version__, storage
from ads_core.storage import fencing

MANIFEST_NAME = "manifest.json"
log = logging.getLogger("ads.manifest")


class ManifestError(ValueError):
    """A manifest that cannot be trusted (edited by hand, or its counts do not add up); one line naming the file."""


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
    digest: str | None = None  # sha256 of everything else, set by `write`

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


def anchored(uri: str) -> str:
    """A plain local path made absolute; any other URI as it is. A manifest never records a path relative to the
    working directory: read from another directory it would name files that are not there."""
    if "://" not in uri and not os.path.isabs(uri):
        return os.path.abspath(uri)
    return uri


def output_entry(uri: str, rows: int | None = None) -> dict[str, Any]:
    """Describe one written file: its URI (a local one absolute), content hash and (optionally) row count."""
    uri = anchored(uri)
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
        for entry in checked(stage_dir_of(uri)).outputs.values():  # an edited manifest is not believed
            if entry.get("uri") == uri and entry.get("sha256"):
                return str(entry["sha256"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return storage.tree_hash(uri)


def input_entry(uri: str, sha256: str | None = None) -> dict[str, Any]:
    """Describe one input: its URI (a local one absolute, see `anchored`) and content hash."""
    uri = anchored(uri)
    return {"uri": uri, "sha256": sha256 or artifact_hash(uri)}


def content_digest(data: dict[str, Any]) -> str:
    """sha256 of a manifest's content as stored (JSON, keys sorted), without its own `digest` field."""
    body = {k: v for k, v in data.items() if k != "digest"}
    canonical = json.dumps(json.loads(json.dumps(body, default=str)), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def write(stage_dir: str, manifest: Manifest) -> str:
    uri = storage.join(stage_dir, MANIFEST_NAME)
    manifest.digest = content_digest(manifest.to_dict())
    storage.write_json(uri, manifest.to_dict())
    return uri


def read(stage_dir: str) -> Manifest:
    """The manifest as stored, unchecked (see `checked` and `verify` for what may be trusted)."""
    return Manifest.from_dict(storage.read_json(storage.join(stage_dir, MANIFEST_NAME)))


# counts that must add up: total = sum of parts; and counts that name an output's row count
_SUMS = (("rows_in", ("rows_out", "rows_rejected")), ("rows", ("rows_scored", "rows_reused")))
_OUTPUT_ROWS = {"rows_out": "train", "rows_rejected": "rejects"}


def problems(manifest: Manifest) -> list[str]:
    """Why a manifest cannot be trusted as it stands (empty when it can): its digest, and counts that disagree."""
    found = []
    if not manifest.digest:
        found.append("it has no digest (written by hand or by an older version)")
    elif content_digest(manifest.to_dict()) != manifest.digest:
        found.append("its content does not match its digest (it was edited after it was written)")
    counts = manifest.counts if isinstance(manifest.counts, dict) else {}
    ints = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}
    for total, parts in _SUMS:
        if total in ints and all(p in ints for p in parts) and ints[total] != sum(ints[p] for p in parts):
            found.append(f"counts: {total} {ints[total]} != {' + '.join(f'{p} {ints[p]}' for p in parts)}")
    by_reason = counts.get("rejects_by_reason")
    if isinstance(by_reason, dict) and "rows_rejected" in ints:
        total = sum(v for v in by_reason.values() if isinstance(v, int))
        if total != ints["rows_rejected"]:
            found.append(f"counts: rejects_by_reason sum to {total}, rows_rejected is {ints['rows_rejected']}")
    for name, entry in manifest.outputs.items():
        listed = entry.get("rows") if isinstance(entry, dict) else None
        if listed is None:
            continue
        for count, output in _OUTPUT_ROWS.items():
            if output == name and count in ints and ints[count] != listed:
                found.append(f"counts: {count} {ints[count]}, but outputs.{name} lists {listed} rows")
        if "rows" in ints and ints["rows"] != listed:
            found.append(f"counts: rows {ints['rows']}, but outputs.{name} lists {listed} rows")
    return found


def checked(stage_dir: str) -> Manifest:
    """The manifest, once its digest and counts check out; ManifestError (one line naming the file) otherwise."""
    manifest = read(stage_dir)
    found = problems(manifest)
    if found:
        raise ManifestError(f"{storage.join(stage_dir, MANIFEST_NAME)}: not trusted: {'; '.join(found)}")
    return manifest


def why_not_intact(stage_dir: str) -> tuple[Manifest | None, str | None]:
    """The stage's manifest and None when it and every output it lists are intact and beside it, else the reason."""
    try:
        manifest = read(stage_dir)
    except (FileNotFoundError, ValueError, KeyError, TypeError) as exc:
        return None, f"no readable {MANIFEST_NAME} ({type(exc).__name__})"
    found = problems(manifest)
    if found:
        return None, "; ".join(found)
    prefix = anchored(stage_dir).rstrip("/") + "/"
    for name, entry in manifest.outputs.items():
        try:
            if not str(entry["uri"]).startswith(prefix):  # a copied manifest describing files elsewhere
                return None, f"outputs.{name} is not in this folder ({entry['uri']})"
            if storage.content_hash(entry["uri"]) != entry["sha256"]:
                return None, f"{entry['uri']} no longer matches its hash"
            if entry.get("rows") is not None and str(entry["uri"]).endswith(".parquet"):
                actual = storage.parquet_num_rows(entry["uri"])
                if actual != entry["rows"]:
                    return None, f"{entry['uri']} has {actual} rows, the manifest lists {entry['rows']}"
        except (OSError, KeyError, TypeError):  # output gone or unreadable, or an entry without uri/sha256
            return None, f"outputs.{name} is missing or unreadable"
    return manifest, None


def verify(stage_dir: str) -> Manifest | None:
    """The stage's manifest if it checks out (digest, counts) and every output it lists is intact beside it."""
    return why_not_intact(stage_dir)[0]


# ---------------------------------------------------------------------------------------------
# checkpoint manifests: written last, after every file of the checkpoint is fsynced; a checkpoint counts only with
# its manifest, and a resume re-hashes it (a missing, truncated or changed file fails it, named)

CHECKPOINT_MANIFEST = "ads_manifest.json"
CHECKPOINT_FORMAT = "ads-checkpoint-manifest"


def _file_sha256(path: Path) -> str:
    return storage.content_hash(str(path)).removeprefix("sha256:")


def _checkpoint_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.name != CHECKPOINT_MANIFEST and not p.name.startswith(".")
    )


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(folder: str | os.PathLike[str], step: int, run_id: str) -> Path:
    """Fsync every file of FOLDER, then write its manifest atomically (the checkpoint is complete once it lands);
    fenced: a run that lost its lock on the run folder publishes no checkpoint."""
    root = Path(folder)
    files: dict[str, dict[str, Any]] = {}
    for path in _checkpoint_files(root):
        _fsync(path)
        files[path.relative_to(root).as_posix()] = {"size": path.stat().st_size, "sha256": _file_sha256(path)}
    for sub in sorted({p.parent for p in _checkpoint_files(root)} | {root}):
        _fsync(sub)
    doc = {"format": CHECKPOINT_FORMAT, "version": 1, "step": int(step), "run_id": run_id, "files": files}
    target, tmp = root / CHECKPOINT_MANIFEST, root / f".{CHECKPOINT_MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1, sort_keys=True))
        fh.flush()
        os.fsync(fh.fileno())
    fencing.check_publish(str(target))  # LockLost: the checkpoint stays without a manifest, never counted
    os.replace(tmp, target)
    _fsync(root)
    return target


def has_checkpoint_manifest(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / CHECKPOINT_MANIFEST).is_file()


def checkpoint_run_id(folder: str | os.PathLike[str]) -> str | None:
    try:
        value = json.loads((Path(folder) / CHECKPOINT_MANIFEST).read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def checkpoint_problem(folder: str | os.PathLike[str], step: int, run_id: str | None) -> str | None:
    """Why FOLDER is not a verified checkpoint of STEP of run RUN_ID (None: it is), naming the file."""
    root = Path(folder)
    path = root / CHECKPOINT_MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{path}: missing (a save that did not finish, or a deleted manifest)"
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({exc})"
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT or not isinstance(doc.get("files"), dict):
        return f"{path}: not a checkpoint manifest"
    if doc.get("step") != step:
        return f"{path}: says step {doc.get('step')}, the folder step {step}"
    if run_id is not None and doc.get("run_id") != run_id:
        return f"{path}: belongs to another run ({doc.get('run_id')}, this run is {run_id})"
    for rel, entry in sorted(doc["files"].items()):
        file = root / rel
        try:
            size = file.stat().st_size
            if size != entry.get("size"):
                return f"{file}: truncated or changed ({size} bytes, its manifest says {entry.get('size')})"
            if _file_sha256(file) != entry.get("sha256"):
                return f"{file}: changed since it was saved (its sha256 differs from the manifest's)"
        except FileNotFoundError:
            return f"{file}: missing"
        except OSError as exc:
            return f"{file}: unreadable ({exc.strerror or exc})"
    return None
