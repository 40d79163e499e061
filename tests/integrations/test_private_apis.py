"""The contract of every private name of a third party we use (`ads_core/common/private_apis.py`): each is still
there in the installed release, with the shape we rely on, and no reach into a private name is left unlisted.

An upgrade that moves one fails here with the entry's own line (package, object, names, where we use them and
why), not in a build or a training run.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ads_core.common.private_apis import PRIVATE_APIS, PrivateApi

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ads_core", "ads_prefect", "ads_cli")
# private-looking names of the standard library and of Python itself, documented for use
STDLIB = {"_exit", "_getframe", "_asdict", "_replace", "_fields", "_make", "_value_", "_name_", "_missing_"}


def owner_of(api: PrivateApi) -> object:
    module, _, qualname = api.owner.partition(":")
    pytest.importorskip(api.package)
    try:
        found: object = importlib.import_module(module)
        for part in filter(None, qualname.split(".")):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"gone: {api.line()}: {exc}")
    return found


HERE = "tests/integrations/test_private_apis.py"


@pytest.mark.parametrize("api", PRIVATE_APIS, ids=lambda a: f"{a.package}:{a.owner.rpartition(':')[2]}:{a.names[0]}")
def test_every_private_name_we_use_is_still_there(api: PrivateApi):
    if api.contract != HERE:  # pinned, with the signatures, by the integration's own contract test
        text = (REPO / api.contract).read_text()
        assert all(n in text for n in api.names), f"{api.contract} does not check all of {api.line()}"
        return
    owner = owner_of(api)
    if api.kind == "instance_attribute":  # set on instances: the class's own source (or a base's) assigns it
        sources = [inspect.getsource(c) for c in inspect.getmro(owner) if c.__module__.startswith(api.package)]
        missing = [n for n in api.names if not any(f"self.{n} " in s or f"self.{n}:" in s for s in sources)]
    else:
        missing = [n for n in api.names if n != getattr(owner, "__name__", None) and not hasattr(owner, n)]
    assert not missing, f"{api.package} {version(api.package)} no longer has {missing}: {api.line()}"


def test_prefect_queue_services_are_keyed_and_made_as_the_api_routing_assumes():
    """`route_services_by_api_url` replaces `_QueueServiceBase.instance`: a classmethod whose instances are cached
    under `hash((cls, *args))` by `_new_instance`, which starts them."""
    from prefect._internal.concurrency.services import _QueueServiceBase

    assert isinstance(inspect.getattr_static(_QueueServiceBase, "instance"), classmethod)
    init = inspect.getsource(_QueueServiceBase.__init__)
    assert "self._key = hash((self.__class__, *args))" in init, "the instance key changed: tasks/api_routing.py"
    new = inspect.getsource(_QueueServiceBase._new_instance)
    assert "_instances[" in new and ".start()" in new, "_new_instance no longer caches and starts the instance"


def test_the_temporary_server_spawns_through_the_method_we_wrap():
    from prefect.server.api.server import SubprocessASGIServer

    start = textwrap.dedent(inspect.getsource(SubprocessASGIServer.start))
    assert "self._run_uvicorn_command()" in start, "start() no longer spawns through _run_uvicorn_command"
    assert isinstance(SubprocessASGIServer._instances, dict)
    assert SubprocessASGIServer() is SubprocessASGIServer._instances[None]  # the ephemeral one: port None


def test_the_prefect_range_is_pinned_to_the_tested_minor():
    """pyproject pins Prefect to the minor release this contract was checked on: an upgrade re-runs it first."""
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    prefect = next(Requirement(d) for d in deps if Requirement(d).name == "prefect")
    installed = version("prefect")
    major, minor = (int(p) for p in installed.split(".")[:2])
    assert prefect.specifier.contains(installed), (prefect, installed)
    assert not prefect.specifier.contains(f"{major}.{minor + 1}.0"), f"{prefect}: pin it below {major}.{minor + 1}"


def private_reaches(path: Path) -> set[str]:
    """Private names (one leading underscore) this file reaches for on something other than self/cls: attributes,
    `super()._x`, getattr/setattr/hasattr with a constant, and imports of private modules or names."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.add(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "setattr", "hasattr"):
            arg = node.args[1] if len(node.args) > 1 else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("_"):
                if not arg.value.startswith("__"):
                    found.add(arg.value)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith(PACKAGES):
                if any(p.startswith("_") and not p.startswith("__") for p in node.module.split(".")):
                    found.add(node.module)  # a private module: listed by its path
                found |= {a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}
    return found


def own_names(path: Path) -> set[str]:
    """Private names the project defines itself (functions, classes, assignments, attributes set on self)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return names


def test_no_private_reach_is_left_unlisted():
    files = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    ours = set().union(*(own_names(p) for p in files))
    listed = {name for api in PRIVATE_APIS for name in api.names} | {a.owner.partition(":")[0] for a in PRIVATE_APIS}
    unlisted = {
        f"{p.relative_to(REPO)}: {name}"
        for p in files
        for name in private_reaches(p)
        if name not in listed and name not in STDLIB and (name not in ours or name in defined_by_patch(p))
    }
    assert not unlisted, "list these in ads_core/common/private_apis.py (and pin them):\n" + "\n".join(sorted(unlisted))


def defined_by_patch(path: Path) -> set[str]:
    """Names this file assigns on a third party's object (`server._run_uvicorn_command = ...`): still reaches."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
    return names


def test_the_scan_sees_a_reach(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text(
        "from prefect._internal.x import _Q\n"
        "def f(fs, model):\n"
        "    fs._strip_protocol('a')\n"
        "    getattr(model.config, '_attn_implementation', None)\n"
        "    return super()._save_checkpoint()\n"
    )
    assert private_reaches(module) == {
        "prefect._internal.x",
        "_Q",
        "_strip_protocol",
        "_attn_implementation",
        "_save_checkpoint",
    }
