"""A cheap look at an answer before sympy sees it: refuse what would take sympy minutes or all memory.

sympy evaluates numbers exactly, so ``9^{9^{9^{9}}}``, ``2^{1000000000}``, ``((5!)!)!`` or ``10^{-10^{10}}``
never finish, and Python's big-integer arithmetic cannot be interrupted even by a signal. This module estimates,
without evaluating anything big, how many digits such an expression has: numbers are tracked by their base-10
logarithm, so a tower is refused once its exponent alone is too large. What it does not understand it lets
through; the verifier's hard time limit covers the rest.
"""

from __future__ import annotations

import math
import re

MAX_ANSWER_CHARS = 400  # an answer this long is junk (or an essay): never parsed
MAX_DEPTH = 12  # nesting of {[( -- legit answers stay under 5
MAX_DIGITS = 10_000.0  # an exact number with more digits than this is refused
MAX_SYMBOLIC_EXPONENT = 1_000.0  # x^{N}, e^{N}, \sum^{N}: N above this is refused
MAX_FACTORIAL = 3_000.0  # n! beyond this has over ~9000 digits

_TOKEN = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+|\\[a-zA-Z]+|\\.|.)", re.DOTALL)
_TIMES = {"\\cdot", "\\times", "*"}
_CLOSERS = {"{": ("}",), "(": (")", "]"), "[": ("]", ")")}


class _Big(Exception):
    """Raised when an estimate already exceeds the limits."""


def too_complex(answer: str) -> str | None:
    """Why ANSWER must not reach sympy (a short phrase), or None when it may."""
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer longer than {MAX_ANSWER_CHARS} characters"
    depth = deepest = 0
    for ch in answer:
        if ch in "{[(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}])":
            depth -= 1
    if deepest > MAX_DEPTH:
        return f"nesting deeper than {MAX_DEPTH}"
    if "^" not in answer and "!" not in answer:
        return None
    try:
        _Estimator(answer).run()
    except _Big as exc:
        return str(exc)
    return None


class _Estimator:
    """A recursive-descent reader of the arithmetic part of LaTeX that tracks log10|value| of numeric parts.

    Values are (log10 of the magnitude, or None for non-numeric/unknown). Anything it cannot read is unknown,
    which is never refused by itself; only powers and factorials whose size can be bounded are judged.
    """

    def __init__(self, text: str) -> None:
        self.tokens = [t for t in _TOKEN.findall(text) if t.strip()]
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.i += 1
        return tok

    def run(self) -> None:
        while self.peek() is not None:
            self.expr()
            self.take()  # whatever stopped the expression (an unmatched closer, a comma)

    def expr(self) -> float | None:
        """Sums and products at one level; returns an upper bound of log10|value| or None."""
        total: float | None = None
        first = True
        while (tok := self.peek()) is not None and tok not in ("}", ")", "]", ","):
            if tok in ("+", "-"):
                self.take()
                continue
            if tok in _TIMES or tok == "/":
                self.take()
            value = self.factor()
            if first:
                total, first = value, False
            elif total is not None and value is not None:
                total = max(total, 0.0) + max(value, 0.0) + 1.0  # |a op b| <= 10 * max(1,|a|) * max(1,|b|)
            else:
                total = None
        return total

    def factor(self) -> float | None:
        base = self.atom()
        while (tok := self.peek()) in ("^", "!"):
            self.take()
            if tok == "!":
                base = self.factorial(base)
            else:
                exponent = self.exponent_value()
                base = self.power(base, exponent)
        return base

    def factorial(self, log_n: float | None) -> float | None:
        if log_n is None:
            return None
        if log_n > math.log10(MAX_FACTORIAL):
            raise _Big("factorial too large")
        n = 10**log_n
        return math.lgamma(n + 1) / math.log(10) if n > 1 else 0.0

    def exponent_value(self) -> tuple[float | None, bool]:
        """(log10 of |exponent|, whether it is numeric) of the group or token after ``^``."""
        tok = self.peek()
        if tok == "{":
            self.take()
            value = self.expr()
            self._close("{")
            return value, value is not None
        return self.factor_single(), True

    def factor_single(self) -> float | None:
        tok = self.take()
        if tok is None:
            return None
        return _log10_literal(tok)

    def power(self, log_base: float | None, exponent: tuple[float | None, bool]) -> float | None:
        log_exp, numeric = exponent
        if log_exp is None:
            return None
        if log_base is None:  # x^{N}, e^{N}
            if log_exp > math.log10(MAX_SYMBOLIC_EXPONENT):
                raise _Big("exponent too large")
            return None
        if log_exp > math.log10(MAX_DIGITS) + 2:  # 10^{-10^{10}} as much as 2^{10^{9}}: a tower
            if log_base > 0:
                raise _Big("power too large")
        size = 10**log_exp * abs(log_base) if log_base != -math.inf else 0.0  # digits of the result (or 1/it)
        if size > MAX_DIGITS:
            raise _Big("power too large")
        return size

    def atom(self) -> float | None:
        tok = self.take()
        if tok is None:
            return None
        if tok in _CLOSERS:
            value = self.expr()
            while self.peek() == ",":  # a tuple or interval: read every element
                self.take()
                other = self.expr()
                value = None if value is None or other is None else max(value, other)
            self._close(tok)
            return value
        if tok == "\\frac":
            num = self.atom()
            den = self.atom()
            return None if num is None or den is None else max(num, 0.0) + max(-den, 0.0) + 1.0
        if tok in ("\\left", "\\right"):
            return self.atom()
        return _log10_literal(tok)

    def _close(self, opener: str) -> None:
        """Skip to the closer of OPENER's group (``(2, 5]`` closes a round bracket with a square one)."""
        while (tok := self.take()) is not None and tok not in _CLOSERS[opener]:
            if tok in _CLOSERS:  # a nested group we did not read
                self._close(tok)


def _log10_literal(tok: str) -> float | None:
    if tok[0].isdigit() or tok[0] == ".":
        value = float(tok) if len(tok) < 300 else 10.0 ** min(len(tok), 300)
        return math.log10(value) if value > 0 else -math.inf
    return None
