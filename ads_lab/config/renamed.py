"""Keys a lab config once had: one a user still writes (a `--config` YAML, `--set`, a flow parameter) is refused in
one line that names what to write instead, never an "unknown option" that leaves them guessing. The run keys of
the demo and the studies hash a config under its old key names (`dump_as_before`), so runs finished before a
rename are still reused."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from ads_core.config.base import Section


class RenamedKeys(Section):
    """A section whose ``renamed`` maps each old top-level key to the field that replaced it."""

    renamed: ClassVar[dict[str, str]] = {}

    @classmethod
    def renamed_message(cls, old: str) -> str:
        """`'clusters' was renamed: write num_clusters instead (flag --clusters)`."""
        new = cls.renamed[old]
        flag = (cls.model_fields[new].json_schema_extra or {}).get("flag")  # type: ignore[union-attr]
        return f"{old!r} was renamed: write {new} instead" + (f" (flag {flag})" if flag else "")

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


def dump_as_before(cfg: RenamedKeys, **dump: Any) -> dict[str, Any]:
    """CFG's `model_dump(**DUMP)` with every renamed field under its old key, for the keys that say whether a run
    finished with these settings (the same settings, the same key, before and after a rename)."""
    data = cfg.model_dump(**dump)
    for old, new in cfg.renamed.items():
        if new in data:
            data[old] = data.pop(new)
    return data
