"""`ads train --processes 2` on CPU: two training processes (torch's launcher, gloo) for 2 steps draw the same batches,
hold the same sampler state after every step, and log the steps a 1-process run logs; only rank 0 prints.

The reward is the math reward (the CLI's): the tiny policy's is 0 everywhere, so both runs feed the same rewards
back and every step's batch must be the 1-process run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trl.steps import read_steps  # noqa: E402

SIZES = ["--num-generations", "2", "--max-completion-length", "8", "--no-eval"]


@pytest.mark.slow  # three processes import torch and TRL, two of them train: ~60 CPU-s
def test_two_processes_stay_in_step_with_one(final_artifact: Path, tmp_path: Path):
    ads = str(Path(sys.executable).with_name("ads"))
    two_dir = tmp_path / "two"
    command = [ads, "train", str(final_artifact), "--trainer", "trl", "--steps", "2", "--run-dir", str(two_dir)]
    done = subprocess.run(
        [*command, *SIZES, "--processes", "2"],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("training with trl") == 1 and done.stderr.count("final model") == 1  # rank 0 only
    assert "on 2 process(es)" in done.stderr

    trl = {"num_generations": 2, "max_completion_length": 8}
    one = train(
        str(final_artifact), TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path / "one"), eval_sets=[], trl=trl)
    )
    two = read_steps(two_dir / "steps.jsonl")
    assert [s["step"] for s in two] == [1, 2]
    for step in two:  # after every step, both processes' samplers and drawn batches agree
        assert step["processes"] == 2
        assert len(set(step["process_state_hashes"])) == 1 and len(set(step["process_batch_hashes"])) == 1
    for a, b in zip(two, one.steps, strict=True):  # and the steps are the 1-process run's
        for key in ("sample_ids", "rows", "success", "clusters", "lag", "completions", "learning_rate"):
            assert a[key] == b[key], key
        assert a["metrics"] == b["metrics"]
    saved = [
        json.loads((d / "checkpoints" / "checkpoint-2" / "ads_sampler.json").read_text())
        for d in (two_dir, tmp_path / "one")
    ]
    assert saved[0] == saved[1]  # the sampler state, the drawn-but-unrewarded batch included
    assert (two_dir / "final" / "model.safetensors").is_file()
