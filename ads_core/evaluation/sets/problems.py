"""Eval sets as problems: a named set (math500, aime24, aime25, amc23, minerva, ...), a file, or ``paper``.

A name, or a raw file (JSONL, CSV, a question/answer Parquet...), is formatted by the format conversion (the same
detection, template and ``sample_id`` as the training data: ``ads_core.evaluation.sets.writer``); a formatted
Parquet (``OUT/eval/<name>.parquet``, or a training artifact) is read as it is. With a template given, every
single-message prompt is written again from its row's question with it, so a raw file and its formatted copy give
the same prompts; without one (validation during training) a formatted file keeps its prompts and a raw file gets
``ads_think``. A multiple-choice file (``choice``) lists its options in the prompt. The problem id is the row's
``sample_id`` (a hash of the question), so it names the same problem whatever the file's order or ``--limit``.
A row without a ground truth is refused.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ads_core import storage
from ads_core.common.answers import encode_alternatives, ground_truth_problem, is_missing_answer
from ads_core.common.errors import InputError
from ads_core.evaluation.backends import Problem
from ads_core.evaluation.sets import catalog as ev
from ads_core.evaluation.sets import choice
from ads_core.evaluation.sets.templates import DEFAULT_TEMPLATE
from ads_core.evaluation.sets.writer import write_eval_sets
from ads_core.ingest.schema import TEMPLATES

FORMATTED_COLUMNS = ("prompt", "reward_model")


def set_name(spec: str) -> str:
    """The name a set is reported under: a named set as it is, ``NAME=PATH`` as NAME, a file by its stem."""
    if ev.is_named(spec) and not os.path.exists(spec):
        return spec
    if _assignment(spec):
        return spec.split("=", 1)[0]
    name = Path(spec.rstrip("/")).name
    for suffix in (".parquet", ".jsonl", ".json", ".csv", ".gz"):
        name = name.removesuffix(suffix)
    return name.lower() or spec


def _assignment(spec: str) -> bool:
    name = spec.split("=", 1)[0]
    return "=" in spec and bool(name) and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in name)


def expand(specs: Sequence[str], data_dir: str | None = None) -> tuple[list[str], list[str]]:
    """SPECS with ``paper`` replaced by the paper's sets that are available; and the missing ones (one line each,
    saying how to supply them)."""
    out: list[str] = []
    missing: list[str] = []
    explicit = {s.split("=", 1)[0] for s in specs if _assignment(s)}
    for spec in specs:
        if spec != ev.PAPER or os.path.exists(spec):
            out.append(spec)
            continue
        for name in ev.PAPER_SETS:
            if name in explicit or name in out:
                continue
            if ev.find_named(name, data_dir) is not None:
                out.append(name)
            else:
                missing.append(ev.how_to_supply(name))
    return out, missing


def resolve_sets(specs: Sequence[str], data_dir: str | None = None) -> dict[str, str]:
    """NAME|PATH|NAME=PATH specs -> {name: source}; an unknown name or a missing file is an InputError naming it."""
    out: dict[str, str] = {}
    for spec in specs:
        if ev.is_named(spec) and not os.path.exists(spec):
            source = ev.resolve_sources(names=[spec], data_dir=data_dir)[spec]
        elif _assignment(spec) and not os.path.exists(spec):
            source = spec.split("=", 1)[1]
            if not storage.exists(source):
                raise InputError(f"eval set {spec!r}: no such file {source}")
        elif storage.exists(spec):
            source = spec
        else:
            known = ", ".join([*ev.EVAL_SETS, *ev.EXTERNAL_SETS, ev.PAPER])
            raise InputError(f"eval set {spec!r}: not a named set ({known}), NAME=PATH, or a file")
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
    sets: Mapping[str, str], template: str | None = None, limit: int | None = None
) -> dict[str, list[Problem]]:
    """{name: problems} for {name: source}, each set cut to its first LIMIT rows; TEMPLATE as the module says."""
    return {name: _load(name, source, template, limit) for name, source in sets.items()}


def _load(name: str, source: str, template: str | None, limit: int | None) -> list[Problem]:
    if ev.is_named(source) and not storage.exists(source):
        source = ev.resolve_sources(names=[source])[source]
    if not storage.exists(source):
        raise InputError(f"eval set {name!r}: {source} does not exist")
    text = template_text(template) if template is not None else None
    formatted = _is_formatted(source)
    if not formatted and _is_choice(source):
        return choice.load_choice_problems(name, source, text or TEMPLATES[DEFAULT_TEMPLATE])[:limit]
    uri = source if formatted else _formatted_copy(name, source, text or TEMPLATES[DEFAULT_TEMPLATE], _stamp(source))
    problems = list(_read(name, uri, _stamp(uri))[:limit] if limit is not None else _read(name, uri, _stamp(uri)))
    return [_rendered(p, text) for p in problems] if text is not None else [p for p, _ in problems]


def _rendered(item: tuple[Problem, str | None], template: str) -> Problem:
    """The problem with its prompt written again from its question with TEMPLATE (a single-message prompt only)."""
    problem, question = item
    if question is None or len(problem.messages) != 1 or problem.messages[0]["role"] != "user":
        return problem
    messages = [{"role": "user", "content": template.replace("{question}", question)}]
    return Problem(problem.set, problem.problem_id, messages, problem.ground_truth)


def _is_choice(uri: str) -> bool:
    """A multiple-choice file in a published layout (``choice``): told from its first row's columns."""
    rows = choice.read_rows(uri) if not uri.endswith(".parquet") else None
    if rows is None:
        import pyarrow.parquet as pq

        fs, path = storage.get_fs(uri)
        with fs.open(path, "rb") as fh:
            return choice.is_choice_layout(pq.ParquetFile(fh).schema_arrow.names)
    return bool(rows) and choice.is_choice_layout(list(rows[0]))


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
    try:
        with fs.open(path, "rb") as fh:
            names = pq.ParquetFile(fh).schema_arrow.names
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{uri}: not a readable Parquet file ({str(exc)[:120]})") from None
    return all(col in names for col in FORMATTED_COLUMNS)


