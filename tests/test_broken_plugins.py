"""Broken plug-ins are refused in one line and never take down what does not use them (issue 51): a class path
whose import raises anything, a trainer without the protocol's methods, options whose defaults fail their own
validation, an installed entry point that fails to load (a warning, once; naming it is one line) or that reuses a
built-in name (a warning naming both). Before, each ended in a traceback, trained silently or was dropped without a
word, and one broken entry point took `ads --help` down."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
KABOOM = "RuntimeError: kaboom at import"
MISSING = "missing/final/train.parquet"  # refused plug-ins stop before the artifact is read

# Modules a broken package might hold (names unique to this file: they are imported into the test process).
BROKEN = {
    "ads_t51_boom": 'raise RuntimeError("kaboom at import")\n',
    "ads_t51_exits": "import sys\n\nsys.exit(2)  # an argparse at import\n",
    "ads_t51_half": """
class Half:
    priority = 0

    def can_run_here(self, cfg):
        return True, "anywhere"
""",
    "ads_t51_narrow": """
from pydantic import Field

from ads_core.config.base import FrozenSection, Section
from ads_core.sampler.kinds import sampler_kind


class Knobs(FrozenSection):
    batch_size: int = Field(8, ge=1)
    width: int = Field(0, ge=1, description="Its default breaks its own bound.")


@sampler_kind(options=Knobs)
def narrow(cluster_ids, rank_in_cluster, cfg, batch_size):
    raise AssertionError("never built")
""",
    "ads_t51_cold": """
from pydantic import Field

from ads_core.config.base import Section


class ColdOptions(Section):
    warmth: float = Field(-1.0, ge=0)


class Cold:
    options = ColdOptions
    priority = 0
    streams_steps = True
    ads_defaults = {}

    def can_run_here(self, cfg): ...
    def check_machine(self, cfg, dry_run): ...
    def plan(self, plan, materialize): ...
    def execute(self, plan, on_step, on_line, score): ...
    def read_checkpoint_state(self, run_dir): ...
""",
}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The broken modules in a folder on sys.path (as PYTHONPATH would put them)."""
    folder = tmp_path / "site"
    folder.mkdir()
    for name, text in BROKEN.items():
        (folder / f"{name}.py").write_text(text.lstrip())
    monkeypatch.syspath_prepend(str(folder))
    return folder


def ads_train(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from ads_cli.main import app

    result = CliRunner().invoke(app, ["train", MISSING, *args, "--dry-run"], env={"COLUMNS": "300"})
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--sampler", "ads_t51_boom:k"],
            "sampler kind 'ads_t51_boom:k' cannot be imported: RuntimeError: kaboom at import",
        ),
        (
            ["--trainer", "ads_t51_boom:T"],
            "trainer 'ads_t51_boom:T' cannot be imported: RuntimeError: kaboom at import",
        ),
        (["--trainer", "ads_t51_exits:T"], "trainer 'ads_t51_exits:T' cannot be imported: SystemExit: 2"),
        (
            ["--trainer", "ads_t51_half:Half"],
            "trainer 'ads_t51_half:Half' is refused: it lacks check_machine, plan, execute, read_checkpoint_state, "
            "streams_steps, ads_defaults of the protocol ads_core.train.trainers.Trainer",
        ),
        (
            ["--sampler", "ads_t51_narrow:narrow"],
            "sampler kind 'ads_t51_narrow:narrow' is refused: the defaults of its options ads_t51_narrow.Knobs fail "
            "their own validation: width: Input should be greater than or equal to 1, got 0",
        ),
        (
            ["--trainer", "ads_t51_cold:Cold"],
            "trainer 'ads_t51_cold:Cold' is refused: the defaults of its options ads_t51_cold.ColdOptions fail their "
            "own validation: warmth: Input should be greater than or equal to 0, got -1.0",
        ),
    ],
    ids=["sampler-raises", "trainer-raises", "trainer-exits", "trainer-half", "knobs-defaults", "options-defaults"],
)
def test_a_broken_class_path_plugin_is_refused_in_one_line(site: Path, args: list[str], expected: str):
    code, output = ads_train(*args)
    assert (code, output) == (2, f"error: {expected}\n")


