"""The conversion: any math dataset → verl's GRPO schema, with rejects that account for every row.

The build's format stage (`ads_core.stages.format`), `ads format` and the eval sets
(`ads_core.evaluation.sets.writer`: training planning, `ads eval`, the report stage) all convert with
`format_dataset` / `write_formatted`; nothing here knows about a build. The work is split by responsibility:
`sources` (which files a SOURCE names), `readers` and `arrow` (files → raw rows), `detect` (which columns play
which role), `rows` (one row → question, solution, answer, or a reject), `schema` (templates, the output and
rejects schemas) and `ads_core.common.text` (normalisation and `\\boxed{}` helpers).

Output: the kept rows (`train.parquet`), the rejects (`rejects.parquet`) and the manifest beside them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ads_core import storage
from ads_core.common import text
from ads_core.common.errors import InputError
from ads_core.common.text import sample_id_of
from ads_core.config.build import FormatConfig
from ads_core.ingest import readers, records
from ads_core.ingest import sources as format_sources
from ads_core.ingest.detect import FileLayouts, Layout
from ads_core.ingest.records import RawRow, SourceChanged
from ads_core.ingest.rows import Converted, convert_row
from ads_core.ingest.schema import OUTPUT_SCHEMA, REJECTS_SCHEMA, template_string
from ads_core.ingest.sources import dataset_name
from ads_core.ingest.values import Reject
from ads_core.storage import manifest as mf

log = logging.getLogger("ads.format")

VERSION = "3"  # bump by hand when the formatted rows change for the same input (it is in the cache key)
OUTPUTS = {"formatted": "formatted/train.parquet", "rejects": "formatted/rejects.parquet"}  # under OUT


@dataclass
class FormatSummary:
    rows_in: int = 0
    rows_out: int = 0
    rejects: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # reason -> its first reject, for the error

    @property
    def rows_rejected(self) -> int:
        return sum(self.rejects.values())


def _source_meta(row: dict[str, Any], layout: Layout, folder: str | None) -> str | None:
    skip = layout.used() | {"extra_info", "reward_model", "prompt"}
    meta = {
        k: v
        for k, v in row.items()
        if k not in skip and isinstance(v, (str, int, float, bool)) and not (isinstance(v, str) and len(v) > 500)
    }
    if folder and "folder" not in meta:
        meta["folder"] = folder  # the subject folder of a one-problem-per-file tree (MATH)
    return readers.safe_text(json.dumps(meta, ensure_ascii=False, sort_keys=True)) if meta else None


def format_dataset(
    source: str, out: str, cfg: FormatConfig | None = None, progress: Callable[[int], None] | None = None
) -> mf.Manifest:
    """Format SOURCE into OUT where the build's stage writes them (`OUTPUTS`: `ads format`, eval sets, tests)."""
    uris = {name: storage.join(out, *path.split("/")) for name, path in OUTPUTS.items()}
    return write_formatted(source, uris["formatted"], uris["rejects"], cfg, progress)


MAX_READS = 3  # a source that changes under every read of it fails after this many


