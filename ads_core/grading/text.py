"""From a completion to the answer strings the grader compares: extraction, Unicode folding, normalisation.

Everything here is plain string work (no sympy), cheap and safe to run in any thread.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from ads_core.common.answers import strip_math_delimiters
from ads_core.grading.arith import exact_value

_BOX_TOKENS = ("\\boxed", "\\fbox")
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox) *\{")
_BRACE = re.compile(r"[{}]")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_SPACES = re.compile(r"\s+|\\[,;:! ]|~")
_ONE_CHAR_GROUP = re.compile(r"([\^_])\{([a-zA-Z0-9])\}(?![a-zA-Z0-9])")  # x^{2} is x^2, a_{n} is a_n
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LEADING_VAR = re.compile(r"^[a-zA-Z]\s*(?:=|\\in)\s*(?=\S)")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°")
_PERCENT = re.compile(r"^(.*?)(?:\\?%)$", re.DOTALL)
_PERCENT_TEXT = re.compile(r"\\*%\s*\.?\s*$")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")
# Scientific notation: 1e-3, 2.5E+4, 1\times10^{-3}, 1\cdot10^3, 10^{-3} (after normalisation: no spaces).
_SCIENTIFIC = re.compile(
    r"(?P<m>-?(?:\d+(?:\.\d*)?|\.\d+))[eE](?P<e>[-+]?\d{1,4})"
    r"|(?:(?P<m2>-?(?:\d+(?:\.\d*)?|\.\d+))(?:\\times|\\cdot|\*))?10\^(?:\{(?P<e2>[-+]?\d{1,4})\}|(?P<e3>\d))"
)
_E_NOTATION = re.compile(r"(?<![\w.\\])(\d+(?:\.\d*)?|\.\d+)[eE]([-+]?\d{1,4})(?![\w.])")
_FACTORIALS = re.compile(r"(?<![\w.}])(\d{1,4})(!!|!)(?!!)")
MAX_EXPONENT = 400  # 1e400 is still read exactly; larger exponents go to the pre-check (and are refused)
MAX_FACTORIAL_DIGITS = 10_000  # n! and n!! as a number up to this many digits (as the pre-check allows)
WRITTEN_OUT_DIGITS = 60  # ... and written out for math-verify (which reads n!! as (n!)!) up to this many
_FRACTION = re.compile(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)/(\d+)")


def _scripts(tag: str) -> str:
    """The superscript (or subscript) characters that stand for a digit, a sign, a bracket or a letter: NFKC
    turns each into its plain character (``²`` -> ``2``, ``ⁿ`` -> ``n``, ``₁`` -> ``1``, ``⁻`` -> ``−``)."""
    blocks = ((0xB2, 0xBA), (0x2B0, 0x2E5), (0x1D2C, 0x1DC0), (0x2070, 0x20A0), (0x2C7C, 0x2C7E))
    found = []
    for low, high in blocks:
        for ch in map(chr, range(low, high)):
            plain = unicodedata.normalize("NFKC", ch)
            if unicodedata.decomposition(ch).startswith(tag) and (plain.isalnum() or plain in "+−=()"):
                found.append(ch)
    return "".join(found)


_SUPER_RUN = re.compile(f"\\^?[{re.escape(_scripts('<super>'))}]+")  # x², x⁻¹, 2ⁿ⁺¹ (x^² too)
_SUB_RUN = re.compile(f"_?[{re.escape(_scripts('<sub>'))}]+")  # x₁, a_ₙ
_VULGAR = "¼½¾⅐⅑⅒⅓⅔⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞↉"  # NFKC writes each as a⁄b; a digit before one makes a mixed number (2½)
_VULGAR_RUN = re.compile(f"(?<![\\d.])(\\d+ ?)?([{_VULGAR}])")
_ROOTS = {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}
_ROOT_OPERAND = re.compile(r" *(-?(?:\d+(?:\.\d+)?|\.\d+|\\[a-zA-Z]+|[a-zA-Z]))")
# Characters NFKC leaves alone but that only ever mean one thing in an answer.
_SYMBOLS = str.maketrans(
    {
        "−": "-",
        "–": "-",
        "⁄": "/",
        "∕": "/",
        "÷": "/",
        "×": "\\times ",
        "·": "\\cdot ",
        "⋅": "\\cdot ",
        "∙": "\\cdot ",
        "∗": "*",
        "π": "\\pi ",
        "∞": "\\infty ",
        "±": "\\pm ",
        "≤": "\\le ",
        "≥": "\\ge ",
        "≠": "\\ne ",
        "∪": "\\cup ",
        "∩": "\\cap ",
        "∅": "\\emptyset ",
    }
)
MAX_NUMBER_CHARS = 60  # longer numerals go to math-verify (int() of huge strings is slow or refused)


def last_complete_boxed(text: str) -> str | None:
    """Content of the last brace-balanced ``\\boxed{...}`` (or ``\\fbox{...}``); an unclosed one after it (a
    completion cut off mid-answer) is skipped in favour of the last complete one. None when there is none.

    Linear in the text's length whatever it holds (thousands of unclosed boxes included)."""
    idx, token = max((text.rfind(t), t) for t in _BOX_TOKENS)
    if idx < 0:
        return None
    content = _braced_after(text, idx + len(token))
    if content is not None:
        return content
    closing = _matching_braces(text)  # the last box is unclosed or empty-handed: one pass over every brace
    for m in reversed(list(_BOX_OPEN.finditer(text))):
        close = closing.get(m.end() - 1)
        if close is not None:
            return text[m.end() : close].strip()
    return None