def test_registering_a_broken_plugin_raises_at_registration(monkeypatch: pytest.MonkeyPatch, site: Path):
    """In a plug-in's own module (or this repository) the decorator refuses it, before any run."""
    from ads_core.common.registry import PluginError, Registry
    from ads_core.sampler.kinds import sampler_kind
    from ads_core.train import trainers

    half = __import__("ads_t51_half").Half
    monkeypatch.setattr(trainers, "TRAINERS", Registry("trainer"))
    with pytest.raises(PluginError, match=r"^trainer 'half': it lacks check_machine, plan, execute, "):
        trainers.register_trainer("half")(half)
    assert trainers.TRAINERS.names() == []
    knobs = __import__("ads_t51_cold").ColdOptions
    with pytest.raises(PluginError, match=r"^the defaults of its options ads_t51_cold.ColdOptions fail their own"):
        sampler_kind(options=knobs)(lambda *args: None)


def test_options_whose_defaults_pass_are_accepted_and_others_named():
    from pydantic import Field

    from ads_core.config.base import Section, options_problem
    from ads_core.train.options import TrainConfig

    class Fine(Section):
        width: int = Field(1, ge=1)

    class Required(Section):
        width: int

    assert options_problem(Fine) is None
    assert (
        options_problem(dict) == "its options <class 'dict'> are not a pydantic model (an ads_core.config.base.Section)"
    )
    assert options_problem(Required).endswith("fail their own validation: width: Field required")
    sections = [TrainConfig.model_fields[name].annotation for name in TrainConfig.sections()]
    assert [options_problem(s) for s in sections] == [None] * len(sections)  # every built-in plug-in's


def test_a_broken_entry_point_is_skipped_with_one_warning_and_naming_it_says_why(
    site: Path, installed: Callable[..., None], caplog: pytest.LogCaptureFixture
):
    from ads_core.sampler import kinds
    from ads_core.train import trainers
    from ads_core.train.errors import TrainOptionError
    from ads_core.train.options import load_train_config

    group = kinds.ENTRY_POINT_GROUP
    installed(
        [EntryPoint("boomk", "ads_t51_boom:k", group), EntryPoint("narrow", "ads_t51_narrow:narrow", group)],
        [EntryPoint("half", "ads_t51_half:Half", trainers.ENTRY_POINT_GROUP)],
    )
    with caplog.at_level(logging.WARNING, logger="ads.plugins"):
        assert kinds.kind_names() == [
            "ads",
            "uniform",
            "dots",
            "dots-lite",
            "dynamic",
            "easiest",
        ]  # the rest still work
        assert trainers.trainer_names() == ["verl", "trl"]
        kinds.kind_names(), trainers.trainer_names()  # read once: no second warning
        cfg = load_train_config({"trainer": "trl", "sampler": {"kind": "uniform"}})
    assert cfg.sampler.kind == "uniform"
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped the sampler kind entry point 'boomk = ads_t51_boom:k' (group {group}), which cannot be loaded: "
        "RuntimeError: kaboom at import",
        f"skipped the sampler kind entry point 'narrow = ads_t51_narrow:narrow' (group {group}), which cannot be "
        "loaded: PluginError: the defaults of its options ads_t51_narrow.Knobs fail their own validation: width: "
        "Input should be greater than or equal to 1, got 0",
        "skipped the trainer entry point 'half = ads_t51_half:Half' (group ads_pipeline.trainers), which cannot be "
        "loaded: PluginError: trainer 'half': it lacks check_machine, plan, execute, read_checkpoint_state, "
        "streams_steps, ads_defaults of the protocol ads_core.train.trainers.Trainer",
    ]
    with pytest.raises(ValueError, match=r"sampler kind 'boomk': its entry point 'boomk = ads_t51_boom:k' \(group"):
        load_train_config({"sampler": {"kind": "boomk"}})
    with pytest.raises(TrainOptionError, match=r"^trainer 'half': its entry point 'half = ads_t51_half:Half'"):
        trainers.trainer_class("half")


