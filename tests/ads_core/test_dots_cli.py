"""`ads dots-train`'s refusals: one line and exit status 2, before any rollout."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ads_cli.main import app


def test_dots_train_refuses_bad_input_in_one_line(tmp_path: Path):
    art = tmp_path / "train.parquet"
    art.write_bytes(b"")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    cases = {
        "no such training artifact": [str(tmp_path / "none.parquet"), "-p", str(model), "-p", str(model)],
        "give 2 or more source policies": [str(art), "-p", str(model)],
        "not a model folder (no config.json)": [str(art), "-p", str(model), "-p", str(tmp_path)],
        "its manifest names no model": [str(art), "-p", str(model), "-p", str(model)],
    }
    for expected, args in cases.items():
        result = CliRunner().invoke(app, ["dots-train", *args, "--held-out", str(model)])
        line = result.output.strip()
        assert result.exit_code == 2 and expected in line and "\n" not in line, (expected, result.output)
