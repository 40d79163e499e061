"""Names that become parts of paths (dataset names) can never leave the output root."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ads_core.common.names import safe_name
from ads_core.config.build import FormatConfig


@pytest.mark.parametrize(
    "bad", ["../../../x", "..", ".", "a/b", "a\\b", "/abs", "~user", "C:x", "", "  ", "a\x00b", "x" * 201]
)
def test_names_that_could_escape_or_break_a_path_are_refused(bad: str):
    with pytest.raises(ValueError):
        safe_name(bad)
    with pytest.raises(ValidationError):
        FormatConfig(name=bad)


@pytest.mark.parametrize("good", ["myds", "gsm8k_sample", "MATH-500", "aime 2024", "v1.2"])
def test_plain_names_pass_unchanged(good: str):
    assert safe_name(good) == good == FormatConfig(name=good).name
