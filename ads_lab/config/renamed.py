"""Keys a lab config once had: one a user still writes (a `--config` YAML, `--set`, a flow parameter) is refused in
one line that names what to write instead, never an "unknown option" that leaves them guessing."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from ads_core.config.base import Section


class RenamedKeys(Section):
    """A section whose ``renamed`` maps its old top-level keys to what replaced them (a key, or a key and its flag)."""

    renamed: ClassVar[dict[str, str]] = {}

    @classmethod
    def renamed_message(cls, old: str) -> str:
        return f"{old!r} was renamed: write {cls.renamed[old]} instead"

    @model_validator(mode="before")
    @classmethod
    def _refuse_renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old in sorted(cls.renamed.keys() & data.keys()):
                raise PydanticCustomError("renamed_option", cls.renamed_message(old))
        return data

    def with_overrides(self, assignments: dict[str, Any]) -> Self:
        for dotted in assignments:
            if dotted.split(".")[0] in self.renamed:
                raise ValueError(self.renamed_message(dotted.split(".")[0]))
        return super().with_overrides(assignments)
