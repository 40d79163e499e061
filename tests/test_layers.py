"""The layer contract: ads_cli -> flows -> tasks -> ads_core, imports pointing one way only.

Read from the source with `ast`, so lazy imports inside functions count too; CI runs this with the suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# package -> top-level modules it must never import (not even inside a function)
FORBIDDEN = {
    "ads_core": {"prefect", "prefect_dask", "flows", "tasks", "ads_cli"},
    "tasks": {"flows", "ads_cli"},
    "flows": {"ads_cli"},
}
MAX_LINES = 500


def imported_roots(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add((node.module.split(".")[0], node.lineno))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add((str(node.args[0].value).split(".")[0], node.lineno))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str):
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {root}"
        for path in sorted((REPO / package).rglob("*.py"))
        for root, line in imported_roots(path)
        if root in FORBIDDEN[package]
    ]
    assert not violations, "\n".join(violations)


def test_the_contract_checker_sees_lazy_imports(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from prefect import flow\n    import flows.ads_build\n")
    assert {root for root, _ in imported_roots(module)} == {"prefect", "flows"}


@pytest.mark.parametrize("package", ["ads_core", "tasks", "flows", "ads_cli"])
def test_no_module_is_over_the_size_limit(package: str):
    big = [
        f"{p.relative_to(REPO)}: {n} lines"
        for p in sorted((REPO / package).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not big, "\n".join(big)
