"""Evidence for layout detection: what a column's name and its sampled values say about its role.

A column is a candidate for a role only when its name is a known synonym (any case, any separator:
`answerKey`, `Answer Key` and `answer_key` are one name). Among candidates, content decides: the share
of non-empty strings, their length, whether they end in `?`, hold `\\boxed{}` or `####`, look like short
final answers, or are single letters matching the options. `score` is name weight + content score;
`rank` returns the candidates best first, with the evidence recorded in the manifest.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from ads_core.common.text import is_messages

MARKER = "####"
UNFIT = -10.0  # content score of values that cannot play a role
MARGIN = 1.0  # the best candidate must lead the next by this much, unless their values agree

_W3, _W2, _W1 = 3.0, 2.0, 1.0
SYNONYMS: dict[str, dict[str, float]] = {
    "question": {
        **dict.fromkeys(("problem", "question"), _W3),
        **dict.fromkeys(
            (
                "query",
                "prompt",
                "instruction",
                "problemtext",
                "questiontext",
                "statement",
                "problemstatement",
                "mathproblem",
                "originalquestion",
                "questioncontent",
                "problembody",
                "ques",
                "prob",
                "q",
            ),
            _W2,
        ),
        **dict.fromkeys(("input", "content", "text", "task", "user", "inputs"), _W1),
    },
    "solution": {
        **dict.fromkeys(("solution", "solutions"), _W3),
        **dict.fromkeys(
            (
                "reasoning",
                "rationale",
                "cot",
                "chainofthought",
                "explanation",
                "workedsolution",
                "referencesolution",
                "solutiontext",
                "longsolution",
                "proof",
                "steps",
                "answerexplanation",
                "thought",
                "thoughts",
                "derivation",
            ),
            _W2,
        ),
        **dict.fromkeys(
            ("target", "response", "output", "generation", "completion", "outputs", "targets", "process", "work"), _W1
        ),
    },
    "answer": {
        **dict.fromkeys(
            (
                "answer",
                "finalanswer",
                "groundtruth",
                "correctanswer",
                "answerkey",
                "answers",
                "finalanswers",
                "goldanswer",
                "expectedanswer",
                "shortanswer",
            ),
            _W3,
        ),
        **dict.fromkeys(
            (
                "gt",
                "label",
                "correct",
                "gold",
                "ans",
                "answervalue",
                "numericalanswer",
                "correctoption",
                "correctchoice",
                "extractedanswer",
                "targetanswer",
                "answerletter",
                "answeridx",
                "answerindex",
                "labels",
                "goldlabel",
            ),
            _W2,
        ),
        **dict.fromkeys(("result", "target", "output", "solutionvalue"), _W1),
    },
    "options": {
        **dict.fromkeys(
            (
                "options",
                "choices",
                "answerchoices",
                "option",
                "answeroptions",
                "candidates",
                "alternatives",
                "choicelist",
                "opts",
                "mcoptions",
            ),
            _W3,
        )
    },
    "body": {**dict.fromkeys(("body", "context", "passage", "background", "story", "premise"), _W3)},
    "messages": {
        **dict.fromkeys(("messages", "conversations", "conversation", "chat", "dialog", "dialogue", "turns"), _W3),
        "prompt": _W2,
    },
    "id": {**dict.fromkeys(("uniqueid", "id", "uid", "idx", "problemid", "questionid", "qid", "index"), _W3)},
}
OPTION_LETTER_COLUMN = re.compile(r"^(?:option|opt|choice)?([a-j])$")
_LETTER = re.compile(r"^\(?([A-Ja-j])[).:]?$")
_SENTENCE_END = re.compile(r"[.!?](\s|$)")


def name_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass
class ColumnStats:
    present: float = 0.0  # non-null, non-empty values
    strings: float = 0.0  # non-empty strings
    lists: float = 0.0  # non-empty lists of strings or numbers
    mean_len: float = 0.0
    qmark: float = 0.0
    boxed: float = 0.0
    marker: float = 0.0
    short: float = 0.0  # short values that look like final answers
    letters: float = 0.0  # single letters A-J (multiple-choice answers)
    tokens: float = 0.0  # one token, no space and no `?`: a number, a letter, a formula - never a question
    messages: float = 0.0
    worked: float = 0.0  # long, multi-line or multi-sentence: a worked solution

    def summary(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in asdict(self).items() if v}


def _as_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)):
        return str(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
    ):
        return "\n\n".join(str(v) for v in value).strip() or None
    return None


def column_stats(values: list[Any]) -> ColumnStats:
    """Shares over the sampled VALUES (missing ones count as None)."""
    n = len(values) or 1
    st = ColumnStats()
    total_len = 0
    texts = 0
    for v in values:
        if is_messages(v):
            st.messages += 1
            st.present += 1
            continue
        text = _as_text(v)
        if text is None:
            continue
        texts += 1
        st.present += 1
        st.strings += isinstance(v, str)
        st.lists += isinstance(v, list)
        total_len += len(text)
        st.qmark += text.rstrip(" $").endswith("?")
        boxed = "\\boxed" in text or "\\fbox" in text
        st.boxed += boxed
        st.marker += MARKER in text
        st.letters += bool(_LETTER.match(text))
        st.tokens += " " not in text and not text.endswith("?")
        long = len(text) > 150 and ("\n" in text or len(_SENTENCE_END.findall(text)) >= 3)
        st.worked += long
        st.short += (
            not boxed and MARKER not in text and len(text) <= 40 and len(text.split()) <= 4 and not text.endswith("?")
        )
    for f in (
        "present",
        "strings",
        "lists",
        "qmark",
        "boxed",
        "marker",
        "short",
        "letters",
        "tokens",
        "messages",
        "worked",
    ):
        setattr(st, f, getattr(st, f) / n)
    st.mean_len = total_len / texts if texts else 0.0
    return st


def content_score(role: str, st: ColumnStats) -> float | None:
    """How well the values fit ROLE; None when they cannot play it at all."""
    if role == "question":
        if st.strings < 0.5:
            return None
        return 1 + 0.5 * st.qmark + (0.5 if st.mean_len >= 20 else 0) - 2 * st.tokens - st.marker - 0.5 * st.boxed
    if role == "solution":
        if st.strings + st.lists < 0.3:
            return None
        return 1 + st.boxed + (0.5 if st.mean_len >= 40 else 0) + 0.5 * st.worked - 2 * st.short
    if role == "answer":
        if st.present < 0.5 or st.messages:
            return None
        return 1 + st.short + st.marker + 0.5 * st.letters - 1.5 * max(0.0, st.worked - st.marker)
    return None if st.present < 0.5 else 0.0


def rank(
    role: str, columns: list[str], stats: dict[str, ColumnStats], exclude: tuple[str | None, ...] = ()
) -> list[tuple[str, float]]:
    """Candidates for ROLE among COLUMNS, best first (ties keep the synonym list's priority)."""
    names = SYNONYMS[role]
    scored = []
    for col in columns:
        weight = names.get(name_key(col), 0.0)
        if not weight or col in exclude:
            continue
        content = content_score(role, stats[col])
        # Values that cannot play the role rank last, yet still win when they are the only named candidate:
        # the rows are then rejected one by one with their reason (bad_type ...) instead of a missing column.
        scored.append((col, round(weight + (UNFIT if content is None else content), 3)))
    return sorted(scored, key=lambda cs: -cs[1])


def letter_option_columns(columns: list[str]) -> list[str]:
    """Columns A, B, C, D ... (or option_a ...) that together hold the options; [] unless A-C at least."""
    by_letter: dict[str, str] = {}
    for col in columns:
        m = OPTION_LETTER_COLUMN.match(name_key(col))
        if m and m.group(1) not in by_letter:
            by_letter[m.group(1)] = col
    out = []
    for letter in "abcdefghij":
        if letter not in by_letter:
            break
        out.append(by_letter[letter])
    return out if len(out) >= 3 else []
