"""One name for K in the lab's configs, the build's (`num_clusters`, flag `--clusters`): an old key is refused in one
line naming the new one, wherever a user could write it, and the runs finished under the old name keep their keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from ads_cli.options import resolve_config, validation_message
from ads_lab.cli import demo_cmd, simulate_cmd
from ads_lab.config import experiment2 as e2
from ads_lab.config.demo import DemoConfig
from ads_lab.config.simulate import SimulationConfig
from ads_lab.config.study import StudyConfig
from ads_lab.demo import runs
from ads_lab.studies import study


def test_old_names_of_k_are_refused_in_one_line_naming_the_new_one(tmp_path: Path, capsys: pytest.CaptureFixture):
    with pytest.raises(ValueError) as caught:
        DemoConfig().with_overrides({"clusters": 4})
    assert str(caught.value) == "'clusters' was renamed: write num_clusters instead (flag --clusters)"
    with pytest.raises(ValidationError) as invalid:
        StudyConfig.model_validate({"clusters": 4})
    assert validation_message(StudyConfig, invalid.value) == "'clusters' was renamed: write num_clusters instead"
    with pytest.raises(ValidationError) as invalid:
        SimulationConfig.model_validate({"n_clusters": 12})
    assert validation_message(SimulationConfig, invalid.value) == (
        "'n_clusters' was renamed: write num_clusters instead (flag --clusters)"
    )
    config = tmp_path / "demo.yaml"
    config.write_text("clusters: 4\n")
    with pytest.raises(typer.Exit):
        resolve_config(DemoConfig, {}, config, None)
    assert capsys.readouterr().err == "error: 'clusters' was renamed: write num_clusters instead (flag --clusters)\n"
    assert DemoConfig().with_overrides({"num_clusters": 4}).num_clusters == 4
    assert e2.experiment2().num_clusters == 8 and e2.smoke(e2.experiment2()).num_clusters == 4


def test_the_demo_and_the_simulator_take_k_as_the_build_does():
    app = typer.Typer()
    app.callback()(lambda: None)
    demo_cmd.register(app)
    simulate_cmd.register(app)
    refused = CliRunner().invoke(app, ["demo", "--set", "clusters=4"])
    assert refused.exit_code == 2 and "'clusters' was renamed: write num_clusters instead (flag --clusters)" in (
        refused.output
    )
    for command in ("demo", "simulate"):
        shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
        assert "--clusters" in shown.output and "--num-clusters" not in shown.output


def test_runs_finished_before_the_rename_keep_their_keys():
    """The keys hash the settings under the old key name (`clusters`): the literals are the keys before the rename."""
    assert runs.run_key(DemoConfig(), "ads", 0) == "d1399ddd71b31624"
    assert study.run_key(StudyConfig(), "uniform", {"kind": "uniform"}, 1000, "/a/train.parquet") == "0a4d1eb4d17c4cd6"
    declared = e2.experiment2()
    assert study.run_key(declared, "ads", e2.ARMS["ads"], 3000, "/a/train.parquet") == "5f174cc675445505"
