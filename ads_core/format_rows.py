"""Row conversion: one raw row plus its detected layout -> question, solution, final answer (or a Reject)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ads_core.config import FormatConfig
from ads_core.format_detect import MARKER, Layout
from ads_core.text import clean_instruction, has_surrogates, is_messages, last_boxed, message_text

_CALC = re.compile(r"<<[^<>]*>>")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


class Reject(Exception):  # noqa: N818 - a row-level outcome, not an error of the stage
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message




def _check_text(value: Any, column: str, what: str, limit: int, reason_if_missing: str) -> str:
    if value is None:
        raise Reject(reason_if_missing, f"{what} column {column!r} is null")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Reject("bad_type", f"{what} column {column!r} holds a {type(value).__name__}, expected text")
    text = value if isinstance(value, str) else _scalar_to_text(value)
    if has_surrogates(text):
        raise Reject("bad_encoding", f"{what} column {column!r} is not valid UTF-8")
    text = text.strip()
    if not text:
        raise Reject(reason_if_missing, f"{what} column {column!r} is empty")
    if len(text) > limit:
        raise Reject("too_long", f"{what} column {column!r} has {len(text)} characters (limit {limit})")
    return text




def _scalar_to_text(value: int | float) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Reject("bad_type", f"answer is {value}")
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)




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
    if not is_messages(messages):
        raise Reject("bad_type", f"messages column {layout.messages!r} is not a list of {{role, content}}")
    users = [i for i, m in enumerate(messages) if "user" in str(m["role"]).lower()
             or "human" in str(m["role"]).lower()]
    if not users:
        raise Reject("missing_question", f"messages column {layout.messages!r} has no user message")
    last_user = users[-1]
    question = _check_text(clean_instruction(message_text(messages[last_user]["content"])), layout.messages,
                           "question", cfg.max_question_chars, "missing_question")
    replies = [message_text(m["content"]) for m in messages[last_user + 1:]
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
    if not is_messages(messages):
        raise Reject("bad_type", f"prompt column {layout.messages!r} is not a list of {{role, content}}")
    prompt = [{"role": str(m["role"]), "content": message_text(m["content"])} for m in messages]
    users = [m["content"] for m in prompt if m["role"] == "user"] or [prompt[-1]["content"]]
    question = _check_text(clean_instruction(users[-1]), layout.messages, "question", cfg.max_question_chars,
                           "missing_question")
    if any(has_surrogates(m["content"]) for m in prompt):
        raise Reject("bad_encoding", f"prompt column {layout.messages!r} is not valid UTF-8")
    rm = row.get(layout.answer)
    if not isinstance(rm, dict):
        raise Reject("bad_type", f"reward_model column {layout.answer!r} is not a struct with ground_truth")
    answer = _answer_text(rm.get("ground_truth"), f"{layout.answer}.ground_truth", cfg)
    solution = None
    if layout.solution:
        value = row.get(layout.solution)
        if isinstance(value, list):
            value = "\n".join(message_text(v.get("content") if isinstance(v, dict) else v) for v in value)
        elif isinstance(value, dict):
            value = message_text(value.get("content"))
        if value is not None and str(value).strip():
            solution = _check_text(value, layout.solution, "solution", cfg.max_solution_chars, "missing_answer")
    extra = row.get("extra_info")
    if solution is None and isinstance(extra, dict) and isinstance(extra.get("solution"), str) \
            and extra["solution"].strip():  # our own output keeps the solution here; keep it on a rerun
        solution = _check_text(extra["solution"], "extra_info.solution", "solution", cfg.max_solution_chars,
                               "missing_answer")
    return Converted(question, solution, answer, prompt)


