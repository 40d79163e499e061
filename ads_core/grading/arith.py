r"""Exact values of small arithmetic answers (``3^{2}``, ``\frac{1}{\frac{1}{2}}``, ``2\times3+1``, ``\sqrt{16}``),
so that the grader decides them here, in microseconds, without math-verify (and so within the limit even in a
process whose verifier is still starting).

Only what has one reading is evaluated: numbers, ``+ - * / \times \cdot \div``, brackets and braces,
``\frac{a}{b}`` (``\frac12`` too), powers with an integer exponent, and square roots of perfect squares. No
implicit multiplication, no symbols: anything else is None and goes on as before. Sizes are bounded (a power of
more than `MAX_DIGITS` digits is None, for the pre-check to judge), so this never takes long.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_DIGITS = 10_000  # a power with more digits than this is not evaluated here (the pre-check refuses it)
MAX_EXPONENT = 100_000
_TOKEN = re.compile(r"\d+(?:\.\d*)?|\.\d+|\\[a-zA-Z]+|\S", re.ASCII)
_TIMES = {"*", "\\times", "\\cdot"}
_DIVIDE = {"/", "\\div"}
_CLOSE = {"(": ")", "{": "}"}  # not [ ]: [5] may be an interval or a list


class _Unreadable(Exception):
    """Not an expression this module evaluates."""


def exact_value(normalized: str) -> Fraction | None:
    """The exact value of an arithmetic answer (already normalised: no spaces), or None."""
    tokens = _TOKEN.findall(normalized)
    if not tokens:
        return None
    reader = _Reader(tokens)
    try:
        value = reader.expr()
    except (_Unreadable, ZeroDivisionError, OverflowError, ValueError, RecursionError):
        return None
    return value if reader.i == len(tokens) else None


class _Reader:
    """Recursive descent: expr := term (+|- term)*; term := unary (op unary)*; unary := -unary | power;
    power := atom (^ exponent)?."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.i = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise _Unreadable("the answer ends early")
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while (tok := self.peek()) in ("+", "-"):
            self.take()
            value = value + self.term() if tok == "+" else value - self.term()
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while (tok := self.peek()) in _TIMES or tok in _DIVIDE:
            self.take()
            other = self.unary()
            value = value * other if tok in _TIMES else value / other
            _bounded(value)
        return value

    def unary(self) -> Fraction:
        tok = self.peek()
        if tok in ("-", "+"):
            self.take()
            return -self.unary() if tok == "-" else self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.group() if self.peek() == "{" else self.digit()
        if exponent.denominator != 1 or abs(exponent) > MAX_EXPONENT:
            raise _Unreadable("not an integer exponent")
        size = max(abs(base.numerator), base.denominator, 2)
        if abs(exponent) * math.log10(size) > MAX_DIGITS:
            raise _Unreadable("too large to evaluate here")
        return base ** int(exponent)

    def atom(self) -> Fraction:
        tok = self.take()
        if tok[0] in "0123456789.":
            return Fraction(tok)
        if tok in _CLOSE:
            value = self.expr()
            if self.take() != _CLOSE[tok]:
                raise _Unreadable("unbalanced")
            return value
        if tok == "\\frac":
            num = self.group() if self.peek() == "{" else self.digit()
            den = self.group() if self.peek() == "{" else self.digit()
            return num / den
        if tok == "\\sqrt" and self.peek() == "{":
            return _exact_sqrt(self.group())
        raise _Unreadable(tok)

    def group(self) -> Fraction:
        self.take()  # "{"
        value = self.expr()
        if self.take() != "}":
            raise _Unreadable("unbalanced")
        return value

    def digit(self) -> Fraction:
        """One digit, as TeX reads ``\\frac12`` and ``x^23`` (the first digit only)."""
        tok = self.take()
        if not tok.isdigit():
            raise _Unreadable(tok)
        self.tokens[self.i - 1 : self.i] = [tok[0], *([tok[1:]] if len(tok) > 1 else [])]
        return Fraction(int(tok[0]))


def _exact_sqrt(value: Fraction) -> Fraction:
    if value < 0:
        raise _Unreadable("not a real number")
    num, den = math.isqrt(value.numerator), math.isqrt(value.denominator)
    if num * num != value.numerator or den * den != value.denominator:
        raise _Unreadable("irrational")
    return Fraction(num, den)


def _bounded(value: Fraction) -> None:
    if max(abs(value.numerator), value.denominator).bit_length() > MAX_DIGITS * 4:
        raise _Unreadable("too large to evaluate here")