def write_formatted(
    source: str,
    train_uri: str,
    rejects_uri: str,
    cfg: FormatConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> mf.Manifest:
    """Format SOURCE into TRAIN_URI and REJECTS_URI (one folder, the manifest beside them).

    Raises InputError for unusable input; row-level problems become rejects with reasons. A run that
    keeps less than `cfg.min_kept` of its non-duplicate rows raises InputError too, after the rejects and the manifest
    are written, so the reasons can be inspected. The manifest records the digest of the bytes actually read;
    a source file that changes while it is read is read again, and after MAX_READS changing reads the run fails.
    """
    for attempt in range(1, MAX_READS + 1):
        try:
            return _write_once(source, train_uri, rejects_uri, cfg or FormatConfig(), progress)
        except SourceChanged as exc:
            if attempt == MAX_READS:
                raise InputError(
                    f"{source}: {exc}, on each of {MAX_READS} reads; rerun once the job writing it has finished"
                ) from None
            log.warning("%s; reading the source again (%d of %d)", exc, attempt + 1, MAX_READS)
    raise AssertionError("unreachable")  # pragma: no cover


def format_config_record(cfg: FormatConfig, name: str) -> dict[str, Any]:
    """The config a format manifest records: the section, the dataset name and the prompt template written."""
    return {**mf.config_dict(cfg), "name": name, "template_string": template_string(cfg)}


def _write_once(
    source: str,
    train_uri: str,
    rejects_uri: str,
    cfg: FormatConfig,
    progress: Callable[[int], None] | None,
) -> mf.Manifest:
    """One read of SOURCE: every row converted or rejected into the two Parquet files, then the manifest, then the
    kept-rows check. SourceChanged when the source changed while it was read (the caller reads it again)."""
    job = _Conversion(source, cfg)
    with (
        storage.atomic_local_file(train_uri, ".parquet") as train_tmp,
        storage.atomic_local_file(rejects_uri, ".parquet") as rejects_tmp,
    ):
        job.write_rows(train_tmp, rejects_tmp, progress)
        if job.summary.rows_in == 0:
            raise InputError(f"{source}: no rows (the file is empty)")
    assert job.summary.rows_in == job.summary.rows_out + job.summary.rows_rejected
    manifest = job.manifest(train_uri, rejects_uri)
    mf.write(mf.stage_dir_of(train_uri), manifest)
    _check_kept(source, job.summary, cfg.min_kept, rejects_uri)
    return manifest


class _Conversion:
    """The state of one read of a source: its layouts, the questions seen (duplicates), the counts."""

    def __init__(self, source: str, cfg: FormatConfig) -> None:
        self.source, self.cfg = source, cfg
        self._names: dict[str, str] = {}  # read file -> its name relative to the source (file_name)
        self.template = template_string(cfg)
        self.name = cfg.name or dataset_name(source)
        self.source_exists = storage.exists(source)  # a missing path is reported by the reader as an error: line
        self.ledger = records.ReadLedger(source)
        self.summary = FormatSummary()
        self.layouts = FileLayouts(source, cfg)
        self.seen: dict[int, tuple[str, int]] = {}  # sample_id -> where its question first appeared

    def write_rows(self, train_path: str, rejects_path: str, progress: Callable[[int], None] | None) -> None:
        """Each batch of the source: its kept rows into TRAIN_PATH, its rejects into REJECTS_PATH."""
        train_writer = pq.ParquetWriter(train_path, OUTPUT_SCHEMA, compression="zstd")
        rejects_writer = pq.ParquetWriter(rejects_path, REJECTS_SCHEMA, compression="zstd")
        cfg = self.cfg
        try:
            for batch in format_sources.iter_source_batches(
                self.source, cfg.split, cfg.batch_rows, self.ledger, cfg.csv_max_record_lines
            ):
                kept, rejects = self.convert_batch(batch)
                if kept:
                    train_writer.write_table(pa.Table.from_pylist(kept, schema=OUTPUT_SCHEMA))
                if rejects:
                    rejects_writer.write_table(pa.Table.from_pylist(rejects, schema=REJECTS_SCHEMA))
                if progress:
                    progress(len(batch))
        finally:
            train_writer.close()
            rejects_writer.close()

    def convert_batch(self, batch: list[RawRow]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The batch's output rows and its rejects, every row counted once."""
        kept: list[dict[str, Any]] = []
        rejects: list[dict[str, Any]] = []
        for raw in batch:
            self.summary.rows_in += 1
            converted = self.convert_row(raw, batch)
            if isinstance(converted, _Rejected):
                rejects.append(self.reject(raw, converted))
                continue
            kept.append(converted)
            self.summary.rows_out += 1
        return kept, rejects

    def convert_row(self, raw: RawRow, batch: list[RawRow]) -> dict[str, Any] | _Rejected:
        """One row as an output row, or why it is rejected: unreadable, not convertible, not UTF-8, a duplicate."""
        if raw.data is None:
            return _Rejected(raw.reject_reason or "bad_row", raw.reject_message or "unreadable row", raw.raw)
        layout = self.layouts.get(raw, batch)
        try:
            conv = convert_row(raw.data, layout, self.cfg)
        except Reject as rej:
            return _Rejected(rej.reason, f"row {raw.source_row}: {rej.message}", _row_preview(raw.data))
        if any(text.has_surrogates(t) for t in (conv.question, conv.answer, conv.solution or "")):
            message = "a field used in the output (options, body or solution) is not valid UTF-8"
            return _Rejected("bad_encoding", f"row {raw.source_row}: {message}", _row_preview(raw.data))
        sid = sample_id_of(conv.question)
        if sid in self.seen:
            first_file, first_row = self.seen[sid]
            message = f"row {raw.source_row}: same question as row {first_row} of {first_file}"
            return _Rejected("duplicate", message, _row_preview(raw.data))
        self.seen[sid] = (raw.source_file, raw.source_row)
        folder = self.layouts.folders.get(raw.source_file)
        index = self.summary.rows_out
        row = _output_row(raw, layout, conv, self.cfg, self.name, self.template, sid, index, folder)
        row["extra_info"]["source_file"] = self.file_name(raw.source_file)
        return row

    def file_name(self, uri: str) -> str:
        """A read file as rows record it: relative to the source (a one-file source by its base name), so the
        artifact's bytes do not depend on where the source sits; the manifest records the source itself."""
        if uri not in self._names:
            self._names[uri] = records.relative_name(self.source, uri)
        return self._names[uri]

    def reject(self, raw: RawRow, why: _Rejected) -> dict[str, Any]:
        """The reject's row (counted by reason; the first of each reason kept as the example for the error)."""
        self.summary.rejects[why.reason] += 1
        self.summary.examples.setdefault(why.reason, f"{raw.source_file} row {raw.source_row}: {why.message}")
        return {
            "source_file": self.file_name(raw.source_file),
            "source_row": raw.source_row,
            "reason": why.reason,
            "message": why.message,
            "raw": why.preview,
        }

    def manifest(self, train_uri: str, rejects_uri: str) -> mf.Manifest:
        """What was read (the digest of the bytes consumed), written and detected, with the counts."""
        summary, layouts = self.summary, self.layouts
        extra: dict[str, Any] = {"detected": layouts.detected, "name": self.name, "evidence": layouts.evidence}
        if layouts.unlisted:
            extra["files_not_listed"] = layouts.unlisted
        skipped = format_sources.skipped_files(self.source) if self.source_exists else []
        if skipped:
            shown = ", ".join(skipped[:10])
            log.warning("%s: %d file(s) not read (format not supported): %s", self.source, len(skipped), shown)
            extra["files_skipped"] = {"count": len(skipped), "names": skipped[: FileLayouts.MAX_LISTED]}
        read = {
            "uri": self.source,
            "sha256": self.ledger.digest() if self.source_exists else None,  # what was read, not what is there now
            "bytes": self.ledger.bytes_read,
        }
        return mf.Manifest(
            stage="format",
            inputs={"source": read},
            outputs={
                "train": mf.output_entry(train_uri, summary.rows_out),
                "rejects": mf.output_entry(rejects_uri, summary.rows_rejected),
            },
            config=format_config_record(self.cfg, self.name),
            code_version=mf.version_of("format", VERSION),
            counts={
                "rows_in": summary.rows_in,
                "rows_out": summary.rows_out,
                "rows_rejected": summary.rows_rejected,
                "rejects_by_reason": dict(sorted(summary.rejects.items())),
            },
            extra=extra,
        )


@dataclass(frozen=True)
class _Rejected:
    reason: str
    message: str
    preview: str | None


def _output_row(
    raw: RawRow,
    layout: Layout,
    conv: Converted,
    cfg: FormatConfig,
    name: str,
    template: str,
    sid: int,
    index: int,
    folder: str | None,
) -> dict[str, Any]:
    assert raw.data is not None
    ds_value = raw.data.get(layout.data_source) if layout.data_source else None
    data_source = readers.safe_text(ds_value) if isinstance(ds_value, str) and ds_value.strip() else name
    source_id = raw.data.get(layout.id_column) if layout.id_column else None
    prompt = conv.prompt or [{"role": "user", "content": template.replace("{question}", conv.question)}]
    return {
        "data_source": data_source,
        "prompt": prompt,
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": conv.answer},
        "extra_info": {
            "index": index,
            "sample_id": sid,
            "question": conv.question,
            "solution": conv.solution,
            "answer": conv.answer,
            "split": cfg.split,
            "source_file": raw.source_file,
            "source_row": raw.source_row,
            "source_id": None if source_id is None else readers.safe_text(str(source_id)),
            "source_meta": _source_meta(raw.data, layout, folder),
        },
        "sample_id": sid,
    }


def _check_kept(source: str, summary: FormatSummary, min_kept: float, rejects_uri: str) -> None:
    """InputError when too few rows survived: the top reasons, one example each (the rejects are written)."""
    usable = summary.rows_in - summary.rejects["duplicate"]  # repeats are not a sign of a misread input
    if summary.rows_out >= min_kept * usable:
        return
    top = summary.rejects.most_common(3)
    reasons = "; ".join(f"{reason} x{n} (e.g. {_clip(summary.examples[reason])})" for reason, n in top)
    raise InputError(
        f"{source}: only {summary.rows_out} of {usable} rows kept ({summary.rows_out / usable:.0%}, "
        f"below min_kept {min_kept:.0%}; duplicates not counted); top reject reasons: {reasons}; "
        f"all rejects are in {rejects_uri}. "
        "Fix the input or the column choice (set question_col, answer_col), or set min_kept lower",
        options=("question_col", "answer_col", "min_kept"),
    )


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _row_preview(row: dict[str, Any]) -> str:
    text = readers.safe_text(json.dumps(row, ensure_ascii=False, default=str))
    return text if len(text) <= 500 else text[:500] + "…"
