"""What every config section shares: strict fields, one-line validation errors, the CLI flag hints.

Each option is one pydantic field with its type, bounds, default and help. A field's
`json_schema_extra={"flag": ...}` names its CLI flag when the field name alone would be unclear
(`--clusters` for `cluster.num_clusters`); `{"cli": False}` keeps a tuning knob out of the flags (it stays
settable with `--set section.field=value`, in a `--config` YAML and in the flow parameters).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError


def tuning(**kw: Any) -> Any:
    """A field that is in the config and the flow, but not a CLI flag of its own (use --set)."""
    return Field(json_schema_extra={"cli": False}, **kw)


class Section(BaseModel):
    """A config section: unknown keys are refused, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def replaced(self, **changes: Any) -> Self:
        """A validated copy with some fields changed (`model_copy` would skip validation); fields left at their
        default stay unset (see `with_overrides`)."""
        return type(self).model_validate({**self.model_dump(exclude_unset=True), **changes})

    def with_overrides(self, assignments: dict[str, Any]) -> Self:
        """A validated copy with dotted fields replaced: `{"cluster.n_init": 4, "sampler.ads.alpha": 0.5}`.

        Fields left at their default stay unset in the copy (`model_fields_set`), so a default that depends on
        context (TRL's `mini_cluster_size`, a trainer's `ads_defaults`) still applies to them.
        """
        full = self.model_dump()
        data = self.model_dump(exclude_unset=True)
        for dotted, value in assignments.items():
            node, parts = full, dotted.split(".")
            for part in parts[:-1]:
                if not isinstance(node.get(part), dict):
                    node = None
                    break
                node = node[part]
            if node is None or parts[-1] not in node or isinstance(node[parts[-1]], dict):
                sections = [k for k, v in full.items() if isinstance(v, dict)]
                raise ValueError(
                    f"unknown option {dotted!r}; options look like section.field"
                    + (f", sections {', '.join(sections)}" if sections else "")
                )
            target = data
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
        return type(self).model_validate(data)


class FrozenSection(Section):
    """A section whose instances never change (the samplers keep theirs for a whole run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def error_line(exc: ValidationError, prefix: str = "") -> str:
    """A pydantic error as one line naming each bad field (`alpha: Input should be <= 1, got 2.0`)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "value"
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f", got {got!r}"
        parts.append(f"{prefix}{where}: {err['msg']}{shown}")
    return "; ".join(parts)


def options_problem(options: Any) -> str | None:
    """Why OPTIONS can't be a plug-in's options class, or None: it is not a pydantic model, or its defaults fail
    its own validation (a section is made from its defaults unvalidated, so `Field(0, ge=1)` would run with 0)."""
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        return f"its options {options!r} are not a pydantic model (an ads_core.config.base.Section)"
    try:
        options.model_validate(options().model_dump())
    except ValidationError as exc:
        name = f"{options.__module__}.{options.__qualname__}"
        return f"the defaults of its options {name} fail their own validation: {error_line(exc)}"
    return None
