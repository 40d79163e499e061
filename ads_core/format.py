"""Format stage: any math dataset → verl's GRPO schema, with rejects that account for every row.

Layouts detected (column names in any capitalisation):
- `qa`:        problem/question + optional solution + answer (MATH, AIME, AMC)
- `marker`:    question + answer whose tail is `#### result` (GSM8K)
- `boxed`:     question + solution holding `\\boxed{...}`, no answer column
- `mcq`:       question + options list/dict + letter or index answer
- `body_question`: word problem split into a body and a question field
- `chat`:      a list of {role, content} messages (last user turn = question)
- `verl`:      rows already in verl schema (prompt messages + reward_model), passed through

Output: `OUT/formatted/train.parquet`, `OUT/formatted/rejects.parquet`, `OUT/formatted/manifest.json`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ads_core import manifest as mf
from ads_core.config import FormatConfig
from ads_core import readers, storage
from ads_core.readers import InputError, RawRow

log = logging.getLogger("ads.format")

STAGE = "format"

TEMPLATES: dict[str, str] = {
    # The ADS reference's wording: the instruction line, the question, and an opened think tag.
    "ads_think": "Please reason step by step, and put your final answer within \\boxed{}.\n\n{question}\n\n<think>",
    "boxed": "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}.",
    "plain": "{question}",
}

QUESTION_COLUMNS = ("problem", "question", "query", "prompt", "input", "instruction")
SOLUTION_COLUMNS = ("solution", "reasoning", "rationale", "cot", "target", "response", "output",
                    "explanation", "generation", "completion")
ANSWER_COLUMNS = ("answer", "final_answer", "ground_truth", "gt", "label", "correct_answer", "answer_key")
OPTIONS_COLUMNS = ("options", "choices", "answer_choices", "option")
BODY_COLUMNS = ("body", "context", "passage")
MESSAGES_COLUMNS = ("messages", "conversations", "conversation", "chat", "prompt")
ID_COLUMNS = ("unique_id", "id", "uid", "idx", "problem_id")
DATA_SOURCE_COLUMN = "data_source"
MARKER = "####"

REJECT_REASONS = ("missing_question", "missing_answer", "duplicate", "too_long", "bad_type",
                  "bad_encoding", "bad_json", "bad_row")

PROMPT_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
EXTRA_INFO_TYPE = pa.struct([
    ("index", pa.int64()),
    ("sample_id", pa.int64()),
    ("question", pa.string()),
    ("solution", pa.string()),
    ("answer", pa.string()),
    ("split", pa.string()),
    ("source_file", pa.string()),
    ("source_row", pa.int64()),
    ("source_id", pa.string()),
    ("source_meta", pa.string()),
])
OUTPUT_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", PROMPT_TYPE),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", EXTRA_INFO_TYPE),
    ("sample_id", pa.int64()),
])
REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()),
    ("source_row", pa.int64()),
    ("reason", pa.string()),
    ("message", pa.string()),
    ("raw", pa.string()),
])


@dataclass
class Layout:
    kind: str
    question: str | None = None
    solution: str | None = None
    answer: str | None = None
    options: str | None = None
    body: str | None = None
    messages: str | None = None
    id_column: str | None = None
    data_source: str | None = None
    used: set[str] = field(default_factory=set)

    def describe(self) -> dict[str, Any]:
        return {"layout": self.kind, "question": self.question, "solution": self.solution,
                "answer": self.answer, "options": self.options, "body": self.body, "messages": self.messages}


class Reject(Exception):  # noqa: N818 - a row-level outcome, not an error of the stage
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# ---------------------------------------------------------------------------------------------
# text helpers

_WS = re.compile(r"\s+")
_CALC = re.compile(r"<<[^<>]*>>")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_THINK_TAIL = re.compile(r"\s*<think>\s*$", re.IGNORECASE)
_INSTRUCTION_HINTS = ("reason step by step", "final answer", "\\boxed{}", "boxed{}", "math problem")


def dataset_name(source: str) -> str:
    """Run name from a source, as the reference derives it: last path part, suffix dropped, sanitised."""
    last = source.rstrip("/").split("/")[-1]
    for suffix in readers.SUPPORTED_SUFFIXES:
        if last.lower().endswith(suffix):
            last = last[: -len(suffix)]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", last).strip("_")
    return name or "dataset"


def normalize_question(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def sample_id_of(question: str) -> int:
    """Stable non-negative int64 from the normalised question: survives refreshes and reorderings."""
    digest = hashlib.blake2b(normalize_question(question).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} or \\fbox{...}, brace-balanced; None if absent or unbalanced."""
    best = None
    for token in ("\\boxed", "\\fbox"):
        idx = text.rfind(token)
        if idx >= 0 and (best is None or idx > best[0]):
            best = (idx, token)
    if best is None:
        return None
    i = best[0] + len(best[1])
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth, start = 0, i
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : j].strip()
    return None


