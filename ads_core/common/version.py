"""The code version a run records (`run.json`'s `about.code`): the git commit of the checkout the package runs
from and whether it had uncommitted changes, so every result can be traced to the code that made it."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]  # the folder that holds ads_core/


@cache
def code_version() -> dict[str, Any]:
    """{commit, dirty, package}: the checkout's HEAD and whether tracked files differ from it (None for both when
    the package is not run from a git checkout), and the installed package version."""
    try:
        package = version("ads-pipeline")
    except PackageNotFoundError:
        package = None

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(SOURCE), *args], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "package": package}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": bool(status.strip()) if status is not None else None, "package": package}
