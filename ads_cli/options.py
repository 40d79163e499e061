"""CLI flags generated from the config tree (`ads_core.config`), so an option is declared exactly once.

Every field of a chosen section becomes `--field-name` (or the field's `flag` extra), with the field's help and
default; section "" stands for the root model's own fields. Tuning knobs marked `cli: False`, and nested
sections, are set with `--set section.field=value` or in a YAML file given with `--config`.
Precedence: defaults < `--config` < `--set` < explicit flags.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from ads_cli.common import fail, parse_assignments

SHORT_FLAGS = {"cluster.num_clusters": "-k"}
M = TypeVar("M", bound=BaseModel)


def _option_type(annotation: Any) -> Any:
    """A type typer can parse; pydantic validates the value afterwards (Literal choices included)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return str
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _option_type(args[0])
    return annotation if annotation in (str, int, float, bool) else str


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def flag_of(field_name: str, field: Any) -> str:
    extra = field.json_schema_extra or {}
    return str(extra.get("flag") or "--" + field_name.replace("_", "-"))


def section_model(root: type[BaseModel], section: str) -> type[BaseModel]:
    model = root
    for part in filter(None, section.split(".")):
        model = model.model_fields[part].annotation  # type: ignore[assignment]
    return model


def cli_fields(
    root: type[BaseModel], sections: tuple[str, ...], exclude: tuple[str, ...] = ()
) -> list[tuple[str, str, Any]]:
    """(dotted section, field name, FieldInfo) of every field of SECTIONS that has a flag of its own."""
    found = []
    for section in sections:
        for name, field in section_model(root, section).model_fields.items():
            wanted = (field.json_schema_extra or {}).get("cli", True) and dotted(section, name) not in exclude
            if wanted and not _is_section(field.annotation):
                found.append((section, name, field))
    return found


def dotted(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def _help(field: Any, default: Any) -> str:
    text = field.description or ""
    literal = [a for a in typing.get_args(field.annotation) if isinstance(a, str)]
    if typing.get_origin(field.annotation) is typing.Literal and literal:
        text += f" One of: {', '.join(literal)}."
    return f"{text} (default: {default})" if default is not None else text


_UNSET = object()


def root_defaults(root: type[BaseModel]) -> BaseModel | None:
    """ROOT as it is when the user sets nothing (None for a root with required fields)."""
    try:
        return root()
    except Exception:  # a root with required fields: its sections' own defaults are all there is
        return None


def effective_default(defaults: BaseModel | None, section: str, name: str, field: Any) -> Any:
    """What the field is when the user sets nothing: the root's own default for its section where it has one
    (`DemoConfig.task` sets the study's sizes), else the field's default."""
    value: Any = defaults
    for part in [*section.split("."), name] if section else [name]:
        value = getattr(value, part, _UNSET)
        if value is _UNSET:
            return field.get_default(call_default_factory=True)
    return value


def config_parameters(
    root: type[BaseModel], sections: tuple[str, ...], exclude: tuple[str, ...] = (), taken: tuple[str, ...] = ()
) -> list[inspect.Parameter]:
    """Typer parameters for the fields of `sections`, named `section__field`; all default to None (unset). A flag
    already used (by the command itself, TAKEN, or an earlier section: two plug-ins' fields of one name) is left
    out; its field stays settable with `--set section.field=value`."""
    params = []
    used = set(taken)
    defaults = root_defaults(root)  # once per command, not once per flag
    for section, name, field in cli_fields(root, sections, exclude):
        if flag_of(name, field) in used:
            continue
        used.add(flag_of(name, field))
        decls = [flag_of(name, field)]
        if dotted(section, name) in SHORT_FLAGS:
            decls.append(SHORT_FLAGS[dotted(section, name)])
        kind = _option_type(field.annotation)
        panel = f"{section} options" if section else "options"
        option = typer.Option(
            *decls,
            help=_help(field, effective_default(defaults, section, name, field)),
            show_default=False,
            rich_help_panel=panel,
        )
        params.append(
            inspect.Parameter(
                dotted(section, name).replace(".", "__"),
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[kind | None, option],
            )
        )
    return params


def common_parameters(root: type[BaseModel], example: str, written_by: str = "") -> list[inspect.Parameter]:
    """`--config FILE.yaml` and `--set section.field=value`, described for ROOT's sections."""
    sections = [n for n, f in root.model_fields.items() if _is_section(f.annotation)]
    return [
        inspect.Parameter(
            "config_file",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                Path | None,
                typer.Option(
                    "--config",
                    help="YAML file with the options"
                    + (f" (sections {', '.join(s + ':' for s in sections)})" if sections else "")
                    + (f", e.g. written by {written_by}." if written_by else "."),
                ),
            ],
        ),
        inspect.Parameter(
            "assignments",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                list[str] | None,
                typer.Option("--set", help=f"Any option as section.field=value (a YAML value), repeatable: {example}."),
            ],
        ),
    ]