def _braced_after(text: str, i: int) -> str | None:
    """The brace-balanced group that starts at I (after spaces), or None."""
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for m in _BRACE.finditer(text, i):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return text[i + 1 : m.start()].strip()
    return None


def _matching_braces(text: str) -> dict[int, int]:
    """Position of each opening brace -> position of its closing brace (unclosed ones are absent)."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def extract_answer(completion: str) -> str | None:
    """The completion's final answer (last complete box); full-width braces and backslashes count too."""
    text = completion or ""
    found = last_complete_boxed(text)
    if found is None and not text.isascii():
        folded = unicodedata.normalize("NFKC", text)  # ＼ｂｏｘｅｄ｛５｝
        if folded != text:
            found = last_complete_boxed(folded)
    return found


def fold_unicode(text: str) -> str:
    """What people write, as the grader reads it: NFKC, every Unicode decimal digit as its ASCII digit (５, 𝟓, ٥
    -> 5), superscripts as powers and subscripts as indices (``x²`` -> ``x^{2}``, ``x⁻¹`` -> ``x^{-1}``, ``x₁``
    -> ``x_{1}``), vulgar fractions as fractions (``½`` -> ``\\frac{1}{2}``, ``2½`` -> ``\\frac{5}{2}``), ``√``
    as a square root and ``−``, ``×``, ``·``, ``π``, ``∞`` as their LaTeX."""
    if text.isascii():
        return text
    s = _VULGAR_RUN.sub(_vulgar, text.replace("º", "°"))  # º: the degree sign in answers, not NFKC's "o"
    s = _SUPER_RUN.sub(lambda m: "^{" + m.group().lstrip("^") + "}", s)  # before NFKC, which reads x² as x2
    s = _SUB_RUN.sub(lambda m: "_{" + m.group().lstrip("_") + "}", s)
    s = unicodedata.normalize("NFKC", s).translate(_SYMBOLS)
    if any(root in s for root in _ROOTS):
        s = _roots(s)
    if s.isascii():
        return s
    return "".join(str(unicodedata.decimal(ch)) if not ch.isascii() and ch.isdecimal() else ch for ch in s)


def _vulgar(m: re.Match[str]) -> str:
    """``½`` -> ``\\frac{1}{2}``; after a whole number a mixed number: ``2½`` -> ``\\frac{5}{2}``."""
    num, _, den = unicodedata.normalize("NFKC", m.group(2)).partition("⁄")
    value = Fraction(int(num), int(den)) + (int(m.group(1)) if m.group(1) else 0)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _roots(s: str) -> str:
    """``√2`` -> ``\\sqrt{2}``, ``√(x+1)`` -> ``\\sqrt{x+1}``, ``∛x`` -> ``\\sqrt[3]{x}``: the operand is the
    bracketed group, number, letter or command right after the sign; a sign with none stays ``\\sqrt``."""
    out = []
    i = 0
    while i < len(s):
        root = _ROOTS.get(s[i])
        i += 1
        if root is None:
            out.append(s[i - 1])
            continue
        j = i
        while j < len(s) and s[j] == " ":
            j += 1
        if j < len(s) and s[j] in "({[":
            close = _closing(s, j)
            if close is not None:
                out.append(f"{root}{{{s[j + 1 : close]}}}")
                i = close + 1
                continue
        m = _ROOT_OPERAND.match(s, i)
        out.append(f"{root}{{{m.group(1)}}}" if m else root)
        i = m.end() if m else i
    return "".join(out)


def _closing(s: str, start: int) -> int | None:
    """Where the bracket opened at START closes (any of ``)}]`` closes any of ``({[``), or None."""
    depth = 0
    for k in range(start, len(s)):
        if s[k] in "({[":
            depth += 1
        elif s[k] in ")}]":
            depth -= 1
            if depth == 0:
                return k
    return None


