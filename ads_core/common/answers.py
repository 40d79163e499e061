"""How a ground truth is written down, shared by its writer (the format stage) and its reader (the reward).

One answer is a plain string. Several accepted answers (alternatives) are a JSON list of strings; a set answer
("find all solutions") is one comma-separated string, as MATH writes them. Math delimiters around an answer
(`$x$`, `$$x$$`, `\\(x\\)`, `\\[x\\]`) are not part of it. See `ads_core.train.reward` for how each is checked.
"""

from __future__ import annotations

import decimal
import json
import numbers
import re
from collections.abc import Sequence
from typing import Any

# How tables and exports spell a missing value (pandas, R, SQL, spreadsheets): never a ground truth.
MISSING_VALUE_TEXTS = frozenset({"nan", "none", "null", "n/a", "na", "nil", "<na>", "undefined", "missing", "#n/a"})
_DELIMITED = re.compile(r"^(?:\$\$(.*)\$\$|\$(.*)\$|\\\((.*)\\\)|\\\[(.*)\\\])$", re.DOTALL)


def strip_math_delimiters(text: str) -> str:
    """``$x$``, ``$$x$$``, ``\\(x\\)`` or ``\\[x\\]`` -> ``x`` (whole-string wrappers only)."""
    s = str(text).strip()
    m = _DELIMITED.match(s)
    if m is None:
        return s
    inner = next(g for g in m.groups() if g is not None).strip()
    if any(d in inner for d in ("$", "\\(", "\\)", "\\[", "\\]")):
        return s  # "$2$ or $3$" is two formulas, not one wrapped answer
    return inner


def is_missing_answer(value: Any) -> bool:
    """True for an answer that holds none: None, NaN, empty (inside its math delimiters too), or a missing value
    written as text (``nan``, ``None``, ``null``, ``N/A``, ...)."""
    if value is None or (isinstance(value, float) and value != value):
        return True
    text = strip_math_delimiters(str(value)).strip("$ \t\n")
    return not text or text.casefold() in MISSING_VALUE_TEXTS


def _is_scalar(value: Any) -> bool:
    """A string or a real number (numpy's too), not a bool: what one accepted answer may be."""
    return isinstance(value, str | decimal.Decimal) or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def _kind(value: Any) -> str:
    name = type(value).__name__
    return "a bool" if "bool" in name else f"a {name}"


def ground_truth_problem(ground_truth: Any) -> str | None:
    """Why GROUND_TRUTH cannot be graded against (one line), or None: a ground truth is a string, a number or a
    flat list of them (missing items in a list are skipped). A dict, a nested list or a bool is refused, never
    read as text (a dict's keys would become accepted answers)."""
    value = ground_truth
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()  # a numpy array or scalar from a Parquet column
    if value is None or _is_scalar(value):
        return None
    if isinstance(value, list | tuple):
        bad = [item for item in value if item is not None and not _is_scalar(item)]
        if not bad:
            return None
        return f"ground truth is a list holding {_kind(bad[0])}, not a flat list of strings or numbers"
    return f"ground truth is {_kind(value)} ({_short(value)}), not a string, a number or a list of them"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def ground_truth_answers(ground_truth: Any) -> list[str]:
    """The accepted answers: a JSON list of strings (or a list) gives alternatives, anything else one answer."""
    items: list[Any] | None = None
    if hasattr(ground_truth, "tolist") and not isinstance(ground_truth, str):
        ground_truth = ground_truth.tolist()  # a numpy array from a list-typed parquet column
    if isinstance(ground_truth, list | tuple):
        items = list(ground_truth)
    elif isinstance(ground_truth, str) and ground_truth.lstrip().startswith("["):
        try:
            parsed = json.loads(ground_truth)
        except ValueError:
            parsed = None
        if isinstance(parsed, list) and parsed and all(isinstance(x, str) for x in parsed):
            items = parsed
    if items is None:
        return [str(ground_truth)]
    answers = [str(x) for x in items if x is not None and str(x).strip()]
    return answers or [str(ground_truth)]


def encode_alternatives(answers: Sequence[str]) -> str:
    """Ground truth accepting any one of ``answers``: one answer stays itself, several become a JSON list."""
    kept = [strip_math_delimiters(a) for a in answers if str(a).strip()]
    if not kept:
        raise ValueError("no answers to encode")
    return kept[0] if len(kept) == 1 else json.dumps(kept, ensure_ascii=False)


def encode_answer_set(answers: Sequence[str]) -> str:
    """Ground truth needing all of ``answers`` in any order: comma-separated, as MATH writes them."""
    kept = [strip_math_delimiters(a) for a in answers if str(a).strip()]
    if not kept:
        raise ValueError("no answers to encode")
    return ", ".join(kept)