def resolve_config(
    root: type[M],
    values: dict[str, Any],
    config_file: Path | None,
    assignments: list[str] | None,
    model_for: Callable[[dict[str, Any], dict[str, Any]], type[M]] | None = None,
) -> M:
    """Defaults < YAML file < --set < flags; errors name the flag (or the section.field) to fix. MODEL_FOR picks
    the config tree from what the YAML and the overrides choose (a plug-in named by class path adds its section)."""
    import yaml

    data: dict[str, Any] = {}
    if config_file is not None:
        try:
            data = yaml.safe_load(config_file.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise fail(f"{config_file}: cannot read the config file: {exc}") from None
        if not isinstance(data, dict):
            raise fail(f"{config_file}: expected a mapping of options")
    overrides = dict(parse_assignments(assignments, "--set"))
    overrides.update({k.replace("__", "."): v for k, v in values.items() if v is not None})
    try:
        if model_for is not None:
            root = model_for(data, overrides)
        return root.model_validate(data).with_overrides(overrides)  # type: ignore[attr-defined, no-any-return]
    except ValidationError as exc:
        raise fail(validation_message(root, exc)) from None
    except ValueError as exc:
        raise fail(str(exc)) from None


def flags_by_field(root: type[BaseModel]) -> dict[str, str]:
    """Dotted field -> its flag, for every flagged field of ROOT and of its sections (one level down)."""
    sections = ("", *(n for n, f in root.model_fields.items() if _is_section(f.annotation)))
    return {dotted(s, n): flag_of(n, f).split("/")[0] for s, n, f in cli_fields(root, sections)}


def validation_message(root: type[BaseModel], exc: ValidationError) -> str:
    """`--clusters: Input should be greater than or equal to 1 (got 0)`, one clause per error; an error about the
    whole config (a key it no longer has) is its message alone."""
    flags = flags_by_field(root)
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{flags.get(loc, loc)}: {err['msg']} (got {err.get('input')!r})" if loc else err["msg"])
    return "; ".join(parts)


def field_paths(root: type[BaseModel]) -> dict[str, str]:
    """Field name -> its dotted path, for every field of ROOT and of its sections at any depth, nearest the root
    first (`boundary_eps` -> `sampler.ads.boundary_eps`); a dotted path maps to itself."""
    out: dict[str, str] = {}
    level: list[tuple[str, type[BaseModel]]] = [("", root)]
    while level:
        deeper = []
        for prefix, model in level:
            for name, info in model.model_fields.items():
                path = dotted(prefix, name)
                out.setdefault(name, path)
                out[path] = path
                if _is_section(info.annotation):
                    deeper.append((path, info.annotation))
        level = deeper
    return out


def spell_field(
    root: type[BaseModel],
    own: Mapping[str, str] | None = None,
    shortcut: Callable[[str], str | None] | None = None,
) -> Callable[[str], str]:
    """How a command names a config field that a library message mentions, the one speller of every command:
    the command's OWN options first (`dry_run` -> `--dry-run`), then the field's flag (`question_col` ->
    `--question-col`), then a command's SHORTCUT for a dotted path (`ads train`'s `-s KEY`), else `--set PATH`."""
    flags, paths = flags_by_field(root), field_paths(root)

    def spell(field_name: str) -> str:
        if own and field_name in own:
            return own[field_name]
        path = paths.get(field_name, field_name)
        if path in flags:
            return flags[path]
        return (shortcut(path) if shortcut else None) or f"--set {path}"

    return spell


def with_signature(func: Callable[..., Any], extra: list[inspect.Parameter]) -> Callable[..., Any]:
    """`func` with its own parameters plus `extra` (typer reads `__signature__`)."""
    params = inspect.signature(func, eval_str=True).parameters.values()
    own = [p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD]
    func.own_parameters = own  # type: ignore[attr-defined] # for `command_with`
    func.__signature__ = inspect.Signature(own + extra)  # type: ignore[attr-defined]
    return func


def chosen_in(args: list[str], flags: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(YAML data, overrides) as far as ARGS choose the fields FLAGS name (flag -> dotted field: `--trainer` ->
    `trainer`), through those flags, `--set field=...` and the `--config` file; read before the command parses
    ARGS, so that a plug-in those fields name can add its flags."""
    import yaml

    data: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        if flag in flags:
            overrides[flags[flag]] = value
        elif flag == "--set" and value.partition("=")[0] in flags.values():
            key, _, chosen = value.partition("=")
            overrides[key] = chosen
        elif flag == "--config":
            try:
                loaded = yaml.safe_load(Path(value).read_text())
            except (OSError, yaml.YAMLError):
                continue  # reported when the command reads it
            data = loaded if isinstance(loaded, dict) else {}
    return data, overrides


def command_with(
    func: Callable[..., Any], name: str, params: list[inspect.Parameter], context: dict[str, Any], more_help: str = ""
) -> Any:
    """A click command NAME that calls FUNC (made by `with_signature`) with its own parameters and PARAMS instead
    of its generated ones (typer builds it, as it builds a registered command); MORE_HELP ends its help text."""
    import typer.main

    def command(**kwargs: Any) -> Any:
        return func(**kwargs)

    command.__doc__ = (func.__doc__ or "") + (f"\n\n{more_help}" if more_help else "")
    command.__signature__ = inspect.Signature([*func.own_parameters, *params])  # type: ignore[attr-defined]
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(name, context_settings=context)(command)
    return typer.main.get_command(app)
