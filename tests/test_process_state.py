"""What modules may do (issue 41): every piece of process-wide state is listed, with why, in docs/architecture.md
("Process-wide state"); no module does anything at import but define names (a lock folder was moved, Prefect
patched and log filters installed by importing a module); no `__init__.py` holds logic. Read from the source with
`ast`, like tests/test_layers.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ads_core", "ads_prefect", "ads_cli", "ads_lab")
EMPTY_CONTAINERS = {"set", "dict", "list", "OrderedDict", "defaultdict", "Counter"}
STATEFUL_CALLS = ("Lock", "RLock", "Registry", "BuildLockManager", "TemporaryDirectory")
CACHES = {"cache", "lru_cache"}


def _modules() -> list[tuple[str, ast.Module]]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            found.append((name, ast.parse(path.read_text(), filename=str(path))))
    return found


def _called(node: ast.expr) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_state(value: ast.expr | None) -> bool:
    if isinstance(value, ast.List | ast.Dict | ast.Set):
        return not (value.elts if isinstance(value, ast.List | ast.Set) else value.keys)
    called = _called(value) if isinstance(value, ast.Call) else ""
    return called in EMPTY_CONTAINERS or called.endswith(STATEFUL_CALLS)


def process_state() -> set[str]:
    """`module:NAME` of every module-level mutable container, lock, registry or manager, every name a function
    rebinds with `global`, and every cached function."""
    found = set()
    for module, tree in _modules():
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if targets and _is_state(node.value):
                found |= {f"{module}:{t.id}" for t in targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.FunctionDef) and any(
                (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", _called(d))) in CACHES
                for d in node.decorator_list
            ):
                found.add(f"{module}:{node.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found |= {f"{module}:{name}" for name in node.names}
    return found


def import_time_actions() -> set[str]:
    """`module:what` of every statement at module level that does something when imported (a call, a loop), but
    a registration into a plug-in registry (`KINDS.register(...)`, the one-registration rule) and the CLI's
    building of its own commands (ads_cli and the lab's ads_lab.cli are entry points: generated signatures,
    `app.command`)."""
    found = set()
    for module, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.For | ast.While):
                found.add(f"{module}:for")
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
                continue
            what = ast.unparse(node.value.func)
            if re.fullmatch(r"[A-Z_]+\.register", what):
                continue
            found.add(f"{module}:{what}")
    return {f for f in found if not f.startswith(("ads_cli.", "ads_lab.cli."))}


def listed() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    return text[text.index("## Process-wide state") :]


def test_every_piece_of_process_wide_state_is_listed_with_why():
    section = listed()
    missing = sorted(s for s in process_state() if f"`{s}`" not in section)
    assert not missing, "not listed in docs/architecture.md, Process-wide state:\n" + "\n".join(missing)


def test_importing_a_module_does_nothing_but_define_names():
    section = listed()
    allowed = set(re.findall(r"import time: `([^`]+)`", section))
    assert sorted(import_time_actions() - allowed) == []


def test_package_init_files_hold_no_logic():
    """An `__init__.py` holds a docstring, imports (re-exports) and constants, nothing that runs or decides
    (issue 41; `ads_core/evaluation/__init__.py` is being emptied with the evals/ merge)."""
    found = []
    for module, tree in _modules():
        path = module.replace(".", "/")
        if not (REPO / path / "__init__.py").is_file() or module == "ads_core.evaluation":
            continue
        for node in tree.body:
            plain = isinstance(node, ast.Import | ast.ImportFrom) or (
                isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign)
                and all(
                    isinstance(n, ast.Constant | ast.List | ast.Tuple | ast.Name | ast.expr_context)
                    for n in ast.walk(node.value)
                    if n is not None
                )
            )
            if not plain:
                found.append(f"{path}/__init__.py:{node.lineno}: {ast.unparse(node).splitlines()[0][:60]}")
    assert found == []
