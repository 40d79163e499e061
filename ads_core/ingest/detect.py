"""Layout detection: which columns of a file hold the question, solution, answer, options, messages.

Layouts (column names in any capitalisation, see `format_evidence.SYNONYMS`):
- `qa`:        problem/question + optional solution + answer (MATH, AIME, AMC)
- `marker`:    question + answer whose tail is `#### result` (GSM8K)
- `boxed`:     question + solution holding `\\boxed{...}`, no answer column
- `mcq`:       question + options (a list, dict, letter-prefixed strings, or columns A, B, C ...) + answer
- `body_question`: word problem split into a body and a question field
- `chat`:      a list of {role, content} messages (last user turn = question)
- `verl`:      rows already in verl schema (prompt messages + reward_model), passed through

Errors name the option to set by its config field (`set question_col`); see `InputError.render`.
`FileLayouts` keeps one detected layout per file of a source, for the conversion.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.common.text import is_messages
from ads_core.config.build import FormatConfig
from ads_core.ingest.evidence import MARGIN, MARKER, ColumnStats, column_stats, letter_option_columns, rank
from ads_core.ingest.records import RawRow
from ads_core.ingest.sources import folder_of

DATA_SOURCE_COLUMN = "data_source"

log = logging.getLogger("ads.format")


# each layout in words, for the lines a person reads (`ads format`, `ads build`): what the file was read as
LAYOUT_TEXT = {
    "qa": "question, solution and answer columns (MATH style)",
    "marker": "a question and an answer that ends in '#### <result>' (GSM8K style)",
    "boxed": "a question and a worked solution ending in \\boxed{} (no answer column)",
    "mcq": "multiple choice: a question, its options and the answer",
    "body_question": "a word problem in two fields, its body and its question",
    "chat": "chat messages (the last user turn is the question)",
    "verl": "rows already in verl's schema (kept as they are)",
}
ROLE_TEXT = {"question": "the question", "solution": "the solution", "answer": "the answer", "options": "the options"}
ROLE_TEXT |= {"body": "the body", "messages": "the messages"}


def describe_in_words(described: dict[str, Any]) -> str:
    """`Layout.describe()` as a sentence: ``read as a question and an answer that ends in '#### <result>' (GSM8K
    style): the question from column 'question', the answer from column 'answer'``."""
    kind = str(described.get("layout"))
    columns = [
        f"{ROLE_TEXT[role]} from column {value!r}" for role, value in described.items() if role in ROLE_TEXT and value
    ]
    return f"read as {LAYOUT_TEXT.get(kind, kind)}" + (f": {', '.join(columns)}" if columns else "")


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
    option_columns: tuple[str, ...] = ()  # options spread over columns A, B, C ...
    evidence: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        options = self.options or (", ".join(self.option_columns) if self.option_columns else None)
        return {
            "layout": self.kind,
            "question": self.question,
            "solution": self.solution,
            "answer": self.answer,
            "options": options,
            "body": self.body,
            "messages": self.messages,
        }

    def used(self) -> set[str | None]:
        return {
            self.question,
            self.solution,
            self.answer,
            self.options,
            self.body,
            self.messages,
            self.data_source,
            *self.option_columns,
        }


def _norm_cell(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


class _Detector:
    def __init__(self, file: str, rows: list[dict[str, Any]]) -> None:
        self.file, self.rows = file, rows
        self.columns: list[str] = []
        for r in rows:
            for k in r:
                if k not in self.columns:
                    self.columns.append(k)
        self.lower = {c.lower().strip(): c for c in reversed(self.columns)}  # first spelling wins
        self.found = ", ".join(self.columns) or "(none)"
        self.stats: dict[str, ColumnStats] = {c: column_stats([r.get(c) for r in rows]) for c in self.columns}
        self.evidence: dict[str, Any] = {}

    def override(self, value: str | None, option: str, bad: list[str]) -> str | None:
        if value is None:
            return None
        if value in self.columns:
            return value
        if value.lower().strip() in self.lower:
            return self.lower[value.lower().strip()]
        bad.append(f"{option} {value!r} is not a column")
        return None

    def choose(self, role: str, *exclude: str | None) -> str | None:
        """The best candidate for ROLE; InputError when two differ and neither clearly leads."""
        ranked = rank(role, self.columns, self.stats, exclude)
        if not ranked:
            return None
        best = ranked[0][0]
        self.evidence[role] = {"chosen": best, "candidates": dict(ranked), "stats": self.stats[best].summary()}
        if len(ranked) == 1 or ranked[0][1] - ranked[1][1] >= MARGIN:
            return best
        close = [c for c, s in ranked if ranked[0][1] - s < MARGIN]
        if all(_norm_cell(r.get(best)) == _norm_cell(r.get(o)) for o in close[1:] for r in self.rows):
            return best
        option = "options_col" if role == "options" else f"{role}_col"
        raise InputError(
            f"{self.file}: ambiguous {role} column: {', '.join(close)} all look like one and differ "
            f"(columns found: {self.found}); set {option} to one of them",
            options=(option,),
        )

    def sample(self, col: str) -> list[Any]:
        return [r.get(col) for r in self.rows if r.get(col) is not None]


def detect_layout(file: str, rows: list[dict[str, Any]], cfg: FormatConfig) -> Layout:
    """Decide which columns hold question, solution, answer from the names and a sample of rows."""
    d = _Detector(file, rows)
    bad: list[str] = []
    q_over = d.override(cfg.question_col, "question_col", bad)
    s_over = d.override(cfg.solution_col, "solution_col", bad)
    a_over = d.override(cfg.answer_col, "answer_col", bad)
    o_over = d.override(cfg.options_col, "options_col", bad)
    if bad:
        opts = tuple(b.split(" ", 1)[0] for b in bad)
        raise InputError(f"{file}: {'; '.join(bad)} (columns found: {d.found})", options=opts)
    ids = rank("id", d.columns, d.stats)
    common = {"id_column": ids[0][0] if ids else None, "data_source": d.lower.get(DATA_SOURCE_COLUMN)}

    # Already in verl schema: prompt messages plus reward_model.ground_truth.
    prompt_col, rm_col = d.lower.get("prompt"), d.lower.get("reward_model")
    if (
        prompt_col
        and rm_col
        and not q_over
        and any(is_messages(v) for v in d.sample(prompt_col))
        and any(isinstance(v, dict) and "ground_truth" in v for v in d.sample(rm_col))
    ):
        sol = s_over or d.lower.get("target") or d.lower.get("solution")
        return Layout("verl", messages=prompt_col, solution=sol, answer=rm_col, **common)

    if not q_over:  # chat messages
        chats = [c for c, _ in rank("messages", d.columns, d.stats) if d.stats[c].messages >= 0.5]
        if chats:
            answer = a_over or d.choose("answer", chats[0], s_over)
            return Layout("chat", messages=chats[0], answer=answer, solution=s_over, evidence=d.evidence, **common)

    question = q_over or d.choose("question", s_over, a_over, o_over)
    options = o_over or d.choose("options", question, s_over, a_over)
    option_columns = () if options else tuple(letter_option_columns(d.columns))
    answer = a_over or d.choose("answer", question, s_over, options, *option_columns)
    solution = s_over or d.choose("solution", question, answer, options, *option_columns)
    body = next((c for c, _ in rank("body", d.columns, d.stats) if c not in (question, answer, solution)), None)

    if answer is not None and not a_over and d.stats[answer].worked >= 0.5 and not d.stats[answer].marker:
        st = d.stats[answer]
        if st.boxed >= 0.5 and solution is None:  # worked solutions with \boxed{}: the boxed layout
            solution, answer = answer, None
        else:
            raise InputError(
                f"{file}: answer column {answer!r} holds worked solutions ({st.worked:.0%} of the sampled rows "
                f"are long, multi-line texts) with no '{MARKER}' final-answer marker or \\boxed{{}}; set answer_col "
                f"to a column of final answers (columns found: {d.found})",
                options=("answer_col",),
            )
    missing: list[tuple[str, str]] = []
    if question is None:
        missing.append(("question", "question_col"))
    if (options or option_columns) and answer is None:
        missing.append(("answer (the options need one)", "answer_col"))
    elif answer is None and solution is None:
        missing.append(("answer or solution", "answer_col (or solution_col)"))
    if missing:
        what = " and no ".join(m[0] for m in missing)
        fix = " and ".join(m[1] for m in missing)
        raise InputError(
            f"{file}: no {what} column (columns found: {d.found}); set {fix}",
            options=("question_col", "answer_col", "solution_col"),
        )
    assert question is not None
    kw = dict(question=question, body=body, evidence=d.evidence, **common)
    if (
        answer is not None
        and not a_over
        and solution is None
        and d.stats[answer].marker
        and (d.stats[answer].marker >= 0.5 or d.stats[answer].worked >= 0.5)
    ):
        return Layout("marker", answer=answer, **kw)
    if options or option_columns:
        return Layout("mcq", options=options, option_columns=option_columns, answer=answer, solution=solution, **kw)
    kind = "body_question" if body else ("qa" if answer is not None else "boxed")
    return Layout(kind, solution=solution, answer=answer, **kw)


class FileLayouts:
    """One detected layout per file; small files (one problem each) reuse the layout of their column set."""

    MAX_LISTED = 100  # files listed one by one in the manifest; the rest are counted

    def __init__(self, source: str, cfg: FormatConfig) -> None:
        self.source, self.cfg = source, cfg
        self.by_file: dict[str, Layout] = {}
        self.by_columns: dict[tuple[str, ...], Layout] = {}
        self.detected: dict[str, dict[str, Any]] = {}
        self.evidence: dict[str, dict[str, Any]] = {}
        self.folders: dict[str, str | None] = {}
        self.unlisted = 0

    def get(self, raw: RawRow, batch: list[RawRow]) -> Layout:
        file = raw.source_file
        layout = self.by_file.get(file)
        if layout is not None:
            return layout
        sample = [r.data for r in batch if r.data is not None and r.source_file == file][:200]
        key = tuple(sorted({k for row in sample for k in row}))
        if len(sample) < 20:  # too few rows to judge alone: other files with the same columns help
            layout = self.by_columns.get(key)
            if layout is None:
                sample += [
                    r.data
                    for r in batch
                    if r.data is not None and r.source_file != file and tuple(sorted(r.data)) == key
                ][: 200 - len(sample)]
        if layout is None:
            layout = detect_layout(file, sample, self.cfg)
            self.by_columns.setdefault(key, layout)
        self.by_file[file] = layout
        self.folders[file] = folder_of(self.source, file) if storage.exists(self.source) else None
        if len(self.detected) < self.MAX_LISTED:
            self.detected[file] = layout.describe()
            if layout.evidence:
                self.evidence[file] = layout.evidence
            log.info("%s: detected layout %s", file, layout.describe())
        else:
            self.unlisted += 1
        return layout
