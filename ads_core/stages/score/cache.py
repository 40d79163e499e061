"""Row-level score cache: a refresh scores only rows whose content is new, and reuses the rest exactly.

A row's score (embedding, difficulty, token counts, truncation flag, NLL target) is stored under
- a namespace: the model's content fingerprint, the scoring options that change numbers (text mode,
  max length, backend, resolved device type and dtype) and the score stage's version;
- a row key: sha256 of the row's question, solution and answer text (the tokenizer is part of the
  model fingerprint, so the same text always gives the same token ids).

Entries live in storage (local, s3:// or memory://) as Parquet parts,
`<root>/<namespace>/part-<sha256 of the file>.parquet`, each written atomically. A part whose bytes
no longer match its name is corrupt: it is ignored (its rows are rescored) and removed. Parts are
only ever added, so concurrent builds never conflict; duplicates across parts hold the same values.

The cache only saves time, so it never fails a build: a cache that cannot be read or written (a full disk,
no permission, a read-only mount, an unreachable store) gives one warning naming its URI, and the rows are
scored without it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ads_core import storage
from ads_core.common import defaults
from ads_core.config.build import ScoreConfig
from ads_core.storage.errors import redact

log = logging.getLogger("ads.score")

CACHE_VERSION = "1"


def default_root() -> str:
    return str(defaults.cache_dir() / "score-cache")


def namespace(cfg: ScoreConfig, model_fingerprint: str, stage_version: str) -> str:
    """Everything besides the row's text that decides its numbers."""
    from ads_core import models

    device = models.pick_device(cfg.device)
    dtype = models.dtype_choice(device, cfg.dtype, model=cfg.model)
    backend = "transformers" if cfg.backend == "auto" else cfg.backend
    payload = {
        "cache": CACHE_VERSION,
        "stage": stage_version,
        "model": model_fingerprint,
        "backend": backend,
        "device": device.split(":")[0],
        "dtype": dtype,
        "text_mode": cfg.text_mode,
        "max_length": cfg.max_length,
    }
    if cfg.difficulty != "nll_mean":  # keys of the seed's measure stay as they were
        payload["difficulty"] = cfg.difficulty
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def row_key(question: str | None, solution: str | None, answer: str | None) -> str:
    blob = json.dumps([question or "", solution or "", answer or ""], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


class ScoreCache:
    """The parts of one namespace under a cache root."""

    def __init__(self, root: str, space: str) -> None:
        self.root = root
        self.directory = storage.join(root, space)
        self.disabled: str | None = None  # why the cache is not used any more in this process

    def _give_up(self, what: str, exc: BaseException) -> None:
        reason = exc.problem if isinstance(exc, storage.StorageError) else f"{type(exc).__name__}: {exc}"
        self.disabled = f"cannot {what} the score cache at {redact(self.root)} ({reason})"
        log.warning(
            "%s; scoring without the cache (free space or fix its permissions, set score.cache_uri to another "
            "location, or turn it off with --no-score-cache)",
            self.disabled,
        )

    def _parts(self) -> list[str]:
        try:  # never a cached listing: in a long-lived process (a Dask worker) it would hide other machines' parts
            with storage.translating(self.directory):
                fs, path = storage.get_fs(self.directory)
                names = fs.ls(path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        except (OSError, storage.StorageError) as exc:
            self._give_up("read", exc)
            return []
        prefix = self.directory[: len(self.directory) - len(path)] if self.directory.endswith(path) else ""
        return sorted(prefix + n for n in names if n.rsplit("/", 1)[-1].startswith("part-") and n.endswith(".parquet"))

    def lookup(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Stored values of the keys found; corrupt parts are skipped (and removed)."""
        wanted = pa.array(sorted(set(keys)), pa.string())
        found: dict[str, dict[str, Any]] = {}
        if not len(wanted):
            return found
        for uri in self._parts():
            try:
                data = storage.read_bytes(uri)
            except FileNotFoundError:  # removed by a concurrent build: its rows are elsewhere or rescored
                continue
            except (OSError, storage.StorageError) as exc:  # unreadable: its rows are rescored
                log.warning("score cache: cannot read %s (%s); its rows are scored again", uri, exc)
                continue
            expected = uri.rsplit("/", 1)[-1].removeprefix("part-").removesuffix(".parquet")
            if hashlib.sha256(data).hexdigest() != expected:
                log.warning("score cache: %s is corrupt (its content does not match its name); ignoring it", uri)
                _remove(uri)
                continue
            table = pq.read_table(io.BytesIO(data))
            table = table.filter(pc.is_in(table.column("row_key"), value_set=wanted))
            for row in table.to_pylist():
                found.setdefault(row["row_key"], row)
        return found

    def add(self, table: pa.Table) -> str | None:
        """Store new rows as one part (named by its content hash); returns its URI."""
        if table.num_rows == 0 or self.disabled:
            return None
        buf = io.BytesIO()
        pq.write_table(table, buf)
        data = buf.getvalue()
        uri = storage.join(self.directory, f"part-{hashlib.sha256(data).hexdigest()}.parquet")
        try:
            storage.write_bytes(uri, data)
        except (OSError, storage.StorageError) as exc:  # the scores are computed: only their reuse is lost
            self._give_up("write to", exc)
            return None
        return uri


def _remove(uri: str) -> None:
    fs, path = storage.get_fs(uri)
    try:
        fs.rm(path)
    except OSError:
        pass
