"""The house rules, read from the source with `ast` (lazy imports inside functions count too):

- layers point one way: ads_cli -> ads_prefect.flows -> ads_prefect.tasks -> ads_prefect.runtime -> ads_core
  (the lock machinery is ads_core.locks);
- the lab (ads_lab: the demo, the studies, the simulator) sits beside the product and may import it; the product
  never imports the lab (the `ads` command finds the lab's commands through an entry point group), and inside the
  lab the same one way holds: ads_lab.cli -> ads_lab.flows -> the rest, which never imports Prefect;
- no import circle between the modules of the project;
- no module over 600 lines (a size past which a module holds more than one idea; folders are named for what they
  hold, not split to meet a count).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ads_core", "ads_prefect", "ads_cli", "ads_lab")
LAB_LIBRARY = ("ads_lab.config", "ads_lab.demo", "ads_lab.studies", "ads_lab.simulator", "ads_lab.presets")
# layer -> dotted prefixes it must never import (not even inside a function)
FORBIDDEN = {
    "ads_core": ("prefect", "prefect_dask", "ads_prefect", "ads_cli", "ads_lab"),
    "ads_prefect.runtime": ("ads_prefect.tasks", "ads_prefect.flows", "ads_cli", "ads_lab"),
    "ads_prefect.tasks": ("ads_prefect.flows", "ads_cli", "ads_lab"),
    "ads_prefect.flows": ("ads_cli", "ads_lab"),
    "ads_cli": ("ads_lab",),
    **{
        part: ("prefect", "prefect_dask", "ads_prefect", "ads_cli", "ads_lab.flows", "ads_lab.cli")
        for part in LAB_LIBRARY
    },
    "ads_lab.flows": ("ads_cli", "ads_lab.cli"),
}
MAX_LINES = 600


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_modules(path: Path) -> set[tuple[str, int]]:
    """(dotted module, line) of every absolute import; `from pkg import sub` also yields pkg.sub."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(alias.name, node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add((node.module, node.lineno))
            found |= {(f"{node.module}.{alias.name}", node.lineno) for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add((str(node.args[0].value), node.lineno))
    return found


def project_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_one_way(layer: str):
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path in project_files()
        if under(module_name(path), layer)
        for name, line in imported_modules(path)
        if any(under(name, bad) for bad in FORBIDDEN[layer])
    ]
    assert not violations, "\n".join(violations)


def test_the_contract_checker_sees_lazy_imports(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from prefect import flow\n    import ads_prefect.flows.ads_build\n")
    names = {name for name, _ in imported_modules(module)}
    assert {"prefect", "prefect.flow", "ads_prefect.flows.ads_build"} <= names


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (an import of a package counts as its __init__)."""
    files = project_files()
    known = {module_name(p) for p in files}
    graph: dict[str, set[str]] = defaultdict(set)
    for path in files:
        me = module_name(path)
        for name, _ in imported_modules(path):
            if name in known and name != me:
                graph[me].add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    assert not circles(import_graph()), circles(import_graph())


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_is_over_the_size_limit():
    big = [
        f"{p.relative_to(REPO)}: {n} lines"
        for p in project_files()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not big, "\n".join(big)


def test_the_wheel_installs_no_generic_top_level_package():
    """`pip install .` installs what pyproject's package finder selects: only project-named top-level packages."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    installed = find_packages(where=str(REPO), include=config["include"], exclude=config.get("exclude", ()))
    top = {name.split(".")[0] for name in installed}
    assert top == set(PACKAGES), top
    assert not {"flows", "tasks"} & top


def test_the_lab_commands_reach_ads_through_the_entry_point_group_alone():
    """`ads demo` and `ads simulate` are the lab's: pyproject declares them in `ads_pipeline.commands` (the group
    `ads_cli.main` loads), and each entry registers its command on an app, without the product naming the lab."""
    import tomllib

    import typer
    import typer.main

    from ads_cli.main import COMMANDS_GROUP
    from ads_core.common.registry import load_by_path

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][COMMANDS_GROUP]
    app = typer.Typer()
    app.callback()(lambda: None)
    for target in declared.values():
        load_by_path(target)(app)
    assert sorted(declared) == ["demo", "simulate"]
    assert typer.main.get_command(app).list_commands(None) == ["demo", "simulate"]