def _check_text(value: Any, column: str, what: str, limit: int, reason_if_missing: str) -> str:
    if value is None:
        raise Reject(reason_if_missing, f"{what} column {column!r} is null")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Reject("bad_type", f"{what} column {column!r} holds a {type(value).__name__}, expected text")
    text = value if isinstance(value, str) else _scalar_to_text(value)
    if _has_surrogates(text):
        raise Reject("bad_encoding", f"{what} column {column!r} is not valid UTF-8")
    text = text.strip()
    if not text:
        raise Reject(reason_if_missing, f"{what} column {column!r} is empty")
    if len(text) > limit:
        raise Reject("too_long", f"{what} column {column!r} has {len(text)} characters (limit {limit})")
    return text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _scalar_to_text(value: int | float) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Reject("bad_type", f"answer is {value}")
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "\n".join(str(p.get("text") or p.get("content") or "") if isinstance(p, dict) else str(p)
                         for p in content)
    return "" if content is None else str(content)


def clean_instruction(text: str) -> str:
    """Strip a templated instruction and trailing <think> from an already-prompted question."""
    original = text
    text = _THINK_TAIL.sub("", text).strip()
    parts = text.split("\n\n", 1)
    if len(parts) == 2 and parts[1].strip() and any(h in parts[0].lower() for h in _INSTRUCTION_HINTS):
        text = parts[1].strip()
    lowered = text.lower()
    for hint in _INSTRUCTION_HINTS:
        tail = text.rsplit("\n\n", 1)
        if len(tail) == 2 and hint in tail[1].lower() and tail[0].strip():
            text = tail[0].strip()
            lowered = text.lower()
            break
    for tag in ("question:", "problem:"):
        if lowered.startswith(tag):
            text = text[len(tag):].strip()
            break
    text = _THINK_TAIL.sub("", text).strip()
    return text or original.strip()


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and "role" in m and "content" in m for m in value)


# ---------------------------------------------------------------------------------------------
# detection


def _present(columns: dict[str, str], candidates: tuple[str, ...]) -> list[str]:
    return [columns[c] for c in candidates if c in columns]


def _pick(file: str, role: str, flag: str, names: list[str], rows: list[dict[str, Any]],
          all_columns: list[str]) -> str | None:
    """One column for a role; several candidates are fine when they agree on the sampled rows."""
    if len(names) <= 1:
        return names[0] if names else None
    first = names[0]
    for other in names[1:]:
        if any(_norm_cell(r.get(first)) != _norm_cell(r.get(other)) for r in rows):
            raise InputError(
                f"{file}: ambiguous {role} column: {', '.join(names)} all look like one and differ "
                f"(columns found: {', '.join(all_columns)}); choose with {flag} NAME"
            )
    return first


