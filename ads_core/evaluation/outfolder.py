"""An evaluation's output folder: one ``ads eval`` at a time (a lock), and its files checked before the model loads.

``OUT/eval.json`` records what the completions depend on (model, k, sampling, template); a folder written by a
different evaluation is refused rather than mixed. ``OUT/parts/part-NNNNN.parquet`` are the finished chunks of a
run in progress, ``OUT/completions.parquet`` the merged result. ``check(out)`` reads all of them (a corrupt one
is one line naming the file) and ``holding(out)`` holds ``OUT/.lock`` while an evaluation writes there: a second
``ads eval`` into the same folder is refused at once, naming the holder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from ads_core import storage
from ads_core.common.errors import InputError

COMPLETIONS = "completions.parquet"
RUN_FILE = "eval.json"
PARTS = "parts"
SCHEMA = pa.schema(
    [
        ("set", pa.string()),
        ("problem_id", pa.int64()),
        ("sample", pa.int32()),
        ("text", pa.string()),
        ("extracted", pa.string()),
        ("correct", pa.bool_()),
        ("reason", pa.string()),
        ("tokens", pa.int32()),
        ("seconds", pa.float64()),
        ("ground_truth", pa.string()),
    ]
)
LOCK = ".lock"
WHAT = "evaluation"


def check_same(out: str, run: dict[str, Any]) -> None:
    """Refuse OUT when its eval.json names another evaluation (other model, k, sampling or template)."""
    uri = storage.join(out, RUN_FILE)
    if not storage.exists(uri):
        return
    try:
        before = storage.read_json(uri)
    except (OSError, ValueError) as exc:
        raise InputError(f"{uri}: unreadable ({exc}); delete {out} or pick another output folder") from None
    was = {**before.get("generation", {}), "model": before.get("identity", {}).get("fingerprint")}
    now = {**run["generation"], "model": run["identity"].get("fingerprint")}
    changed = [key for key in sorted(set(was) | set(now)) if was.get(key) != now.get(key)]
    if changed:
        raise InputError(
            f"{out} holds completions of a different evaluation ({', '.join(changed)} differ); "
            "pick another output folder or delete it"
        )


def claim(out: str, run: dict[str, Any]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Check OUT/eval.json against this evaluation (or write it) and read the completions already there."""
    uri = storage.join(out, RUN_FILE)
    check_same(out, run)
    if not storage.exists(uri):
        storage.write_json(uri, run)
    done: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for source in [storage.join(out, COMPLETIONS), *parts(out)]:
        if storage.exists(source):
            remember(done, read_completions(source))
    return done


def remember(done: dict[tuple[str, int], list[dict[str, Any]]], table: pa.Table) -> None:
    for row in table.to_pylist():
        done.setdefault((row["set"], row["problem_id"]), []).append(row)


def parts(out: str) -> list[str]:
    folder = storage.join(out, PARTS)
    if not storage.exists(folder):
        return []
    fs, path = storage.get_fs(folder)
    names = sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False))
    return [storage.join(folder, n) for n in names if n.startswith("part-") and n.endswith(".parquet")]


def next_part(out: str) -> str:
    found = parts(out)
    last = int(found[-1].rsplit("part-", 1)[-1].split(".")[0]) if found else -1
    return storage.join(out, PARTS, f"part-{last + 1:05d}.parquet")


def read_completions(uri: str) -> pa.Table:
    """A completions or part file in SCHEMA; a corrupt or foreign one is an InputError naming the file."""
    try:
        table = storage.read_parquet(uri)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(
            f"{uri}: not a readable Parquet file ({str(exc)[:100]}); delete it to generate again"
        ) from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise InputError(
            f"{uri}: not a completions file (no column {', '.join(missing)}); delete it or pick another --out"
        )
    try:
        return table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise InputError(
            f"{uri}: a column has the wrong type ({str(exc)[:100]}); delete it or pick another --out"
        ) from None


def check(out: str) -> None:
    """Everything in OUT an evaluation would read, read now (before the model loads): one line per problem."""
    if storage.is_local(out):
        path = Path(storage.local_path(out))
        blocker = next((p for p in (path, *path.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise InputError(f"--out {out}: {blocker} is a file, not a folder")
        if blocker is not None and not os.access(blocker, os.W_OK):
            raise InputError(f"--out {out}: {blocker} is not writable")
    uri = storage.join(out, RUN_FILE)
    if storage.exists(uri):
        try:
            doc = storage.read_json(uri)
        except (OSError, ValueError) as exc:
            raise InputError(f"{uri}: unreadable ({exc}); delete {out} or pick another output folder") from None
        if not isinstance(doc, dict):
            raise InputError(f"{uri}: not a JSON object; delete {out} or pick another output folder")
    for source in [storage.join(out, COMPLETIONS), *parts(out)]:
        if storage.exists(source):
            read_completions(source)


@contextmanager
def holding(out: str) -> Iterator[None]:
    """Hold OUT for one evaluation; InputError at once when another live ``ads eval`` holds it."""
    if not storage.is_local(out):  # object stores: no lock here (the build's object locks need a bucket prefix)
        yield
        return
    from ads_core.locks.manager import BuildLockManager, LockWaitTimeout
    from ads_core.locks.store import DirLockStore

    folder = Path(storage.local_path(out))
    folder.mkdir(parents=True, exist_ok=True)
    manager, key, holder = BuildLockManager(), "eval-out", "ads eval"
    try:
        manager.acquire_lock(key, holder, acquire_timeout=0, label=out, store=DirLockStore(folder / LOCK), what=WHAT)
    except LockWaitTimeout as exc:
        raise InputError(
            f"--out {out} is in use by another evaluation ({exc.holder}); wait for it to finish or pick another --out"
        ) from None
    try:
        yield
    finally:
        try:
            manager.release_lock(key, holder)
        except ValueError:  # taken over meanwhile (our lease lapsed): nothing of ours to release
            pass
