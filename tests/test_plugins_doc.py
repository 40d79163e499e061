"""docs/plugins.md followed as written (issue 53): its sampler kind and trainer skeleton are copied out of the page
and its commands run as shown (the class paths on PYTHONPATH, then the entry points it declares), so the page is
an example that works. A factory named `kind` is told to take `section=`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "plugins.md"
ADS_BIN = Path(sys.executable).parent  # where `ads` is installed beside this Python


def blocks(lang: str) -> list[str]:
    return [body for kind, body in re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), re.S) if kind == lang]


def write_modules(root: Path) -> list[str]:
    """The page's modules into ROOT, each where its first line says (``# my_pkg/samplers.py``)."""
    names = []
    for body in blocks("python"):
        first = body.splitlines()[0]
        if first.startswith("# my_pkg/"):
            path = root / first.removeprefix("# ")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
            names.append(first.removeprefix("# "))
    (root / "my_pkg" / "__init__.py").touch()
    return names


def env_with(path: str = "") -> dict[str, str]:
    """This environment with `ads` first on PATH, wide help (no wrapping), PATH prepended to PYTHONPATH."""
    env = {**os.environ, "PATH": f"{ADS_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "400"}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real final artifact: 24 rows of the bundled sample, the tiny model, 2 clusters."""
    from ads_core.common import defaults
    from ads_core.config.build import BuildConfig
    from ads_core.pipeline.build import build

    os.environ.setdefault("ADS_CACHE_DIR", str(tmp_path_factory.mktemp("ads-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = tmp_path_factory.mktemp("plugin-doc")
    source = root / "rows.jsonl"
    source.write_text("\n".join(Path(defaults.sample_path()).read_text().splitlines()[:24]) + "\n")
    cfg = BuildConfig.model_validate(
        {"cluster": {"num_clusters": 2}, "score": {"max_length": 256}, "report": {"decontaminate": False}}
    )
    return Path(build(str(source), str(root / "out"), cfg).final_uri)


def test_the_plugin_example_runs_exactly_as_the_page_shows_it(artifact: Path, tmp_path: Path):
    """Regression: the page's MySampler was never defined, nothing said how the module becomes importable, and a
    class-path kind's knobs were not in --help."""
    assert write_modules(tmp_path / "plugins") == ["my_pkg/samplers.py", "my_pkg/trainers.py"]
    (script,) = [b for b in blocks("bash") if "export PYTHONPATH" in b]
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("ART", str(artifact))],
        cwd=tmp_path,
        env=env_with(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert (
        "Sampler kind my_pkg.samplers:mine, knobs set with --set sampler.mine.KNOB=VALUE: batch_size (default 128): "
        "Prompts per step (the step's, set by the trainer); temperature (default 0.5)"
    ) in out
    assert "nothing launched" in out and "Traceback" not in out
    steps = [json.loads(x) for x in (tmp_path / "ads-runs" / "mine-demo" / "steps.jsonl").read_text().splitlines()]
    assert [(s["step"], s["mine/step"]) for s in steps] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert all(s["rollout_prompts"] == 128 for s in steps)
    assert "step 3/3  reward " in out  # ads train's own line per step, from the trainer's on_step


def test_the_example_sampler_keeps_the_protocol_and_resumes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import numpy as np

    from ads_core.sampler.base import Sampler

    write_modules(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from my_pkg.samplers import MineKnobs, MySampler

    clusters, ranks = np.repeat(np.arange(4), 10), np.tile(np.arange(10), 4)
    sampler = MySampler(clusters, ranks, MineKnobs(batch_size=8))
    assert isinstance(sampler, Sampler)
    sampler.update(sampler.next_batch(), np.linspace(0, 1, 8))
    saved = json.loads(json.dumps(sampler.state_dict()))  # JSON-able, as checkpoints keep it
    again = MySampler(clusters, ranks, MineKnobs(batch_size=8))
    again.load_state_dict(saved)
    assert sampler.next_batch().tolist() == again.next_batch().tolist()
    with pytest.raises(ValueError, match=r"success values must be in \[0, 1\]"):
        sampler.update([0], [2.0])


def test_the_entry_points_the_page_declares_register_the_plugins_by_name(artifact: Path, tmp_path: Path):
    site = tmp_path / "site"
    write_modules(site)
    (toml,) = blocks("toml")
    groups = tomllib.loads(toml)["project"]["entry-points"]
    info = site / "my_pkg-0.1.dist-info"  # what `pip install` writes for that pyproject.toml
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my_pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items())
    )
    command = [str(ADS_BIN / "ads"), "train", str(artifact), "--trainer", "mine", "--sampler", "mine", "--dry-run"]
    proc = subprocess.run(command, cwd=tmp_path, env=env_with(str(site)), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert re.search(r"^mine: \d+ steps of 128 prompts \(mine\)$", proc.stdout, re.M), proc.stdout


def test_a_factory_named_kind_is_told_to_take_a_section_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Regression: a factory named `kind` collides with `sampler.kind`, and the error did not say what to do."""
    from typer.testing import CliRunner

    from ads_cli.main import app

    (tmp_path / "clash_mod.py").write_text(
        "from pydantic import Field\n"
        "from ads_core.config.base import FrozenSection\n"
        "from ads_core.sampler.kinds import sampler_kind\n\n\n"
        "class Knobs(FrozenSection):\n"
        "    batch_size: int = Field(8, ge=1)\n\n\n"
        "@sampler_kind(options=Knobs)\n"
        "def kind(cluster_ids, rank_in_cluster, cfg, batch_size):\n"
        "    raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["train", "x.parquet", "--sampler", "clash_mod:kind", "--dry-run"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        "error: sampler kind 'clash_mod:kind': its section sampler.kind is taken; give it a section of its own "
        'with section= (@sampler_kind(options=..., section="my_kind"))'
    )
