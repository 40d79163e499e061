"""Which model a MODEL_OR_RUN argument names, and the name it is reported under.

In order: a folder with ``steps.jsonl`` is a training run: its final model ``RUN/final/`` when there is one,
else its newest checkpoint ``RUN/checkpoints/checkpoint-N`` (named ``RUN`` or ``RUN@N``); a folder with a
``config.json`` is a model or checkpoint folder; a run name ``ads-runs/NAME``; a locally built preset
(``default``, ``tiny``, ``bench``); a hub id whose snapshot is in the local Hugging Face cache (nothing is
downloaded). Anything else is an ``InputError`` saying what was looked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ads_core import models
from ads_core.common.errors import InputError

RUNS_DIR = "ads-runs"
STEPS_FILE = "steps.jsonl"
FINAL_DIR = "final"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


@dataclass(frozen=True)
class Policy:
    name: str  # what tables and the default output folder call it
    path: str  # what from_pretrained loads
    source: str  # the argument as given
    run_dir: str | None = None  # the training run it comes from (its template.json names its prompt template)


def _is_model(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def run_model(run: Path) -> tuple[Path, str]:
    """(model folder, name) of a run folder: its final model, else its newest checkpoint with a model."""
    final = run / FINAL_DIR
    if _is_model(final):
        return final, run.name
    found = []
    folder = run / "checkpoints"
    for child in folder.iterdir() if folder.is_dir() else ():
        m = _CHECKPOINT.fullmatch(child.name)
        if m and _is_model(child):
            found.append((int(m.group(1)), child))
    if not found:
        raise InputError(f"run {run}: no final model ({final}) and no checkpoint with a model under {folder}")
    step, path = max(found)
    return path, f"{run.name}@{step}"


def _run_of(folder: Path) -> str | None:
    """The run folder a model folder belongs to (RUN/final, RUN/checkpoints/checkpoint-N), or None."""
    for run in (folder.parent, folder.parent.parent):
        if (run / STEPS_FILE).is_file():
            return str(run)
    return None


def _named(folder: Path) -> str:
    m = _CHECKPOINT.fullmatch(folder.name)
    if m and folder.parent.name == "checkpoints":
        return f"{folder.parent.parent.name}@{m.group(1)}"
    return folder.name


def cached_hub_model(repo_id: str) -> Path | None:
    """The snapshot folder of a hub model in the local cache, or None (never downloads)."""
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".")):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    found = try_to_load_from_cache(repo_id, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def resolve_policy(spec: str, runs_dir: str | Path = RUNS_DIR) -> Policy:
    """The model SPEC names (see the module docstring)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if (path / STEPS_FILE).is_file():
            model, name = run_model(path.resolve())
            return Policy(name, str(model), spec, str(path.resolve()))
        if _is_model(path):
            return Policy(_named(path.resolve()), str(path.resolve()), spec, _run_of(path.resolve()))
        raise InputError(f"{spec}: a folder with neither a model (config.json) nor a training run ({STEPS_FILE})")
    run = Path(runs_dir) / spec
    if "/" not in spec and run.is_dir() and (run / STEPS_FILE).is_file():
        model, name = run_model(run.resolve())
        return Policy(name, str(model), spec, str(run.resolve()))
    if models.preset_of(spec) is not None and spec:
        return Policy(spec, models.resolve_model(spec), spec)
    snapshot = cached_hub_model(spec)
    if snapshot is not None:
        return Policy(spec.replace("/", "--"), str(snapshot), spec)
    raise InputError(
        f"{spec!r}: not a model folder, a run folder or run name (under {runs_dir}/), a built-in model "
        f"({', '.join([models.DEFAULT_MODEL, *models.BUILTIN_MODELS])}), or a hub id in the local Hugging Face cache"
    )


def unique_names(policies: list[Policy]) -> list[Policy]:
    """Policies with distinct names (a repeated name gets -2, -3, ...)."""
    seen: dict[str, int] = {}
    out = []
    for p in policies:
        count = seen.get(p.name, 0) + 1
        seen[p.name] = count
        out.append(p if count == 1 else Policy(f"{p.name}-{count}", p.path, p.source, p.run_dir))
    return out
