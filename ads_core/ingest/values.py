"""Cell values -> checked text: questions, solutions (a list is joined with blank lines), final answers
(a one-element list is its element, several become the reward's JSON-list encoding), multiple-choice options.

Final answers lose a whole-string math wrapper (`$2$`, `$$x$$`, `\\(x\\)`, `\\[x\\]`, `\\boxed{x}`), so the
ground truth is the bare expression that math-verify parses (the reward wraps it itself). A list of
several answers becomes `ads_core.common.answers.encode_alternatives(...)`: a JSON list of strings, e.g.
`'["2", "-3"]'`, which the reward accepts when the response matches any of them (or all together).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ads_core.common.answers import encode_alternatives, is_missing_answer, strip_math_delimiters
from ads_core.common.text import has_surrogates, last_boxed
from ads_core.ingest.readers import loads_limited

_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Ja-j])\s*[).:]\s*(.*)$", re.DOTALL)
_INLINE_OPTIONS = re.compile(r"(?:^|\s)\(?([A-J])\s*[).:]\s*")
_ANSWER_LETTER = re.compile(r"^\(?([A-Ja-j])\)?(?:[.):]|\s|$)")


class Reject(Exception):  # noqa: N818 - a row-level outcome, not an error of the stage
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def scalar_to_text(value: int | float) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Reject("bad_type", f"answer is {value}")
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


def check_text(value: Any, column: str, what: str, limit: int, reason_if_missing: str) -> str:
    if value is None:
        raise Reject(reason_if_missing, f"{what} column {column!r} is null")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Reject("bad_type", f"{what} column {column!r} holds a {type(value).__name__}, expected text")
    text = value if isinstance(value, str) else scalar_to_text(value)
    if has_surrogates(text):
        raise Reject("bad_encoding", f"{what} column {column!r} is not valid UTF-8")
    text = text.strip()
    if not text:
        raise Reject(reason_if_missing, f"{what} column {column!r} is empty")
    if len(text) > limit:
        raise Reject("too_long", f"{what} column {column!r} has {len(text)} characters (limit {limit})")
    return text


def _flat_list(value: list[Any], column: str, what: str) -> list[Any]:
    items = [v for v in value if v is not None and not (isinstance(v, str) and not v.strip())]
    if any(isinstance(v, (list, dict)) for v in items):
        raise Reject("bad_type", f"{what} column {column!r} holds a nested list, expected text or a list of text")
    return items


def solution_text(value: Any, column: str, limit: int) -> str | None:
    """A solution, or None when the cell is empty; a list of steps or solutions is joined with blank lines."""
    if isinstance(value, list):
        items = _flat_list(value, column, "solution")
        if not items:
            return None
        value = "\n\n".join(check_text(v, column, "solution", limit, "missing_answer") for v in items)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_text(value, column, "solution", limit, "missing_answer")


def bare_answer(text: str) -> str:
    """`$x$`, `\\(x\\)` or a whole-string `\\boxed{x}` -> `x`."""
    text = strip_math_delimiters(text)
    if text.startswith(("\\boxed", "\\fbox")):
        inner = last_boxed(text)
        if inner is not None and text.rstrip().endswith("}") and text.count("\\boxed") + text.count("\\fbox") == 1:
            text = inner
    return text.strip()


def answer_text(value: Any, column: str, limit: int) -> str:
    """The ground truth of a cell: a scalar, or a list (one element -> itself, several -> a JSON list)."""
    if isinstance(value, list):
        items = _flat_list(value, column, "answer")
        if not items:
            raise Reject("missing_answer", f"answer column {column!r} is an empty list")
        answers = list(
            dict.fromkeys(bare_answer(check_text(v, column, "answer", limit, "missing_answer")) for v in items)
        )
        answers = [a for a in answers if not is_missing_answer(a)]
        if not answers:
            raise Reject("missing_answer", f"answer column {column!r} holds only empty or missing answers")
        text = encode_alternatives(answers)
    else:
        text = bare_answer(check_text(value, column, "answer", limit, "missing_answer"))
        if not text:
            raise Reject("missing_answer", f"answer column {column!r} is empty inside its math delimiters")
        if is_missing_answer(text):
            raise Reject("missing_answer", f"answer column {column!r} holds a missing value ({text!r}), not an answer")
    if len(text) > limit:
        raise Reject("too_long", f"answer column {column!r} has {len(text)} characters (limit {limit})")
    return text


def _cell(value: Any) -> str:
    return (
        ""
        if value is None
        else (
            value
            if isinstance(value, str)
            else scalar_to_text(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else str(value)
        )
    )


def _from_list(items: list[Any]) -> tuple[list[str], list[str]]:
    texts = [_cell(o).strip() for o in items]
    parsed = [_OPTION_PREFIX.match(t) for t in texts]
    letters = [m.group(1).upper() for m in parsed if m]
    if len(letters) == len(texts) and len(set(letters)) == len(letters):  # "A)5", "(B) 12", "C. 7"
        return letters, [m.group(2).strip() for m in parsed if m]
    return [chr(ord("A") + i) for i in range(len(texts))], texts


def parse_options(options: Any, column: str) -> tuple[list[str], list[str]]:
    """(letters, texts) of a cell: a list, a dict, HF's {label, text}, JSON text, or "A) 1 B) 2" text."""
    if isinstance(options, str):
        text = options.strip()
        if text.startswith(("[", "{")):
            try:
                options = loads_limited(text)
            except ValueError as exc:
                raise Reject("bad_json", f"options column {column!r}: {exc}") from None
        else:
            starts = list(_INLINE_OPTIONS.finditer(text))
            if len(starts) < 2:
                raise Reject(
                    "bad_type", f"options column {column!r} is text that is not a JSON list or lettered options"
                )
            bounds = [m.start() for m in starts[1:]] + [len(text)]
            return (
                [m.group(1) for m in starts],
                [text[m.end() : end].strip() for m, end in zip(starts, bounds, strict=True)],
            )
    if isinstance(options, dict):
        labels, texts = options.get("label"), options.get("text")
        if isinstance(labels, list) and isinstance(texts, list) and len(labels) == len(texts) and texts:
            return [_cell(x).strip() for x in labels], [_cell(x).strip() for x in texts]
        if options:
            return [str(k) for k in options], [_cell(v).strip() for v in options.values()]
    elif isinstance(options, list) and options:
        return _from_list(options)
    raise Reject("bad_type", f"options column {column!r} holds a {type(options).__name__}, expected a list")


def options_text(letters: list[str], texts: list[str]) -> str:
    return "\n".join(f"{letter}. {text}" for letter, text in zip(letters, texts, strict=True))


def mcq_answer(raw: Any, column: str, letters: list[str], texts: list[str], limit: int) -> str:
    """The answer letter: from an index, a letter (`b`, `(B)`, `B) 12`), or the text of an option."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 0 <= raw < len(letters):
            raise Reject("bad_type", f"answer index {raw} is outside the {len(letters)} options")
        return letters[raw]
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    answer = check_text(raw, column, "answer", limit, "missing_answer")
    upper = {letter.upper(): letter for letter in letters}
    m = _ANSWER_LETTER.match(answer)
    if m and m.group(1).upper() in upper:
        return upper[m.group(1).upper()]
    if answer.isdigit() and int(answer) < len(letters):
        return letters[int(answer)]
    by_text = {bare_answer(t).casefold(): letter for letter, t in zip(letters, texts, strict=True)}
    return by_text.get(bare_answer(answer).casefold(), bare_answer(answer))
