"""requirements.lock (what setup.sh installs) agrees with pyproject.toml: every dependency of the core and of the
locked extras is pinned there at a version its specifier allows, and torch is setup.sh's CPU version. After editing
pyproject's dependencies, `./setup.sh --lock` regenerates the lock (README, "Setup")."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
SETUP = (REPO / "setup.sh").read_text()
FIX = "regenerate it with `./setup.sh --lock` and commit requirements.lock"
# The environment the lock is compiled for (setup.sh --lock: Linux x86_64, Python 3.11).
ENV = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux", "platform_system": "Linux"}


def setting(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)", SETUP, re.M)
    assert match, f"setup.sh has no {name}="
    return match.group(1)


def pins() -> dict[str, Version]:
    out = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            out[canonicalize_name(match.group(1))] = Version(match.group(2))
    return out


def requirements() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra in setting("LOCKED_EXTRAS").split(","):
        reqs += [(f"extra {extra}", Requirement(r)) for r in project["optional-dependencies"][extra]]
    return reqs


def test_every_dependency_is_pinned_at_an_allowed_version():
    locked = pins()
    assert len(locked) > 50, "requirements.lock looks empty"
    problems = []
    for where, req in requirements():
        if req.marker is not None and not req.marker.evaluate({**ENV, "extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name not in locked:
            problems.append(f"{req} ({where}) is not in requirements.lock")
        elif not req.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{req} ({where}): requirements.lock pins {name}=={locked[name]}")
    assert not problems, "pyproject.toml and requirements.lock disagree; " + FIX + ":\n" + "\n".join(problems)


def test_the_lock_pins_setup_shs_cpu_torch():
    assert pins()[canonicalize_name("torch")] == Version(setting("TORCH")), f"torch differs from setup.sh's; {FIX}"