def _read_table(uri: str):  # type: ignore[no-untyped-def]
    try:
        return storage.read_parquet(uri)
    except (OSError, ValueError) as exc:
        raise InputError(f"{uri}: not a readable Parquet file ({str(exc)[:120]})") from None


_CACHE_DIR = tempfile.TemporaryDirectory(prefix="ads-eval-sets-")


@functools.lru_cache(maxsize=32)
def _formatted_copy(name: str, source: str, template: str, stamp: tuple[int, int] | None) -> str:
    """Format a raw set once per process (validation evaluates the same sets again and again)."""
    out = os.path.join(_CACHE_DIR.name, uuid.uuid4().hex)
    return write_eval_sets(out, sources={name: source}, template=template)[name].uri


@functools.lru_cache(maxsize=32)
def _read(name: str, uri: str, stamp: tuple[int, int] | None) -> tuple[tuple[Problem, str | None], ...]:
    """(problem, its question from extra_info) per row."""
    table = _read_table(uri)
    names = table.column_names
    prompts = table.column("prompt").to_pylist()
    truths = [(rm or {}).get("ground_truth") for rm in table.column("reward_model").to_pylist()]
    ids = table.column("sample_id").to_pylist() if "sample_id" in names else list(range(table.num_rows))
    extra = table.column("extra_info").to_pylist() if "extra_info" in names else [None] * table.num_rows
    questions = [(e or {}).get("question") if isinstance(e, dict) else None for e in extra]
    problems = []
    for row, (prompt, truth, pid) in enumerate(zip(prompts, truths, ids, strict=True)):
        problem = ground_truth_problem(truth)
        if problem is not None:
            raise InputError(f"{uri}: row {row}: {problem} (reward_model.ground_truth); fix or drop it")
        if hasattr(truth, "tolist") and not isinstance(truth, str):
            truth = truth.tolist()
        if isinstance(truth, list | tuple):
            truth = [t for t in truth if not is_missing_answer(t)]
            truth = encode_alternatives([str(t) for t in truth]) if truth else None  # not Python's repr of a list
        if is_missing_answer(truth):
            missing = f"no ground truth (reward_model.ground_truth {truth!r})"
            raise InputError(f"{uri}: row {row} has {missing}; fix or drop it")
        if not prompt:
            raise InputError(f"{uri}: row {row} has no prompt messages")
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
        pid = int(pid if pid is not None else row)
        problems.append((Problem(name, pid, messages, str(truth)), questions[row]))
    seen: set[int] = set()
    for row, (p, _) in enumerate(problems):
        if p.problem_id in seen:
            raise InputError(f"{uri}: row {row} repeats sample_id {p.problem_id}; eval problems must be unique")
        seen.add(p.problem_id)
    return tuple(problems)
