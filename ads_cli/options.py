"""CLI flags generated from the config tree (`ads_core.config`), so an option is declared exactly once.

Every field of a section becomes `--field-name` (or the field's `flag` extra), with the field's help and
default; tuning knobs marked `cli: False` are set with `--set section.field=value` or in a YAML file
given with `--config`. Precedence: defaults < `--config` < `--set` < explicit flags.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError

from ads_cli.common import fail, parse_assignments
from ads_core.config import BuildConfig

SHORT_FLAGS = {"cluster.num_clusters": "-k"}


def _option_type(annotation: Any) -> Any:
    """A type typer can parse; pydantic validates the value afterwards (Literal choices included)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return str
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _option_type(args[0])
    return annotation if annotation in (str, int, float, bool) else str


def flag_of(section: str, name: str, field: Any) -> str:
    extra = field.json_schema_extra or {}
    return str(extra.get("flag") or "--" + name.replace("_", "-"))


def cli_flag(field_name: str) -> str:
    """The flag of a config field named in a library message (`question_col` -> `--question-col`)."""
    for section, name, field in cli_fields(tuple(BuildConfig.model_fields)):
        if name == field_name:
            return flag_of(section, name, field).split("/")[0]
    return "--set <section>." + field_name


def cli_fields(sections: tuple[str, ...]) -> list[tuple[str, str, Any]]:
    """(section, field name, FieldInfo) of every field that has a flag of its own."""
    found = []
    for section in sections:
        model: type[BaseModel] = BuildConfig.model_fields[section].annotation  # type: ignore[assignment]
        for name, field in model.model_fields.items():
            if (field.json_schema_extra or {}).get("cli", True):
                found.append((section, name, field))
    return found


def _help(field: Any) -> str:
    text = field.description or ""
    literal = [a for a in typing.get_args(field.annotation) if isinstance(a, str)]
    if typing.get_origin(field.annotation) is typing.Literal and literal:
        text += f" One of: {', '.join(literal)}."
    default = field.get_default(call_default_factory=True)
    return f"{text} (default: {default})" if default is not None else text


def config_parameters(sections: tuple[str, ...]) -> list[inspect.Parameter]:
    """Typer parameters for the fields of `sections`, named `section__field`; all default to None (unset)."""
    params = []
    for section, name, field in cli_fields(sections):
        decls = [flag_of(section, name, field)]
        if f"{section}.{name}" in SHORT_FLAGS:
            decls.append(SHORT_FLAGS[f"{section}.{name}"])
        kind = _option_type(field.annotation)
        option = typer.Option(*decls, help=_help(field), show_default=False, rich_help_panel=f"{section} options")
        params.append(
            inspect.Parameter(
                f"{section}__{name}",
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[kind | None, option],
            )
        )
    return params


COMMON_PARAMETERS = [
    inspect.Parameter(
        "config_file",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            Path | None,
            typer.Option(
                "--config",
                help="YAML file with config sections (format:, score:, "
                "cluster:, report:, run:), e.g. written from `ads build --show-config`.",
            ),
        ],
    ),
    inspect.Parameter(
        "assignments",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[str] | None,
            typer.Option(
                "--set", help="Any option as section.field=value (YAML value), repeatable, e.g. --set cluster.n_init=4."
            ),
        ],
    ),
]


def resolve_config(values: dict[str, Any], config_file: Path | None, assignments: list[str] | None) -> BuildConfig:
    """Defaults < YAML file < --set < flags; errors name the flag (or the section.field) to fix."""
    import yaml

    data: dict[str, Any] = {}
    if config_file is not None:
        try:
            data = yaml.safe_load(config_file.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise fail(f"{config_file}: cannot read the config file: {exc}") from None
        if not isinstance(data, dict):
            raise fail(f"{config_file}: expected a mapping of sections (format:, score:, cluster:, ...)")
    overrides = dict(parse_assignments(assignments, "--set"))
    overrides.update({k.replace("__", "."): v for k, v in values.items() if v is not None})
    try:
        return BuildConfig.model_validate(data).with_overrides(overrides)
    except ValidationError as exc:
        raise fail(validation_message(exc)) from None
    except ValueError as exc:
        raise fail(str(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """`--clusters: Input should be greater than or equal to 1 (got 0)`, one clause per error."""
    flags = {f"{s}.{n}": flag_of(s, n, f) for s, n, f in cli_fields(tuple(BuildConfig.model_fields))}
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{flags.get(loc, loc)}: {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)


def with_signature(func: Callable[..., Any], extra: list[inspect.Parameter]) -> Callable[..., Any]:
    """`func` with its own parameters plus `extra` (typer reads `__signature__`)."""
    params = inspect.signature(func, eval_str=True).parameters.values()
    own = [p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD]
    func.__signature__ = inspect.Signature(own + extra)  # type: ignore[attr-defined]
    return func
