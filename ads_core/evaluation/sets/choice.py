"""Multiple-choice eval sets in their publishers' layouts, read as problems whose prompt lists the options.

Layouts recognised from a file's columns (JSONL, JSON, CSV or Parquet):

* GPQA (``gpqa_diamond.csv``): ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``; the four options are
  put in an order drawn from the question's id (the same every run), as GPQA's own harness shuffles them;
* MMLU-Pro (``TIGER-Lab/MMLU-Pro``): ``question``, ``options`` (a list), ``answer`` (a letter) and
  ``answer_index``; MMLU (``cais/mmlu``): ``question``, ``choices``, ``answer`` (an index); ARC style:
  ``question``, ``choices`` ``{"text": [...], "label": [...]}``, ``answerKey``; and any file with
  ``question``, ``options``/``choices`` and an ``answer`` that is a letter, an index or an option's text.

The prompt is the question, then one line per option, ``(A) ...``, then "Answer with the letter of the correct
option.", put into the prompt template like any question. The ground truth is ``grading.choice``'s JSON (the letter
and the options), so the one grader reads the chosen letter and compares it exactly.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from typing import Any

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.common.text import sample_id_of
from ads_core.evaluation.backends import Problem
from ads_core.grading.choice import LETTERS, truth_text

INSTRUCTION = "Answer with the letter of the correct option."
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def read_rows(uri: str) -> list[dict[str, Any]]:
    """The rows of a JSONL / JSON / CSV / Parquet file as dicts; a bad file or line is an InputError naming it."""
    name = uri.lower().removesuffix(".gz")
    try:
        if name.endswith(".parquet"):
            return storage.read_parquet(uri).to_pylist()  # type: ignore[no-any-return]
        fs, path = storage.get_fs(uri)
        with fs.open(path, "rb", compression="infer") as fh:
            text = fh.read().decode("utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"{uri}: unreadable ({exc})") from None
    if name.endswith(".csv"):
        return list(csv.DictReader(io.StringIO(text)))
    if name.endswith(".json") and text.lstrip().startswith("["):
        rows = json.loads(text)
        return [r for r in rows if isinstance(r, dict)]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{uri}: line {number} is not JSON ({exc.args[0][:60]})") from None
        if not isinstance(row, dict):
            raise InputError(f"{uri}: line {number} is not a JSON object")
        rows.append(row)
    return rows


def is_choice_layout(columns: Sequence[str]) -> bool:
    """True when COLUMNS are one of the multiple-choice layouts above."""
    cols = set(columns)
    if set(GPQA_COLUMNS) <= cols:
        return True
    has_question = "question" in cols
    has_options = bool({"options", "choices"} & cols)
    return has_question and has_options and bool({"answer", "answerKey", "answer_index"} & cols)


def _options(row: dict[str, Any]) -> tuple[list[str], list[str] | None]:
    value = row.get("options", row.get("choices"))
    if isinstance(value, dict):  # ARC: {"text": [...], "label": [...]}
        return [str(t) for t in value.get("text") or []], [str(x) for x in value.get("label") or []]
    if isinstance(value, str):  # a CSV cell holding a list
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list):
        return [], None
    return [str(v) for v in value], None


def _letter(row: dict[str, Any], options: list[str], labels: list[str] | None) -> str | None:
    answer = row.get("answerKey", row.get("answer"))
    if labels is not None and answer is not None and str(answer) in labels:
        return LETTERS[labels.index(str(answer))]
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in LETTERS[: len(options)]:
        return answer.strip().upper()
    index = row.get("answer_index", answer)
    if isinstance(index, int | float) and not isinstance(index, bool) and 0 <= int(index) < len(options):
        return LETTERS[int(index)]
    if isinstance(answer, str) and answer.strip().isdigit() and int(answer) < len(options):
        return LETTERS[int(answer)]
    if isinstance(answer, str) and answer.strip() in options:
        return LETTERS[options.index(answer.strip())]
    return None


def choice_row(row: dict[str, Any]) -> tuple[str, list[str], str] | str:
    """(question, options, letter) of one row, or why it can't be used."""
    if all(c in row for c in GPQA_COLUMNS):
        question = str(row["Question"] or "").strip()
        right = str(row["Correct Answer"] or "").strip()
        options = [right, *(str(row[f"Incorrect Answer {i}"] or "").strip() for i in (1, 2, 3))]
        random.Random(sample_id_of(question)).shuffle(options)  # the same order every run
        letter = LETTERS[options.index(right)]
    else:
        question = str(row.get("question") or "").strip()
        options, labels = _options(row)
        options = [o.strip() for o in options]
        letter = _letter(row, options, labels)  # type: ignore[assignment]
    if not question:
        return "no question"
    if len(options) < 2 or len(options) > len(LETTERS) or not all(options):
        return f"{len(options)} options (needs 2 to {len(LETTERS)}, none empty)"
    if letter is None:
        return f"answer {row.get('answerKey', row.get('answer'))!r} is not a letter, index or text of an option"
    return question, options, letter


def question_text(question: str, options: list[str]) -> str:
    """What goes into the template's {question}: the question and its lettered options."""
    lines = [f"({LETTERS[i]}) {option}" for i, option in enumerate(options)]
    return question + "\n\n" + "\n".join(lines) + "\n\n" + INSTRUCTION


def load_choice_problems(name: str, uri: str, template: str, rows: list[dict[str, Any]] | None = None) -> list[Problem]:
    """One set's problems; a row that can't be used is an InputError naming the file and the row."""
    problems: list[Problem] = []
    seen: set[int] = set()
    for index, row in enumerate(rows if rows is not None else read_rows(uri)):
        parsed = choice_row(row)
        if isinstance(parsed, str):
            raise InputError(f"{uri}: row {index}: {parsed}")
        question, options, letter = parsed
        pid = sample_id_of(question)
        if pid in seen:
            raise InputError(f"{uri}: row {index} repeats an earlier question; eval problems must be unique")
        seen.add(pid)
        content = template.replace("{question}", question_text(question, options))
        messages = [{"role": "user", "content": content}]
        problems.append(Problem(name, pid, messages, truth_text(letter, options)))
    return problems