def test_an_entry_point_named_like_a_built_in_is_skipped_with_a_warning_naming_both(
    installed: Callable[..., None], caplog: pytest.LogCaptureFixture
):
    from ads_core.sampler import kinds
    from ads_core.train import trainers

    installed(
        [EntryPoint("uniform", "my_pkg.samplers:uniform", kinds.ENTRY_POINT_GROUP)],
        [EntryPoint("trl", "my_pkg.trainers:Faster", trainers.ENTRY_POINT_GROUP)],
    )
    with caplog.at_level(logging.WARNING, logger="ads.plugins"):
        assert kinds.kind_spec("uniform").factory.__qualname__ == "_uniform"  # the built-in stays; nothing imported
        assert trainers.trainer_class("trl").__module__ == "ads_core.train.trl.entry"
    assert [r.getMessage() for r in caplog.records] == [
        "the sampler kind entry point 'uniform = my_pkg.samplers:uniform' (group ads_pipeline.sampler_kinds) is not "
        "used: 'uniform' is already the sampler kind ads_core.sampler.kinds:_uniform; declare it under another name",
        "the trainer entry point 'trl = my_pkg.trainers:Faster' (group ads_pipeline.trainers) is not used: 'trl' is "
        "already the trainer ads_core.train.trl.entry:TRLTrainer; declare it under another name",
    ]


def test_with_a_broken_package_installed_the_cli_still_works(site: Path, tmp_path: Path):
    """A real installed distribution (a dist-info on PYTHONPATH) whose entry points fail or shadow a built-in:
    `ads --help`, `ads train --help` and a dry run exit 0 with one warning each; naming it is one error line."""
    dist = tmp_path / "dists" / "ads_t51_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ads-t51-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[ads_pipeline.sampler_kinds]\nboomk = ads_t51_boom:k\n\n[ads_pipeline.trainers]\nboomt = ads_t51_boom:T\n"
    )
    artifact = write_artifact(tmp_path / "train.parquet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site), str(dist.parent)]), "COLUMNS": "300"}

    def ads(*args: str) -> tuple[int, list[str], str]:
        done = subprocess.run([sys.executable, "-m", "ads_cli.main", *args], env=env, capture_output=True, text=True)
        output = done.stdout + done.stderr
        return done.returncode, [line for line in output.splitlines() if "ads_t51_boom" in line], output

    warned = [
        "skipped the sampler kind entry point 'boomk = ads_t51_boom:k' (group ads_pipeline.sampler_kinds), which "
        "cannot be loaded: RuntimeError: kaboom at import",
        "skipped the trainer entry point 'boomt = ads_t51_boom:T' (group ads_pipeline.trainers), which cannot be "
        "loaded: RuntimeError: kaboom at import",
    ]
    dry = ["train", str(artifact), "--trainer", "trl", "--dry-run", "--no-eval", "--model", str(tmp_path)]
    for args in (["--help"], ["train", "--help"], [*dry, "--run-dir", str(tmp_path / "run")]):
        code, said, out = ads(*args)
        assert code == 0 and len(said) == 2 and all(any(s.endswith(w) for s in said) for w in warned), (args, said)
        assert "Usage" in out or "nothing launched" in out
    code, said, _ = ads(*dry, "--sampler", "boomk")
    assert code == 2 and said[-1] == (
        "error: --sampler: Value error, sampler kind 'boomk': its entry point 'boomk = ads_t51_boom:k' (group "
        "ads_pipeline.sampler_kinds) cannot be loaded: RuntimeError: kaboom at import (got 'boomk')"
    ), said


def write_artifact(path: Path) -> Path:
    """A valid 12-row training artifact (3 clusters), enough for a dry run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    clusters = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    n = len(clusters)
    table: dict[str, Any] = {
        "data_source": ["t"] * n,
        "prompt": [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(n)],
        "reward_model": [{"style": "rule", "ground_truth": str(i + 1)} for i in range(n)],
        "extra_info": [{"sample_id": 100 + i, "index": i, "cluster_id": c} for i, c in enumerate(clusters)],
        "sample_id": pa.array([100 + i for i in range(n)], pa.int64()),
        "cluster_id": pa.array(clusters, pa.int64()),
        "rank_in_cluster": pa.array([clusters[:i].count(c) for i, c in enumerate(clusters)], pa.int64()),
        "cluster_size": pa.array([clusters.count(c) for c in clusters], pa.int64()),
    }
    pq.write_table(pa.table(table), path)
    return path
