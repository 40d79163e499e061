"""Validation sets for training (MATH-500, AIME24, AMC23) in verl's schema, and a decontamination check.

``write_eval_sets(out)`` formats each set with the format stage (same detection, prompt template and
``sample_id``) into ``OUT/eval/<name>.parquet``; ``data_source`` is the set's name, so verl reports
``val-core/<name>/acc/mean@n``. ``decontaminate(train, evals)`` finds training rows whose normalised
question equals an eval question, and can write a copy of the training set without them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ads_core import storage
from ads_core.format import TEMPLATES, FormatConfig, format_dataset
from ads_core.readers import InputError
from ads_core.text import normalize_question

# name -> path under the shared data directory (the publisher's layout, see ../shared/data/README.md)
EVAL_SETS: dict[str, str] = {
    "math500": "math500/test.jsonl",
    "aime24": "aime24/test.jsonl",
    "amc23": "amc23/test.jsonl",
}
EVAL_DIR = "eval"
REPORT_NAME = "decontamination.json"


def default_data_dir() -> Path | None:
    """``$ADS_EVAL_DATA_DIR``, else ``../shared/data`` next to this checkout, if it exists."""
    env = os.environ.get("ADS_EVAL_DATA_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    for path in candidates:
        if path.is_dir():
            return path
    return None


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


def resolve_sources(sources: Mapping[str, str] | None = None, names: Sequence[str] | None = None,
                    data_dir: str | Path | None = None) -> dict[str, str]:
    """name -> source path: explicit ``sources`` win, the rest of ``names`` come from the data directory."""
    explicit = dict(sources or {})
    wanted = list(names) if names is not None else ([] if explicit else list(EVAL_SETS))
    out: dict[str, str] = {}
    base = Path(data_dir) if data_dir else default_data_dir()
    for name in wanted:
        if name in explicit:
            continue
        if name not in EVAL_SETS:
            raise InputError(f"unknown eval set {name!r}; known: {', '.join(EVAL_SETS)} (or pass NAME=PATH)")
        if base is None:
            raise InputError(f"no data directory for eval set {name!r}: set ADS_EVAL_DATA_DIR, pass --data-dir, "
                             f"or give its path as {name}=PATH")
        path = base / EVAL_SETS[name]
        if not path.exists():
            raise InputError(f"eval set {name!r} not found at {path}")
        out[name] = str(path)
    for name, path in explicit.items():
        if not name or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in name):
            raise InputError(f"eval set name {name!r} must be lowercase letters, digits, '-' or '_'")
        out[name] = path
    return out


def write_eval_sets(out: str, sources: Mapping[str, str] | None = None, names: Sequence[str] | None = None,
                    data_dir: str | Path | None = None, template: str | None = None) -> dict[str, EvalSet]:
    """Format each eval set into ``OUT/eval/<name>.parquet`` (verl schema) and write ``OUT/eval/manifest.json``.

    ``template`` defaults to the training set's template (OUT/formatted/manifest.json), else ``ads_think``,
    so validation prompts look like training prompts.
    """
    resolved = resolve_sources(sources, names, data_dir)
    template = template or training_template(out) or TEMPLATES["ads_think"]
    results: dict[str, EvalSet] = {}
    with tempfile.TemporaryDirectory(prefix="ads-eval-") as tmp:
        for name, source in resolved.items():
            work = os.path.join(tmp, name)
            manifest = format_dataset(source, work, FormatConfig(name=name, split="test", template_text=template))
            table = storage.read_parquet(manifest.output_uri("train"))
            # one data_source per set: verl groups its validation metrics by it
            table = table.set_column(table.schema.get_field_index("data_source"), "data_source",
                                     pa.array([name] * table.num_rows, pa.string()))
            uri = eval_uri(out, name)
            storage.write_parquet(uri, table)
            counts = manifest.counts
            results[name] = EvalSet(name=name, source=source, uri=uri, rows=table.num_rows,
                                    rejected=counts["rows_rejected"],
                                    rejects_by_reason=dict(counts["rejects_by_reason"]))
    storage.write_json(storage.join(eval_dir(out), "manifest.json"),
                       {"template_string": template, "sets": {k: asdict(v) for k, v in results.items()}})
    return results


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


# ---------------------------------------------------------------------------------------------
# decontamination


def _questions(table: pa.Table) -> list[str]:
    if "extra_info" in table.column_names:
        info = table.column("extra_info").combine_chunks()
        names = {info.type.field(i).name for i in range(info.type.num_fields)}
        if "question" in names:
            return [normalize_question(q or "") for q in info.field("question").to_pylist()]
    if "prompt" in table.column_names:  # fall back to the last user message
        out = []
        for messages in table.column("prompt").to_pylist():
            users = [m.get("content") or "" for m in messages or [] if m.get("role") == "user"]
            out.append(normalize_question(users[-1] if users else ""))
        return out
    raise InputError("cannot find questions: no extra_info.question and no prompt column")


@dataclass
class Decontamination:
    train_uri: str
    train_rows: int
    matches: dict[str, int]  # eval set -> training rows matching one of its questions
    rows: list[int]  # row positions of contaminated training rows (sorted, unique)
    examples: list[dict[str, Any]]  # a few (row, eval set, question) for the report
    output_uri: str | None = None  # where the cleaned copy was written (drop only)

    @property
    def contaminated(self) -> int:
        return len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "contaminated": self.contaminated}


def decontaminate(train_uri: str, eval_uris: Mapping[str, str], drop_to: str | None = None,
                  max_examples: int = 10) -> Decontamination:
    """Training rows whose normalised question equals a question of an eval set.

    With ``drop_to``, also write the training set without those rows there (same schema).
    """
    train = storage.read_parquet(train_uri)
    train_q = _questions(train)
    rows: set[int] = set()
    matches: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    for name, uri in eval_uris.items():
        eval_q = set(_questions(storage.read_parquet(uri)))
        eval_q.discard("")
        hit = [i for i, q in enumerate(train_q) if q in eval_q]
        matches[name] = len(hit)
        rows.update(hit)
        for i in hit[: max(0, max_examples - len(examples))]:
            examples.append({"row": i, "eval_set": name, "question": train_q[i][:200]})
    report = Decontamination(train_uri=train_uri, train_rows=train.num_rows, matches=matches,
                             rows=sorted(rows), examples=examples)
    if drop_to is not None:
        mask = pa.array([i not in rows for i in range(train.num_rows)])
        storage.write_parquet(drop_to, pc.filter(train, mask) if rows else train)
        report.output_uri = drop_to
    return report
