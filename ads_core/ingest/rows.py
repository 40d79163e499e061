"""Row conversion: one raw row plus its detected layout -> question, solution, final answer (or a Reject)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ads_core.common.text import clean_instruction, has_surrogates, is_messages, last_boxed, message_text
from ads_core.config.build import FormatConfig
from ads_core.ingest.detect import Layout
from ads_core.ingest.evidence import MARKER, column_stats
from ads_core.ingest.values import (
    Reject,
    answer_text,
    check_text,
    mcq_answer,
    options_text,
    parse_options,
    solution_text,
)

_CALC = re.compile(r"<<[^<>]*>>")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


@dataclass
class Converted:
    question: str
    solution: str | None
    answer: str
    prompt: list[dict[str, str]] | None  # set only when passing a verl row through


def _question(row: dict[str, Any], layout: Layout, cfg: FormatConfig) -> str:
    assert layout.question is not None
    value = row.get(layout.question)
    if value is not None and not isinstance(value, str):
        raise Reject("bad_type", f"question column {layout.question!r} holds a {type(value).__name__}, expected text")
    question = check_text(value, layout.question, "question", cfg.max_question_chars, "missing_question")
    if layout.body:
        body_value = row.get(layout.body)
        if body_value is not None and str(body_value).strip():
            body = check_text(body_value, layout.body, "body", cfg.max_question_chars, "missing_question")
            question = f"{body} {question}"
    return question


def _marker(row: dict[str, Any], layout: Layout, cfg: FormatConfig, question: str) -> Converted:
    assert layout.answer is not None
    text = check_text(row.get(layout.answer), layout.answer, "answer", cfg.max_solution_chars, "missing_answer")
    if MARKER not in text:
        raise Reject("missing_answer", f"answer column {layout.answer!r} has no '{MARKER}' final-answer marker")
    body_text, _, final = text.rpartition(MARKER)
    answer = _THOUSANDS.sub("", final.strip())
    if not answer:
        raise Reject("missing_answer", f"nothing after '{MARKER}' in answer column {layout.answer!r}")
    if len(answer) > cfg.max_answer_chars:
        raise Reject("too_long", f"final answer has {len(answer)} characters (limit {cfg.max_answer_chars})")
    return Converted(question, _CALC.sub("", body_text).strip() or None, answer, None)


def _mcq(row: dict[str, Any], layout: Layout, cfg: FormatConfig, question: str, solution: str | None) -> Converted:
    assert layout.answer is not None
    if layout.options:
        letters, texts = parse_options(row.get(layout.options), layout.options)
    else:
        cells = [(chr(ord("A") + i), row.get(c)) for i, c in enumerate(layout.option_columns)]
        cells = [(letter, v) for letter, v in cells if v is not None and str(v).strip()]
        if len(cells) < 2:
            raise Reject("bad_type", f"fewer than two options in columns {', '.join(layout.option_columns)}")
        letters, texts = [c[0] for c in cells], [str(c[1]).strip() for c in cells]
    answer = mcq_answer(row.get(layout.answer), layout.answer, letters, texts, cfg.max_answer_chars)
    return Converted(f"{question}\n\n{options_text(letters, texts)}", solution, answer, None)


def convert_row(row: dict[str, Any], layout: Layout, cfg: FormatConfig) -> Converted:
    if layout.kind == "verl":
        return _convert_verl(row, layout, cfg)
    if layout.kind == "chat":
        return _convert_chat(row, layout, cfg)
    question = _question(row, layout, cfg)
    solution = (
        solution_text(row.get(layout.solution), layout.solution, cfg.max_solution_chars) if layout.solution else None
    )
    if layout.kind == "marker":
        return _marker(row, layout, cfg, question)
    if layout.kind == "mcq":
        return _mcq(row, layout, cfg, question, solution)
    if layout.answer is not None:
        raw = row.get(layout.answer)
        if isinstance(raw, str) and column_stats([raw]).worked and not last_boxed(raw):
            raise Reject(
                "missing_answer",
                f"answer column {layout.answer!r} holds a worked solution with no "
                f"'{MARKER}' marker or \\boxed{{}} final answer",
            )
        if isinstance(raw, str) and column_stats([raw]).worked:
            raw = last_boxed(raw)
        answer = answer_text(raw, layout.answer, cfg.max_answer_chars)
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
    users = [i for i, m in enumerate(messages) if "user" in str(m["role"]).lower() or "human" in str(m["role"]).lower()]
    if not users:
        raise Reject("missing_question", f"messages column {layout.messages!r} has no user message")
    last_user = users[-1]
    question = check_text(
        clean_instruction(message_text(messages[last_user]["content"])),
        layout.messages,
        "question",
        cfg.max_question_chars,
        "missing_question",
    )
    replies = [
        message_text(m["content"])
        for m in messages[last_user + 1 :]
        if str(m["role"]).lower() in ("assistant", "gpt", "model", "bot")
    ]
    solution = None
    if layout.solution and row.get(layout.solution) is not None:
        solution = solution_text(row.get(layout.solution), layout.solution, cfg.max_solution_chars)
    elif replies and replies[0].strip():
        solution = check_text(replies[0], layout.messages, "solution", cfg.max_solution_chars, "missing_answer")
    if layout.answer:
        answer = answer_text(row.get(layout.answer), layout.answer, cfg.max_answer_chars)
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
    question = check_text(
        clean_instruction(users[-1]), layout.messages, "question", cfg.max_question_chars, "missing_question"
    )
    if any(has_surrogates(m["content"]) for m in prompt):
        raise Reject("bad_encoding", f"prompt column {layout.messages!r} is not valid UTF-8")
    rm = row.get(layout.answer)
    if not isinstance(rm, dict):
        raise Reject("bad_type", f"reward_model column {layout.answer!r} is not a struct with ground_truth")
    answer = check_text(
        rm.get("ground_truth"), f"{layout.answer}.ground_truth", "answer", cfg.max_answer_chars, "missing_answer"
    )
    solution = None
    if layout.solution:
        value = row.get(layout.solution)
        if isinstance(value, list):
            value = "\n".join(message_text(v.get("content") if isinstance(v, dict) else v) for v in value)
        elif isinstance(value, dict):
            value = message_text(value.get("content"))
        if value is not None and str(value).strip():
            solution = check_text(value, layout.solution, "solution", cfg.max_solution_chars, "missing_answer")
    extra = row.get("extra_info")
    if (
        solution is None
        and isinstance(extra, dict)
        and isinstance(extra.get("solution"), str)
        and extra["solution"].strip()
    ):  # our own output keeps the solution here; keep it on a rerun
        solution = check_text(
            extra["solution"], "extra_info.solution", "solution", cfg.max_solution_chars, "missing_answer"
        )
    return Converted(question, solution, answer, prompt)
