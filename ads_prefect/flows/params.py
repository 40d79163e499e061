"""Flow parameters generated from a config tree, as the CLI's flags are (`ads_cli.options`): one parameter per
field of the root model, a section as ONE typed parameter (its model, defaulting to its defaults), so the
Prefect form stays typed and shows each field's help, and a new section or field needs no edit here.

`with_config_parameters(fn, Root, leading=..., trailing=...)` gives FN the signature `(*leading, <Root's
fields>, *trailing)` and the docstring's `Args:` entries for the generated ones (Prefect reads both); FN itself
takes `**config`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel


def config_parameters(root: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per field of ROOT, with its type and default (a section: its default instance)."""
    defaults = root()
    return [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=getattr(defaults, name), annotation=f.annotation
        )
        for name, f in root.model_fields.items()
    ]


def _arg_line(name: str, text: str) -> str:
    return f"        {name}: {' '.join(text.split())}"


def with_config_parameters(
    fn: Callable[..., Any],
    root: type[BaseModel],
    leading: list[inspect.Parameter],
    trailing: list[inspect.Parameter] = (),  # type: ignore[assignment]
    docs: dict[str, str] | None = None,
) -> Callable[..., Any]:
    """FN with the signature (LEADING, ROOT's fields, TRAILING) and an `Args:` docstring section: DOCS for the
    hand-written parameters, each field's description for the generated ones."""
    params = [*leading, *config_parameters(root), *trailing]
    returns = inspect.signature(fn).return_annotation
    fn.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    docs = docs or {}
    lines = [
        _arg_line(p.name, docs.get(p.name) or root.model_fields[p.name].description or "")
        for p in params
        if p.name in docs or p.name in root.model_fields
    ]
    fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    Args:\n" + "\n".join(lines) + "\n"
    return fn
