"""Eval sets as problems: a packaged set by name (math500, aime24, amc23) or a file, each row a ``Problem``.

A name, or a raw file (JSONL, CSV, a question/answer Parquet...), is formatted by the format stage with the
configured prompt template (``ads_core.evals.sets``: the same detection, template and ``sample_id`` as the
training data); a formatted Parquet (``OUT/eval/<name>.parquet``, or a training artifact) is read as it is, its
``prompt`` messages kept. The problem id is the row's ``sample_id`` (a hash of the question), so it names the
same problem whatever the file's order or ``--limit``. A row without a ground truth is refused.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ads_core import storage
from ads_core.common.answers import is_missing_answer
from ads_core.common.errors import InputError
from ads_core.evals import sets as ev
from ads_core.evaluation.backends import Problem
from ads_core.stages.eval_sets import write_eval_sets
from ads_core.stages.format.schema import TEMPLATES

FORMATTED_COLUMNS = ("prompt", "reward_model")


def set_name(spec: str) -> str:
    """The name a set is reported under: a packaged name as it is, a file by its stem (``math500.parquet``)."""
    if spec in ev.EVAL_SETS and not os.path.exists(spec):
        return spec
    name = Path(spec.rstrip("/")).name
    for suffix in (".parquet", ".jsonl", ".json", ".csv", ".gz"):
        name = name.removesuffix(suffix)
    return name.lower() or spec


def resolve_sets(specs: Sequence[str]) -> dict[str, str]:
    """NAME|PATH specs -> {name: source}; an unknown name or a missing file is an InputError naming it."""
    out: dict[str, str] = {}
    for spec in specs:
        if spec in ev.EVAL_SETS and not os.path.exists(spec):
            source = ev.resolve_sources(names=[spec])[spec]
        elif storage.exists(spec):
            source = spec
        else:
            raise InputError(f"eval set {spec!r}: not a packaged set ({', '.join(ev.EVAL_SETS)}) and no such file")
        name = set_name(spec)
        if name in out:
            raise InputError(f"eval set {spec!r}: the name {name!r} is given twice")
        out[name] = source
    return out


def template_text(template: str) -> str:
    """A named template (ads_think, boxed, plain) or the text itself (it must hold {question})."""
    if template in TEMPLATES:
        return TEMPLATES[template]
    if "{question}" not in template:
        raise InputError(f"template {template!r} is neither {', '.join(TEMPLATES)} nor a text with {{question}}")
    return template


def load_problems(
    sets: Mapping[str, str], template: str = "ads_think", limit: int | None = None
) -> dict[str, list[Problem]]:
    """{name: problems} for {name: source}, each set cut to its first LIMIT rows."""
    return {name: _load(name, source, template, limit) for name, source in sets.items()}


def _load(name: str, source: str, template: str, limit: int | None) -> list[Problem]:
    if source in ev.EVAL_SETS and not storage.exists(source):
        source = ev.resolve_sources(names=[source])[source]
    if not storage.exists(source):
        raise InputError(f"eval set {name!r}: {source} does not exist")
    uri = source if _is_formatted(source) else _formatted_copy(name, source, template_text(template), _stamp(source))
    return list(_read(name, uri, _stamp(uri))[:limit] if limit is not None else _read(name, uri, _stamp(uri)))


def _stamp(uri: str) -> tuple[int, int] | None:
    """(size, mtime) of a local file, so the caches below see a changed file."""
    if not storage.is_local(uri):
        return None
    st = os.stat(storage.local_path(uri))
    return (st.st_size, st.st_mtime_ns)


def _is_formatted(uri: str) -> bool:
    if not uri.endswith(".parquet"):
        return False
    import pyarrow.parquet as pq

    fs, path = storage.get_fs(uri)
    with fs.open(path, "rb") as fh:
        names = pq.ParquetFile(fh).schema_arrow.names
    return all(col in names for col in FORMATTED_COLUMNS)


_CACHE_DIR = tempfile.TemporaryDirectory(prefix="ads-eval-sets-")


@functools.lru_cache(maxsize=32)
def _formatted_copy(name: str, source: str, template: str, stamp: tuple[int, int] | None) -> str:
    """Format a raw set once per process (validation evaluates the same sets again and again)."""
    out = os.path.join(_CACHE_DIR.name, uuid.uuid4().hex)
    return write_eval_sets(out, sources={name: source}, template=template)[name].uri


@functools.lru_cache(maxsize=32)
def _read(name: str, uri: str, stamp: tuple[int, int] | None) -> tuple[Problem, ...]:
    table = storage.read_parquet(uri)
    names = table.column_names
    prompts = table.column("prompt").to_pylist()
    truths = [(rm or {}).get("ground_truth") for rm in table.column("reward_model").to_pylist()]
    ids = table.column("sample_id").to_pylist() if "sample_id" in names else list(range(table.num_rows))
    problems = []
    for row, (prompt, truth, pid) in enumerate(zip(prompts, truths, ids, strict=True)):
        if is_missing_answer(truth):
            missing = f"no ground truth (reward_model.ground_truth {truth!r})"
            raise InputError(f"{uri}: row {row} has {missing}; fix or drop it")
        if not prompt:
            raise InputError(f"{uri}: row {row} has no prompt messages")
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
        problems.append(
            Problem(
                set=name, problem_id=int(pid if pid is not None else row), messages=messages, ground_truth=str(truth)
            )
        )
    seen: set[int] = set()
    for row, p in enumerate(problems):
        if p.problem_id in seen:
            raise InputError(f"{uri}: row {row} repeats sample_id {p.problem_id}; eval problems must be unique")
        seen.add(p.problem_id)
    return tuple(problems)
