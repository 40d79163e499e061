"""Layout detection: which columns of a file hold the question, solution, answer, options, messages.

Layouts (column names in any capitalisation):
- `qa`:        problem/question + optional solution + answer (MATH, AIME, AMC)
- `marker`:    question + answer whose tail is `#### result` (GSM8K)
- `boxed`:     question + solution holding `\\boxed{...}`, no answer column
- `mcq`:       question + options list/dict + letter or index answer
- `body_question`: word problem split into a body and a question field
- `chat`:      a list of {role, content} messages (last user turn = question)
- `verl`:      rows already in verl schema (prompt messages + reward_model), passed through
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ads_core.config import FormatConfig
from ads_core.readers import InputError
from ads_core.text import is_messages

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
    if prompt_col and rm_col and not q_over and any(is_messages(v) for v in sample(prompt_col)) and any(
            isinstance(v, dict) and "ground_truth" in v for v in sample(rm_col)):
        sol = s_over or next(iter(_present(columns, ("target", "solution"))), None)
        return Layout("verl", messages=prompt_col, solution=sol, answer=rm_col, id_column=id_col,
                      data_source=ds_col)

    # Chat messages.
    if not q_over:
        for name in _present(columns, MESSAGES_COLUMNS):
            values = sample(name)
            if values and sum(is_messages(v) for v in values) >= max(1, len(values) // 2):
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


