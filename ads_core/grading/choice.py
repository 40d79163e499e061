"""Multiple-choice grading (GPQA-Diamond, MMLU-Pro and their kin): the chosen letter, compared exactly; no sympy.

A multiple-choice ground truth is a JSON object ``{"choice": "C", "options": ["...", ...]}`` (what
``ads_core.evaluation.sets.choice`` writes; a dict is taken as it is). The completion's choice is read, last
mention first, from

1. its last ``\\boxed{...}``: a letter (``C``, ``(C)``, ``C)``, ``\\text{C}``, ``(C) Rome``) or an option's text;
2. otherwise its last "answer is (C)" / "Answer: C" (the letter or an option's text after it);

and is correct when it is the ground truth's letter. A letter outside the options counts as no answer.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ads_core.grading.text import extract_answer

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_LETTER = re.compile(r"^\(?\s*([A-Z])\s*(?:\)|\.|:)?$")
_LETTER_THEN_TEXT = re.compile(r"^\(?([A-Z])(?:\)|\.|:)\s+\S")  # "(C) Rome", "C. Rome"
_ANSWER_IS = re.compile(
    r"(?:answer|option|choice)\s*(?:is|:)\s*(?:option\s*)?\(?\s*([A-Z])\b\)?|"
    r"(?:answer|option|choice)\s*(?:is|:)\s*([^\n.]{1,200})",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ChoiceTruth:
    letter: str
    options: tuple[str, ...]


def parse_truth(ground_truth: Any) -> ChoiceTruth | None:
    """The multiple-choice ground truth, or None when GROUND_TRUTH is not one (then it is graded as math)."""
    doc = ground_truth
    if isinstance(ground_truth, str):
        if not ground_truth.startswith('{"choice"'):
            return None
        try:
            doc = json.loads(ground_truth)
        except ValueError:
            return None
    if not isinstance(doc, dict) or not isinstance(doc.get("choice"), str) or not isinstance(doc.get("options"), list):
        return None
    options = tuple(str(o) for o in doc["options"])
    letter = doc["choice"].strip().upper()
    if len(letter) != 1 or letter not in LETTERS[: len(options)]:
        return None
    return ChoiceTruth(letter, options)


def truth_text(letter: str, options: list[str]) -> str:
    """The ground truth string of a multiple-choice problem (the inverse of `parse_truth`)."""
    return json.dumps({"choice": letter, "options": options}, ensure_ascii=False)


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = _WRAPPERS.sub(r"\1", text)
    return " ".join(text.replace("$", "").split()).strip(" .").casefold()


def _pick(text: str, truth: ChoiceTruth) -> str | None:
    """The letter TEXT names: a letter of the options, or an option's exact text (normalised)."""
    inner = _WRAPPERS.sub(r"\1", text).replace("$", "").strip()
    m = _LETTER.match(inner.strip()) or _LETTER_THEN_TEXT.match(inner.strip())
    if m:
        return m.group(1) if m.group(1) in LETTERS[: len(truth.options)] else None
    wanted = _norm(inner)
    hits = [LETTERS[i] for i, option in enumerate(truth.options) if _norm(option) == wanted]
    return hits[0] if len(hits) == 1 else None


def extract_choice(completion: str, truth: ChoiceTruth) -> tuple[str | None, str | None]:
    """(letter chosen or None, the text it was read from)."""
    boxed = extract_answer(completion)
    if boxed is not None:
        return _pick(boxed, truth), boxed
    for m in reversed(list(_ANSWER_IS.finditer(completion))):
        said = m.group(1) or m.group(2) or ""
        letter = _pick(said, truth)
        if letter is not None:
            return letter, said.strip()
    return None, None


def grade_choice(completion: str, truth: ChoiceTruth) -> tuple[bool, str | None, str]:
    """(correct, extracted letter, reason): reason is correct, wrong or no_answer."""
    letter, _ = extract_choice(completion if isinstance(completion, str) else "", truth)
    if letter is None:
        return False, None, "no_answer"
    return letter == truth.letter, letter, "correct" if letter == truth.letter else "wrong"
