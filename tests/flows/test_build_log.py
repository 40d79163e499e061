"""`ads build > log 2>&1` as a user runs it (issue 53), on 30 MATH-500 rows: the log holds no bar characters and no
line that ends in nothing, names the difficulty as difficulty_validity.json's `scored`, and says the training set
is drawn from the math500 eval set; `ads train` on it says so too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ads_cli.common import BAR_LINE
from ads_core.evaluation.sets import catalog as ev

ADS = str(Path(sys.executable).with_name("ads"))


def test_a_build_logged_to_a_file_says_what_it_computed_and_what_its_data_is(
    prefect_api: Any, ads_env: dict[str, str], tmp_path: Path
):
    rows = (ev.packaged_data_dir() / ev.EVAL_SETS["math500"]).read_text().splitlines()[:30]
    source = tmp_path / "math30.jsonl"
    source.write_text("\n".join(rows) + "\n")
    out, log = tmp_path / "out", tmp_path / "build.log"
    env = prefect_api.env(**ads_env)
    with open(log, "w") as file:
        args = [ADS, "build", str(source), "--out", str(out), "-k", "3", "--max-length", "256"]
        proc = subprocess.run(args, stdout=file, stderr=subprocess.STDOUT, env=env, timeout=900)
    text = log.read_text()
    assert proc.returncode == 0, text[-3000:]
    scored = json.loads((out / "report" / "difficulty_validity.json").read_text())["scored"]
    assert scored == "nll_sum"  # the default
    assert f"difficulty ({scored}, summed NLL of the reference solution):" in text and "token-mean" not in text
    examples = (out / "report" / "examples.md").read_text()
    assert "(difficulty = nll_sum, summed NLL of the reference solution, under the policy model)" in examples
    assert not BAR_LINE.search(text), text  # bars are for terminals
    assert not [line for line in text.splitlines() if line.rstrip().endswith(":") and "difficulty (" not in line]
    assert (
        "decontamination: 30 rows match an eval question (OUT/report/decontamination.json): the training set is "
        "drawn from the math500 eval set (30 of its 500 questions), so evaluating on it measures recall, not learning"
    ) in text
    assert "difficulty validity (Spearman rho, OUT/report/difficulty_validity.json): nll_mean vs level " in text

    train = [ADS, "train", str(out / "final" / "train.parquet"), "--trainer", "trl", "--dry-run", "--no-eval"]
    done = subprocess.run(train, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "note: the training set is drawn from the math500 eval set (30 of its 500 questions)" in done.stderr
    assert "validate on another set (--eval-set)" in done.stderr
