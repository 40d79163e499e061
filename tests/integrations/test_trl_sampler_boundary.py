"""A class-path sampler kind whose batches break the protocol (`plugin_module:bad`) stops `ads train` under TRL at
its first batch (issue 51): one `error:` line naming the sampler, the step and the value, exit 2, before any rollout,
with no step trained and no checkpoint. Before, floats trained the truncated rows, an index past the end failed in
`datasets` after a minute of generation, and a batch one row too long trained step 1 and checkpointed it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

MODULE = Path(__file__).resolve().parents[1] / "plugin_module.py"
LINE = "error: sampler 'plugin_module:bad' at step 1 returned"


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        ("floats", f"{LINE} 261.7 (float) at position 0; row positions are integers in [0, 300)"),
        ("past_end", f"{LINE} row 300 at position 7, outside the training set's rows [0, 300)"),
        ("long", f"{LINE} 9 row positions; the step takes exactly 8"),
    ],
)
def test_a_sampler_with_bad_batches_stops_the_run_in_one_line_before_the_first_rollout(
    returns: str, expected: str, final_artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from typer.testing import CliRunner

    from ads_cli.main import app
    from ads_core.train.trl.steps import read_steps
    from ads_core.train.trl.trainer import ADSGRPOTrainer

    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(MODULE, site / "plugin_module.py")
    monkeypatch.syspath_prepend(str(site))

    def rolled_out(self: Any, inputs: Any) -> Any:
        raise AssertionError("a batch was rolled out")

    monkeypatch.setattr(ADSGRPOTrainer, "_generate_and_score_completions", rolled_out)
    run = tmp_path / "run"
    args = ["train", str(final_artifact), "--trainer", "trl", "--sampler", "plugin_module:bad", "--steps", "2"]
    args += ["--no-eval", "--run-dir", str(run), "--set", f"sampler.bad.returns={returns}"]
    args += ["--set", "trl.num_generations=2", "--set", "trl.max_completion_length=8"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    said = [line for line in result.output.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert result.exit_code == 2 and said == [expected], result.output
    assert not read_steps(str(run / "steps.jsonl")) and not list((run / "checkpoints").iterdir())
