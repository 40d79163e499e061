"""Training that never loses a step, attacked as issue 35 wrote it, on real TRL runs of the tiny policy (2
completions of 8 tokens per prompt, a checkpoint every step): flipped bytes in the newest checkpoint's
``optimizer.pt`` (one warning naming the file, the previous verified checkpoint resumed, the uninterrupted run's
weights at the end), a resume with another learning rate (refused naming the field; with ``allow_change`` it
trains and the run records the change), a full disk during a save (a real small tmpfs: one line, then after space
is freed the same command finishes exactly), and two ``ads train`` started together on one run folder."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from ads_core.train.errors import RunStateError, error_text  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trl.steps import read_steps  # noqa: E402


def _config(helpers, run_dir: Path, steps: int, **trl) -> TrainConfig:
    sizes = {**helpers.sizes, "trl": {**helpers.sizes["trl"], "save_steps": 1, **trl}}
    return TrainConfig(trainer="trl", steps=steps, run_dir=str(run_dir), **sizes)


def _weights(run_dir: str | Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(run_dir) / "final" / "model.safetensors"))


def _same_weights(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def reference(final_artifact: Path, trl_helpers, tmp_path_factory: pytest.TempPathFactory):
    """An uninterrupted 3-step run: the steps and weights every attacked run must end with."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    result = train(str(final_artifact), _config(trl_helpers, run_dir, 3), score=trl_helpers.score)
    return result, _weights(run_dir)


def test_flipped_optimizer_falls_back_to_the_previous_checkpoint_and_ends_exactly(
    reference, final_artifact: Path, trl_helpers, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    whole, weights = reference
    run_dir = tmp_path / "run"
    train(str(final_artifact), _config(trl_helpers, run_dir, 2), score=trl_helpers.score)
    optimizer = run_dir / "checkpoints" / "checkpoint-2" / "optimizer.pt"
    data = bytearray(optimizer.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4] = bytes(b ^ 0x5A for b in data[len(data) // 2 : len(data) // 2 + 4])
    optimizer.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="ads.train"):
        result = train(str(final_artifact), _config(trl_helpers, run_dir, 3), score=trl_helpers.score)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and f"{optimizer}: changed" in skipped[0] and "\n" not in skipped[0], skipped
    assert result.resumed_from == 1
    assert [s["step"] for s in result.steps] == [1, 2, 3]
    assert [s["sample_ids"] for s in result.steps] == [s["sample_ids"] for s in whole.steps]
    assert _same_weights(_weights(run_dir), weights)  # the uninterrupted run's weights, bit for bit
    assert (run_dir / "checkpoints" / "rejected-checkpoint-2" / "optimizer.pt").is_file()  # kept aside

    # a resume with another learning rate: refused naming the field; with allow_change it trains and is recorded
    from ads_cli.train_cmd import spell_flag

    changed = _config(trl_helpers, run_dir, 4, learning_rate=1e-3)
    with pytest.raises(RunStateError) as info:
        train(str(final_artifact), changed, score=trl_helpers.score)
    line = error_text(info.value, spell_flag)
    assert "trl.learning_rate: run 1e-05, now 0.001" in line and "--allow-change trl.learning_rate" in line, line
    assert len(read_steps(run_dir / "steps.jsonl")) == 3  # nothing trained
    result = train(str(final_artifact), changed.replaced(allow_change=["learning_rate"]), score=trl_helpers.score)
    assert [s["step"] for s in result.steps] == [1, 2, 3, 4] and result.resumed_from == 3
    assert result.steps[-1]["learning_rate"] == pytest.approx(1e-3)
    record = json.loads((run_dir / "run.json").read_text())
    assert [(c["step"], c["field"], c["to"]) for c in record["changes"]] == [(3, "trl.learning_rate", 1e-3)]


def _mount_tmpfs(where: Path, size: str, remount: bool = False) -> bool:
    where.mkdir(exist_ok=True)
    options = f"remount,size={size}" if remount else f"size={size}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


def test_a_full_disk_during_a_save_is_one_line_and_the_rerun_finishes_exactly(
    reference, final_artifact: Path, trl_helpers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A real 24 MB tmpfs holds two 9 MB checkpoints but not the third: its save fails, in one line naming the
    checkpoint; once the disk is grown (space freed) the same command resumes and ends with the uninterrupted
    run's steps and weights. Without root (no mount) the third save's writer raises ENOSPC instead."""
    whole, weights = reference
    disk = tmp_path / "disk"
    real = os.geteuid() == 0 and _mount_tmpfs(disk, "24m")
    if not real:
        from ads_core.storage import manifest

        write = manifest.write_checkpoint

        def full_at_3(folder, step, run_id):  # the disk fills during checkpoint-3's save
            if step == 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(folder) / "optimizer.pt"))
            return write(folder, step, run_id)

        monkeypatch.setattr(manifest, "write_checkpoint", full_at_3)
    try:
        run_dir = disk / "run"
        cfg = _config(trl_helpers, run_dir, 3)
        with pytest.raises(RunStateError) as info:
            train(str(final_artifact), cfg, score=trl_helpers.score)
        line = str(info.value)
        assert line.startswith(f"could not save checkpoint {run_dir / 'checkpoints' / 'checkpoint-3'}: ") and (
            "rerun the same command: it resumes exactly from checkpoint-2" in line and "\n" not in line
        ), line
        assert os.strerror(errno.ENOSPC) in line or "full disk" in line
        assert not (run_dir / "checkpoints" / "checkpoint-3").exists()  # the partial save is gone
        if real:
            assert _mount_tmpfs(disk, "96m", remount=True)  # space freed
        else:
            monkeypatch.undo()
        result = train(str(final_artifact), cfg, score=trl_helpers.score)
        assert result.resumed_from == 2 and [s["step"] for s in result.steps] == [1, 2, 3]
        assert [s["success"] for s in result.steps] == [s["success"] for s in whole.steps]
        assert _same_weights(_weights(run_dir), weights)
    finally:
        if real:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow  # two `ads train` processes at once (each imports torch, transformers and TRL)
def test_two_runs_started_together_on_one_folder(final_artifact: Path, tmp_path: Path):
    run_dir = tmp_path / "run"
    ads = str(Path(sys.executable).with_name("ads"))
    command = [ads, "train", str(final_artifact), "--trainer", "trl", "--steps", "4", "--run-dir", str(run_dir)]
    command += ["--no-eval", "--num-generations", "2", "--max-completion-length", "8", "--save-steps", "1"]
    env = {**os.environ, "COLUMNS": "400"}
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    errors = [p.communicate(timeout=300)[1].decode() for p in runs]
    codes = [p.returncode for p in runs]
    assert sorted(codes) == [0, 2], (codes, [e[-2000:] for e in errors])
    refused = errors[codes.index(2)].strip().splitlines()  # its whole output: one line, before any progress
    assert len(refused) == 1 and refused[0].startswith("error: run folder ") and "in use by" in refused[0], refused
    assert [s["step"] for s in read_steps(run_dir / "steps.jsonl")] == [1, 2, 3, 4]