def normalize_answer(text: str) -> str:
    """A conservative canonical string for an answer (never changes its mathematical meaning)."""
    s = strip_math_delimiters(fold_unicode(str(text)))
    s = s.strip("$").strip()
    s = re.sub(r"\\+(?=[a-zA-Z{}(),\[\]%])", r"\\", s)  # collapse doubled backslashes from JSON escaping
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _DEGREES.sub("", s)
    s = _TEXT.sub(r"\1", s)
    s = _SPACES.sub("", s)
    s = _ONE_CHAR_GROUP.sub(r"\1\2", s)
    s = _THOUSANDS.sub("", s)
    s = _LEADING_VAR.sub("", s)
    s = s.rstrip(".")
    return s


@dataclass(frozen=True)
class Reading:
    """One way to read an answer: `norm` for string and number comparison, `text` for math-verify."""

    norm: str
    text: str


def readings(answer: str) -> list[Reading]:
    """The readings of an answer: itself, and for a percentage its number and its fraction (``50\\%`` reads as
    ``50`` and as ``0.5``, as Qwen2.5-Math's grader accepts both)."""
    text = strip_math_delimiters(fold_unicode(str(answer))).strip("$").strip()
    norm = normalize_answer(text)
    m = _PERCENT.match(norm)
    if m is None or not m.group(1):
        return [Reading(norm, text)]
    number, number_text = m.group(1), _PERCENT_TEXT.sub("", text).strip()
    value = as_number(number)
    fraction = _decimal(value / 100) if value is not None else f"\\frac{{{number}}}{{100}}"
    return [Reading(number, number_text), Reading(fraction, f"\\frac{{{number_text}}}{{100}}")]


def _decimal(value: Fraction) -> str:
    """An exact decimal (value/100 of a decimal is one) or a fraction."""
    for digits in range(0, 40):
        scaled = value * 10**digits
        if scaled.denominator == 1:
            text = str(abs(scaled.numerator)).rjust(digits + 1, "0")
            body = f"{text[:-digits]}.{text[-digits:]}" if digits else text
            return ("-" if value < 0 else "") + body
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def as_number(normalized: str) -> Fraction | None:
    """The exact value of a plain numeral (``-12``, ``0.5``, ``\\frac{3}{4}``, ``3/4``, ``1e-3``,
    ``2.5\\times10^{4}``, ``10^{-3}``, ``5!!``, ``6!``) or of a small arithmetic expression of them (``3^{2}``,
    ``\\frac{1}{\\frac{1}{2}}``, ``2\\times3+1``: `arith`), else None."""
    if len(normalized) > MAX_NUMBER_CHARS:
        return None
    if _NUMBER.fullmatch(normalized):
        return Fraction(normalized)
    m = _SCIENTIFIC.fullmatch(normalized)
    if m is not None:
        mantissa = m.group("m") or m.group("m2") or "1"
        exponent = int(m.group("e") or m.group("e2") or m.group("e3"))
        return Fraction(mantissa) * Fraction(10) ** exponent if abs(exponent) <= MAX_EXPONENT else None
    m = _FACTORIALS.fullmatch(normalized)
    if m is not None:
        return factorial_value(int(m.group(1)), double=m.group(2) == "!!", max_digits=MAX_FACTORIAL_DIGITS)
    m = _FRACTION.fullmatch(normalized)
    if m is None:
        return exact_value(normalized)  # 3^{2}, \frac{1}{\frac{1}{2}}, 2\times3+1
    sign, num, den = (m.group(1), m.group(2), m.group(3)) if m.group(2) else ("", m.group(4), m.group(5))
    if int(den) == 0:
        return None
    value = Fraction(int(num), int(den))
    return -value if sign else value


def is_decimal(normalized: str) -> bool:
    """A numeral with a decimal point: math-verify compares those rounded, so only equality is decided here."""
    return "." in normalized


def factorial_value(n: int, *, double: bool = False, max_digits: int = WRITTEN_OUT_DIGITS) -> Fraction | None:
    """n! or n!! (the product of n, n-2, n-4, ...), when it has at most `max_digits` digits."""
    value, bound = 1, 10**max_digits
    for k in range(n, 1, -2 if double else -1):
        value *= k
        if value >= bound:
            return None
    return Fraction(value)


def for_math_verify(text: str) -> str:
    """An answer as math-verify should read it: scientific notation as a power of ten (it reads ``1e-3`` as
    ``e - 3``), and ``n!!``/``n!`` written out when small (it reads ``n!!`` as ``(n!)!``)."""
    text = _E_NOTATION.sub(lambda m: f"{m.group(1)}\\times10^{{{int(m.group(2))}}}", text)

    def written_out(m: re.Match[str]) -> str:
        value = factorial_value(int(m.group(1)), double=m.group(2) == "!!")
        return m.group() if value is None else f"({value})"

    return _FACTORIALS.sub(written_out, text) if "!" in text else text