def _norm_cell(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def detect_layout(file: str, rows: list[dict[str, Any]], cfg: FormatConfig) -> Layout:
    """Decide which columns hold question, solution, answer from the names and a sample of rows."""
    all_columns: list[str] = []
    for r in rows:
        for k in r:
            if k not in all_columns:
                all_columns.append(k)
    columns = {c.lower().strip(): c for c in reversed(all_columns)}  # first spelling wins
    found = ", ".join(all_columns) or "(none)"

    def override(value: str | None, flag: str) -> str | None:
        if value is None:
            return None
        if value in all_columns:
            return value
        if value.lower() in columns:
            return columns[value.lower()]
        raise InputError(f"{file}: {flag} {value!r} is not a column (columns found: {found})")

    q_over = override(cfg.question_col, "--question-col")
    s_over = override(cfg.solution_col, "--solution-col")
    a_over = override(cfg.answer_col, "--answer-col")
    o_over = override(cfg.options_col, "--options-col")
    id_col = next(iter(_present(columns, ID_COLUMNS)), None)
    ds_col = columns.get(DATA_SOURCE_COLUMN)

    def sample(col: str) -> list[Any]:
        return [r.get(col) for r in rows if r.get(col) is not None]

    # Already in verl schema: prompt messages plus reward_model.ground_truth.
    prompt_col, rm_col = columns.get("prompt"), columns.get("reward_model")
    if prompt_col and rm_col and not q_over and any(_is_messages(v) for v in sample(prompt_col)) and any(
            isinstance(v, dict) and "ground_truth" in v for v in sample(rm_col)):
        sol = s_over or next(iter(_present(columns, ("target", "solution"))), None)
        return Layout("verl", messages=prompt_col, solution=sol, answer=rm_col, id_column=id_col,
                      data_source=ds_col)

    # Chat messages.
    if not q_over:
        for name in _present(columns, MESSAGES_COLUMNS):
            values = sample(name)
            if values and sum(_is_messages(v) for v in values) >= max(1, len(values) // 2):
                answer = a_over or _pick(file, "answer", "--answer-col", _present(columns, ANSWER_COLUMNS),
                                         rows, all_columns)
                return Layout("chat", messages=name, answer=answer, solution=s_over, id_column=id_col,
                              data_source=ds_col)

    question_candidates = [c for c in _present(columns, QUESTION_COLUMNS)
                           if any(isinstance(v, str) for v in sample(c)) or not sample(c)]
    question = q_over or _pick(file, "question", "--question-col", question_candidates, rows, all_columns)
    if question is None:
        raise InputError(f"{file}: no question column (columns found: {found}); "
                         "name it with --question-col NAME")
    body = next((c for c in _present(columns, BODY_COLUMNS) if c != question), None)
    options = o_over or next(iter(_present(columns, OPTIONS_COLUMNS)), None)

    solution_candidates = [c for c in _present(columns, SOLUTION_COLUMNS) if c != question]
    answer_candidates = [c for c in _present(columns, ANSWER_COLUMNS) if c not in (question, s_over)]
    answer = a_over or _pick(file, "answer", "--answer-col", answer_candidates, rows, all_columns)
    solution = s_over or _pick(file, "solution", "--solution-col",
                               [c for c in solution_candidates if c != answer], rows, all_columns)

    if answer is not None and not a_over and solution is None:
        values = [v for v in sample(answer) if isinstance(v, str)]
        if values and sum(MARKER in v for v in values) >= max(1, len(values) // 2):
            return Layout("marker", question=question, answer=answer, body=body, id_column=id_col,
                          data_source=ds_col)
    if options is not None:
        if answer is None:
            raise InputError(f"{file}: multiple-choice options in {options!r} but no answer column "
                             f"(columns found: {found}); name it with --answer-col NAME")
        return Layout("mcq", question=question, options=options, answer=answer, solution=solution,
                      body=body, id_column=id_col, data_source=ds_col)
    if answer is None and solution is None:
        raise InputError(f"{file}: no answer or solution column (columns found: {found}); "
                         "name one with --answer-col NAME or --solution-col NAME")
    kind = "body_question" if body else ("qa" if answer is not None else "boxed")
    return Layout(kind, question=question, solution=solution, answer=answer, body=body, id_column=id_col,
                  data_source=ds_col)


# ---------------------------------------------------------------------------------------------
# row conversion


@dataclass
class Converted:
    question: str
    solution: str | None
    answer: str
    prompt: list[dict[str, str]] | None  # set only when passing a verl row through


def _answer_text(value: Any, column: str, cfg: FormatConfig) -> str:
    return _check_text(value, column, "answer", cfg.max_answer_chars, "missing_answer")


def _options_text(options: Any, column: str) -> tuple[str, list[str]]:
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except json.JSONDecodeError:
            raise Reject("bad_type", f"options column {column!r} is text that is not a JSON list") from None
    if isinstance(options, dict):
        letters, texts = [str(k) for k in options], [str(v) for v in options.values()]
    elif isinstance(options, list) and options:
        letters = [chr(ord("A") + i) for i in range(len(options))]
        texts = [str(o) for o in options]
    else:
        raise Reject("bad_type", f"options column {column!r} holds a {type(options).__name__}, expected a list")
    return "\n".join(f"{letter}. {text}" for letter, text in zip(letters, texts, strict=True)), letters


def convert_row(row: dict[str, Any], layout: Layout, cfg: FormatConfig) -> Converted:
    if layout.kind == "verl":
        return _convert_verl(row, layout, cfg)
    if layout.kind == "chat":
        return _convert_chat(row, layout, cfg)
    assert layout.question is not None
    value = row.get(layout.question)
    if value is not None and not isinstance(value, str):
        raise Reject("bad_type", f"question column {layout.question!r} holds a {type(value).__name__}, expected text")
    question = _check_text(value, layout.question, "question", cfg.max_question_chars, "missing_question")
    if layout.body:
        body_value = row.get(layout.body)
        if body_value is not None and str(body_value).strip():
            body = _check_text(body_value, layout.body, "body", cfg.max_question_chars, "missing_question")
            question = f"{body} {question}"
    solution = None
    if layout.solution and row.get(layout.solution) is not None and str(row.get(layout.solution)).strip():
        solution = _check_text(row.get(layout.solution), layout.solution, "solution",
                               cfg.max_solution_chars, "missing_answer")
    if layout.kind == "marker":
        assert layout.answer is not None
        text = _check_text(row.get(layout.answer), layout.answer, "answer", cfg.max_solution_chars,
                           "missing_answer")
        if MARKER not in text:
            raise Reject("missing_answer", f"answer column {layout.answer!r} has no '{MARKER}' final-answer marker")
        body_text, _, final = text.rpartition(MARKER)
        answer = _THOUSANDS.sub("", final.strip())
        if not answer:
            raise Reject("missing_answer", f"nothing after '{MARKER}' in answer column {layout.answer!r}")
        if len(answer) > cfg.max_answer_chars:
            raise Reject("too_long", f"final answer has {len(answer)} characters (limit {cfg.max_answer_chars})")
        return Converted(question, _CALC.sub("", body_text).strip() or None, answer, None)
    if layout.kind == "mcq":
        assert layout.options is not None and layout.answer is not None
        options_text, letters = _options_text(row.get(layout.options), layout.options)
        raw_answer = row.get(layout.answer)
        if isinstance(raw_answer, int) and not isinstance(raw_answer, bool):
            if not 0 <= raw_answer < len(letters):
                raise Reject("bad_type", f"answer index {raw_answer} is outside the {len(letters)} options")
            answer = letters[raw_answer]
        else:
            answer = _answer_text(raw_answer, layout.answer, cfg).rstrip(".)").lstrip("(")
            if answer.upper() in letters:
                answer = answer.upper()
            elif answer.isdigit() and int(answer) < len(letters):
                answer = letters[int(answer)]
        return Converted(f"{question}\n\n{options_text}", solution, answer, None)
    if layout.answer is not None:
        answer = _answer_text(row.get(layout.answer), layout.answer, cfg)
    else:  # boxed: the final answer lives in the solution
        if solution is None:
            raise Reject("missing_answer", f"solution column {layout.solution!r} is empty")
        boxed = last_boxed(solution)
        if not boxed:
            raise Reject("missing_answer", f"no \\boxed{{...}} final answer in solution column {layout.solution!r}")
        answer = boxed
    return Converted(question, solution, answer, None)


def _convert_chat(row: dict[str, Any], layout: Layout, cfg: FormatConfig) -> Converted:
    assert layout.messages is not None
    messages = row.get(layout.messages)
    if messages is None:
        raise Reject("missing_question", f"messages column {layout.messages!r} is null")
    if not _is_messages(messages):
        raise Reject("bad_type", f"messages column {layout.messages!r} is not a list of {{role, content}}")
    users = [i for i, m in enumerate(messages) if "user" in str(m["role"]).lower()
             or "human" in str(m["role"]).lower()]
    if not users:
        raise Reject("missing_question", f"messages column {layout.messages!r} has no user message")
    last_user = users[-1]
    question = _check_text(clean_instruction(_message_text(messages[last_user]["content"])), layout.messages,
                           "question", cfg.max_question_chars, "missing_question")
    replies = [_message_text(m["content"]) for m in messages[last_user + 1:]
               if str(m["role"]).lower() in ("assistant", "gpt", "model", "bot")]
    solution = None
    if layout.solution and row.get(layout.solution) is not None:
        solution = _check_text(row.get(layout.solution), layout.solution, "solution", cfg.max_solution_chars,
                               "missing_answer")
    elif replies and replies[0].strip():
        solution = _check_text(replies[0], layout.messages, "solution", cfg.max_solution_chars, "missing_answer")
    if layout.answer:
        answer = _answer_text(row.get(layout.answer), layout.answer, cfg)
    else:
        boxed = last_boxed(solution or "")
        if not boxed:
            raise Reject("missing_answer", "no answer column and no \\boxed{...} in the assistant reply")
        answer = boxed
    return Converted(question, solution, answer, None)


def _convert_verl(row: dict[str, Any], layout: Layout, cfg: FormatConfig) -> Converted:
    assert layout.messages is not None and layout.answer is not None
    messages = row.get(layout.messages)
    if not _is_messages(messages):
        raise Reject("bad_type", f"prompt column {layout.messages!r} is not a list of {{role, content}}")
    prompt = [{"role": str(m["role"]), "content": _message_text(m["content"])} for m in messages]
    users = [m["content"] for m in prompt if m["role"] == "user"] or [prompt[-1]["content"]]
    question = _check_text(clean_instruction(users[-1]), layout.messages, "question", cfg.max_question_chars,
                           "missing_question")
    if any(_has_surrogates(m["content"]) for m in prompt):
        raise Reject("bad_encoding", f"prompt column {layout.messages!r} is not valid UTF-8")
    rm = row.get(layout.answer)
    if not isinstance(rm, dict):
        raise Reject("bad_type", f"reward_model column {layout.answer!r} is not a struct with ground_truth")
    answer = _answer_text(rm.get("ground_truth"), f"{layout.answer}.ground_truth", cfg)
    solution = None
    if layout.solution:
        value = row.get(layout.solution)
        if isinstance(value, list):
            value = "\n".join(_message_text(v.get("content") if isinstance(v, dict) else v) for v in value)
        elif isinstance(value, dict):
            value = _message_text(value.get("content"))
        if value is not None and str(value).strip():
            solution = _check_text(value, layout.solution, "solution", cfg.max_solution_chars, "missing_answer")
    extra = row.get("extra_info")
    if solution is None and isinstance(extra, dict) and isinstance(extra.get("solution"), str) \
            and extra["solution"].strip():  # our own output keeps the solution here; keep it on a rerun
        solution = _check_text(extra["solution"], "extra_info.solution", "solution", cfg.max_solution_chars,
                               "missing_answer")
    return Converted(question, solution, answer, prompt)


# ---------------------------------------------------------------------------------------------
# the stage


@dataclass
class FormatSummary:
    rows_in: int = 0
    rows_out: int = 0
    rejects: Counter[str] = field(default_factory=Counter)

    @property
    def rows_rejected(self) -> int:
        return sum(self.rejects.values())


def _source_meta(row: dict[str, Any], layout: Layout) -> str | None:
    skip = {layout.question, layout.solution, layout.answer, layout.options, layout.body, layout.messages,
            layout.data_source, "extra_info", "reward_model", "prompt"}
    meta = {k: v for k, v in row.items() if k not in skip and isinstance(v, (str, int, float, bool))
            and not (isinstance(v, str) and len(v) > 500)}
    return readers.safe_text(json.dumps(meta, ensure_ascii=False, sort_keys=True)) if meta else None


def _iter_batches(source: str, cfg: FormatConfig) -> Iterator[list[RawRow]]:
    try:
        files = readers.list_source_files(source)
    except FileNotFoundError:
        if readers.looks_like_hub_id(source):
            yield from readers.iter_hub_batches(source, cfg.split, cfg.batch_rows)
            return
        raise InputError(f"{source}: no such file or directory") from None
    for file in files:
        yield from readers.iter_file_batches(file, cfg.batch_rows)


def format_dataset(
    source: str,
    out_uri: str,
    cfg: FormatConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> mf.Manifest:
    """Format SOURCE into `out_uri/formatted/`; returns the stage manifest.

    Raises InputError for unusable input; row-level problems become rejects with reasons.
    """
    cfg = cfg or FormatConfig()
    template = cfg.template_string()
    name = cfg.name or dataset_name(source)
    stage_dir = storage.join(out_uri, "formatted")
    train_uri = storage.join(stage_dir, "train.parquet")
    rejects_uri = storage.join(stage_dir, "rejects.parquet")
    source_is_local = storage.exists(source)  # a missing path is reported by the reader as an error: line
    source_hash = storage.tree_hash(source, readers.SUPPORTED_SUFFIXES) if source_is_local else None

    summary = FormatSummary()
    layouts: dict[str, Layout] = {}
    seen: dict[int, tuple[str, int]] = {}

    with storage.atomic_local_file(train_uri, ".parquet") as train_tmp, \
            storage.atomic_local_file(rejects_uri, ".parquet") as rejects_tmp:
        train_writer = pq.ParquetWriter(train_tmp, OUTPUT_SCHEMA, compression="zstd")
        rejects_writer = pq.ParquetWriter(rejects_tmp, REJECTS_SCHEMA, compression="zstd")
        try:
            for batch in _iter_batches(source, cfg):
                out_rows: list[dict[str, Any]] = []
                rejects: list[dict[str, Any]] = []

                def reject(raw: RawRow, reason: str, message: str, preview: str | None,
                           rejects: list[dict[str, Any]] = rejects) -> None:
                    summary.rejects[reason] += 1
                    rejects.append({"source_file": raw.source_file, "source_row": raw.source_row,
                                    "reason": reason, "message": message, "raw": preview})

                for raw in batch:
                    summary.rows_in += 1
                    if raw.data is None:
                        reject(raw, raw.reject_reason or "bad_row", raw.reject_message or "unreadable row", raw.raw)
                        continue
                    layout = layouts.get(raw.source_file)
                    if layout is None:
                        sample = [r.data for r in batch if r.data is not None and r.source_file == raw.source_file]
                        layout = layouts[raw.source_file] = detect_layout(raw.source_file, sample[:200], cfg)
                        log.info("%s: detected layout %s", raw.source_file, layout.describe())
                    try:
                        conv = convert_row(raw.data, layout, cfg)
                    except Reject as rej:
                        reject(raw, rej.reason, f"row {raw.source_row}: {rej.message}", _row_preview(raw.data))
                        continue
                    sid = sample_id_of(conv.question)
                    if sid in seen:
                        first_file, first_row = seen[sid]
                        reject(raw, "duplicate", f"row {raw.source_row}: same question as row {first_row} "
                                                 f"of {first_file}", _row_preview(raw.data))
                        continue
                    seen[sid] = (raw.source_file, raw.source_row)
                    ds_value = raw.data.get(layout.data_source) if layout.data_source else None
                    data_source = (readers.safe_text(ds_value) if isinstance(ds_value, str) and ds_value.strip()
                                   else name)
                    source_id = raw.data.get(layout.id_column) if layout.id_column else None
                    prompt = conv.prompt or [{"role": "user", "content": template.replace("{question}",
                                                                                        conv.question)}]
                    out_rows.append({
                        "data_source": data_source,
                        "prompt": prompt,
                        "ability": "math",
                        "reward_model": {"style": "rule", "ground_truth": conv.answer},
                        "extra_info": {
                            "index": summary.rows_out, "sample_id": sid, "question": conv.question,
                            "solution": conv.solution, "answer": conv.answer, "split": cfg.split,
                            "source_file": raw.source_file, "source_row": raw.source_row,
                            "source_id": None if source_id is None else readers.safe_text(str(source_id)),
                            "source_meta": _source_meta(raw.data, layout),
                        },
                        "sample_id": sid,
                    })
                    summary.rows_out += 1
                if out_rows:
                    train_writer.write_table(pa.Table.from_pylist(out_rows, schema=OUTPUT_SCHEMA))
                if rejects:
                    rejects_writer.write_table(pa.Table.from_pylist(rejects, schema=REJECTS_SCHEMA))
                if progress:
                    progress(len(batch))
        finally:
            train_writer.close()
            rejects_writer.close()
        if summary.rows_in == 0:
            raise InputError(f"{source}: no rows (the file is empty)")

    assert summary.rows_in == summary.rows_out + summary.rows_rejected
    manifest = mf.Manifest(
        stage=STAGE,
        inputs={"source": {"uri": source, "sha256": source_hash}},
        outputs={"train": mf.output_entry(train_uri, summary.rows_out),
                 "rejects": mf.output_entry(rejects_uri, summary.rows_rejected)},
        config={**mf.config_dict(cfg), "name": name, "template_string": template},
        code_version=mf.code_version(sys.modules[__name__], readers),
        counts={"rows_in": summary.rows_in, "rows_out": summary.rows_out,
                "rows_rejected": summary.rows_rejected,
                "rejects_by_reason": dict(sorted(summary.rejects.items()))},
        extra={"detected": {file: layout.describe() for file, layout in layouts.items()}, "name": name},
    )
    mf.write(stage_dir, manifest)
    return manifest


def _row_preview(row: dict[str, Any]) -> str:
    text = readers.safe_text(json.dumps(row, ensure_ascii=False, default=str))
    return text if len(text) <= 500 else text[:500] + "…"


def read_formatted(out_uri: str) -> pa.Table:
    return storage.read_parquet(storage.join(out_uri, "formatted", "train.parquet"))
