"""Text helpers shared by the format conversion, the reward and the eval sets (no stage code, no pyarrow).

Kept apart so `reward.py` or the eval sets can normalise a question or read a `\\boxed{}` answer without
importing the whole format conversion (`ads_core.ingest`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

_WS = re.compile(r"\s+")
_THINK_TAIL = re.compile(r"\s*<think>\s*$", re.IGNORECASE)
_INSTRUCTION_HINTS = ("reason step by step", "final answer", "\\boxed{}", "boxed{}", "math problem")


def normalize_question(text: str) -> str:
    """NFKC, collapsed whitespace, casefolded: the form duplicates and sample ids are decided on."""
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


def has_surrogates(text: str) -> bool:
    """True when TEXT cannot be written as UTF-8 (lone surrogates from JSON escapes or surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string, or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "\n".join(
            str(p.get("text") or p.get("content") or "") if isinstance(p, dict) else str(p) for p in content
        )
    return "" if content is None else str(content)


def is_messages(value: Any) -> bool:
    """A non-empty list of {role, content} dicts."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)
    )


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
            text = text[len(tag) :].strip()
            break
    text = _THINK_TAIL.sub("", text).strip()
    return text or original.strip()


def md_text(text: str | None, limit: int = 220) -> str:
    """One line of user text, safe inside markdown."""
    flat = " ".join(str(text or "").split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    for ch in "\\`*_[]<>|#":
        flat = flat.replace(ch, "\\" + ch)
    return flat
