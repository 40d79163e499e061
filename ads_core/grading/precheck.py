r"""A cheap look at an answer before sympy sees it: refuse what would take sympy minutes or all memory.

sympy evaluates numbers exactly, so ``9^{9^{9^{9}}}``, ``2^{1000000000}``, ``((5!)!)!`` or ``10^{-10^{10}}``
never finish, and Python's big-integer arithmetic cannot be interrupted even by a signal. This module estimates,
without evaluating anything big, how many digits such an expression has: numbers are tracked by their base-10
logarithm, so a tower is refused once its exponent alone is too large. ``e`` and ``\pi`` are numbers here
(``e^{e^{e^{10}}}``), ``n!!`` is a double factorial, ``\Gamma(x)`` is at most ``x!``, ``\binom{n}{k}`` has the
digits of its value, and a sum, product or integral with a bound past `MAX_BOUND` or a sine of a huge argument is
refused: each is seconds of sympy for an answer no problem has. What it does not understand it lets through;
the verifier's CPU budget and deadline cover the rest. A refusal is the same verdict in every context, which is
why answers that take sympy long are refused here rather than raced against the clock.
"""

from __future__ import annotations

import math
import re

MAX_ANSWER_CHARS = 400  # an answer this long is junk (or an essay): never parsed
MAX_DEPTH = 12  # nesting of {[( -- legit answers stay under 5
MAX_DIGITS = 10_000.0  # an exact number with more digits than this is refused
MAX_SYMBOLIC_EXPONENT = 1_000.0  # x^{N}, e^{N}, \sum^{N}: N above this is refused
MAX_FACTORIAL = 3_000.0  # n! beyond this has over ~9000 digits (n!! beyond twice this)
MAX_BOUND = 1_000.0  # \sum, \prod, \int with a numeric bound beyond this are refused
MAX_TRIG_ARGUMENT = 1e15  # \sin(10^{100}) needs 100 digits of pi

_TOKEN = re.compile(r"\s*(!!|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|\\[a-zA-Z]+|\\.|.)", re.DOTALL | re.ASCII)
_CONSTANTS = {"e": math.log10(math.e), "\\pi": math.log10(math.pi)}
_BIG_OPERATORS = {"\\sum", "\\prod", "\\int", "\\iint", "\\iiint", "\\oint"}
_BINOMIALS = {"\\binom", "\\dbinom", "\\tbinom"}
_TRIG = {"\\sin", "\\cos", "\\tan", "\\cot", "\\sec", "\\csc"}
_TIMES = {"\\cdot", "\\times", "*"}
_CLOSERS = {"{": ("}",), "(": (")", "]"), "[": ("]", ")")}


class _Big(Exception):
    """Raised when an estimate already exceeds the limits."""


def too_complex(answer: str) -> str | None:
    """Why ANSWER must not reach sympy (a short phrase), or None when it may. Never raises: what it cannot read
    it lets through (the checker's CPU budget and deadline still hold)."""
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
    try:
        _Estimator(answer).run()
    except _Big as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - unreadable here is not a refusal
        return None
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
        constant = self.peek() in _CONSTANTS
        base = self.atom()
        while (tok := self.peek()) in ("^", "!", "!!"):
            self.take()
            if tok == "!":
                base = self.factorial(base)
            elif tok == "!!":
                base = self.factorial(base, double=True)
            else:
                exponent = self.exponent_value()
                if constant and exponent[0] is not None and exponent[0] > math.log10(MAX_SYMBOLIC_EXPONENT):
                    raise _Big("exponent too large")  # e^{N} stays symbolic in sympy, like x^{N}
                base = self.power(base, exponent)
            constant = False
        return base

    def factorial(self, log_n: float | None, double: bool = False) -> float | None:
        if log_n is None:
            return None
        if log_n > math.log10(MAX_FACTORIAL * (2 if double else 1)):
            raise _Big("factorial too large")
        n = 10**log_n
        digits = math.lgamma(n + 1) / math.log(10) if n > 1 else 0.0
        return digits / 2 + 1 if double else digits  # n!! <= sqrt(n!) * sqrt(n) roughly: half the digits

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
        if tok in _CONSTANTS:
            return _CONSTANTS[tok]
        if tok == "\\Gamma":  # Gamma(x) = (x-1)! <= x!
            return self.factorial(self.atom())
        if tok in _BINOMIALS:
            return self.binomial(self.atom(), self.atom())
        if tok in _BIG_OPERATORS:
            self.bounds()
            return None
        if tok in _TRIG:
            argument = self.atom()
            if argument is not None and argument > math.log10(MAX_TRIG_ARGUMENT):
                raise _Big("trigonometric argument too large")
            return 0.0
        value = _log10_literal(tok)
        if value is not None and value > MAX_DIGITS:
            raise _Big("number too large")
        return value

    def binomial(self, log_n: float | None, log_k: float | None) -> float | None:
        if log_n is None:
            return None
        n = 10 ** min(log_n, 300.0)
        k = 10 ** min(log_k, 300.0) if log_k is not None else n / 2
        k = min(max(k, 0.0), n)
        digits = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(10)
        if digits > MAX_DIGITS:
            raise _Big("binomial coefficient too large")
        return digits

    def bounds(self) -> None:
        """The ``_{a}^{b}`` after a sum, product or integral: refuse a numeric bound past MAX_BOUND."""
        while self.peek() in ("_", "^"):
            self.take()
            value, numeric = self.exponent_value() if self.peek() != "{" else self.group_bound()
            if numeric and value is not None and value > math.log10(MAX_BOUND):
                raise _Big("bound too large")

    def group_bound(self) -> tuple[float | None, bool]:
        """A braced bound, ``{k=1}`` included: the value after its last ``=``."""
        self.take()
        value = self.expr()
        while self.peek() == "=":
            self.take()
            value = self.expr()
        self._close("{")
        return value, value is not None

    def _close(self, opener: str) -> None:
        """Skip to the closer of OPENER's group (``(2, 5]`` closes a round bracket with a square one)."""
        while (tok := self.take()) is not None and tok not in _CLOSERS[opener]:
            if tok in _CLOSERS:  # a nested group we did not read
                self._close(tok)


def _log10_literal(tok: str) -> float | None:
    if tok[0] in "0123456789.":  # ASCII only: str.isdigit is true for ² too, which float() refuses
        mantissa, _, exponent = tok.lower().partition("e")
        digits = mantissa if len(mantissa) < 300 else "1" + "0" * 300
        value = float(digits)
        if value <= 0:
            return -math.inf
        return math.log10(value) + (int(exponent) if exponent and len(exponent) < 12 else 0)
    return None
