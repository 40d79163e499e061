"""Errors that tell the user what to change, in each interface's own spelling.

A library message names an option by its config field (`set question_col`, `use dry_run`); the CLI
renders it as `--question-col`, a flow run as `format.question_col=`. `OptionError.render(spell)` does
that for the fields listed in `options`; `str()` is the neutral text. It is the one mechanism for
"an error that names an option", used by input, artifact, training and launch errors alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable


def render_options(message: str, options: Iterable[str], spell: Callable[[str], str]) -> str:
    """MESSAGE with each option name in OPTIONS (a whole word) replaced by SPELL(name)."""
    names = sorted(set(options), key=len, reverse=True)
    if not names:
        return message
    # not inside a dotted key, a path, a hyphenated word or a quoted value
    pattern = re.compile(r"(?<![\w./'\"-])(" + "|".join(map(re.escape, names)) + r")(?![\w/'\"-])")
    return pattern.sub(lambda m: spell(m.group(1)), message)


class OptionError(Exception):
    """An error whose one-line message may name options (config fields) for the user to set."""

    def __init__(self, message: str, options: Iterable[str] = (), original: OptionError | None = None) -> None:
        message = " ".join(str(message).split())  # one line, even when it quotes a multi-line library error
        super().__init__(message)
        self.message = message
        self.options = tuple(options)
        self.original = original  # the library's error, when an interface re-raised it in its own spelling

    def __reduce__(self) -> tuple[type[OptionError], tuple[str, tuple[str, ...]]]:
        """Pickles (Prefect ships exceptions between processes) with its options."""
        return (type(self), (self.message, self.options))

    def render(self, spell: Callable[[str], str]) -> str:
        """The message with every option in `options` spelled by SPELL."""
        if self.original is not None:
            return self.original.render(spell)
        return render_options(self.message, self.options, spell)


class InputError(OptionError):
    """Input that cannot be used at all (a file, a row, a field, an option value); the CLI exits 2."""
