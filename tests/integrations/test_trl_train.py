"""Real GRPO steps on CPU through TRL with the ADS sampler in the loop: what a run records, that the sampler's state
after the steps is exactly what `update` makes of the logged rewards, exact resume (`--steps 2` then `--steps 4`
under one name equals an uninterrupted 4-step run), kill -9 then the same command, and the baselines plugged in
by kind. One 4-step run (`trl_run`, session fixture) is shared; each step is 8 prompts x 2 completions of 8
tokens of the tiny default policy. The reward is a parity of the completion's text (`trl_helpers.score`): the
tiny policy's math rewards are all 0, which would leave the feedback untested."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("trl")

from ads_core.sampler.checkpoint import CheckpointStateError, read_checkpoint  # noqa: E402
from ads_core.sampler.kinds import build_sampler  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trainers import sampler_config  # noqa: E402
from ads_core.train.trl.steps import read_steps  # noqa: E402


def test_a_real_run_logs_every_step_and_checkpoints_the_sampler(trl_run, final_artifact: Path):
    cfg, result = trl_run
    table = pq.read_table(final_artifact, columns=["sample_id", "cluster_id"])
    ids = table.column("sample_id").to_pylist()
    steps = read_steps(result.steps_file)
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and steps == result.steps
    for s in steps:
        assert len(s["sample_ids"]) == len(set(s["sample_ids"])) <= 8  # each prompt once
        assert [ids[r] for r in s["rows"]] == s["sample_ids"]  # rows of the artifact, named by sample_id
        assert len(s["rewards"]) == len(s["success"]) == len(s["clusters"]) == len(s["sample_ids"])
        assert s["completions"] == 16 and s["active_clusters"] >= 1 and "loss" in s
        assert 0.0 <= s["window_position"] <= 1.0 and "ads/success_rate_mean" in s["metrics"]
    assert any(0 < v < 1 for s in steps for v in s["success"])  # the signal reached the sampler
    assert [s["lag"] for s in steps] == [0, 1, 1, 1]  # accelerate's one-batch prefetch, never more
    last = Path(result.last_checkpoint)
    assert last.name == "checkpoint-4" and (last / "ads_sampler.json").is_file()
    assert (last / "trainer_state.json").is_file() and (last / "model.safetensors").is_file()


def test_the_sampler_state_is_update_replayed_on_the_logged_rewards(trl_run, final_artifact: Path):
    """A fresh sampler, driven only by the log (draws where they happened, update with each step's success),
    draws the logged batches and ends in exactly the checkpoint's state, generator included."""
    cfg, result = trl_run
    steps = result.steps
    saved = read_checkpoint(result.last_checkpoint, 4)[0]  # the one sampler checkpoint format
    assert (saved.kind, saved.step) == ("ads", 4)
    table = pq.read_table(final_artifact, columns=["cluster_id", "rank_in_cluster"])
    sampler_cfg = sampler_config(cfg, "trl")
    replay = build_sampler(
        "ads", table.column("cluster_id").to_numpy(), table.column("rank_in_cluster").to_numpy(), sampler_cfg, 8
    )
    draws = [(s["drawn_after_updates"], s["rows"]) for s in steps] + [
        (p["after_updates"], list(dict.fromkeys(p["rows"]))) for p in saved.pending
    ]
    updates = 0
    for step in [*steps, None]:
        while draws and draws[0][0] == updates:
            after, logged = draws.pop(0)
            assert list(dict.fromkeys(replay.next_batch().tolist())) == logged
        if step is None:
            break
        replay.update(step["rows"], step["success"])
        updates += 1
    assert not draws and saved.trainer["updates"] == 4 and saved.trainer["draws"] == 5
    assert replay.state_dict() == saved.sampler


def test_steps_2_then_4_under_one_name_resume_exactly(trl_run, final_artifact: Path, trl_helpers, tmp_path: Path):
    cfg, whole = trl_run
    run_dir = str(tmp_path / "run")
    first = train(str(final_artifact), cfg.replaced(steps=2, run_dir=run_dir), score=trl_helpers.score)
    assert [s["step"] for s in first.steps] == [1, 2] and first.resumed_from is None
    second = train(str(final_artifact), cfg.replaced(steps=4, run_dir=run_dir), score=trl_helpers.score)
    assert second.resumed_from == 2 and [s["step"] for s in second.steps] == [1, 2, 3, 4]
    assert second.steps[2]["sample_ids"] == whole.steps[2]["sample_ids"]  # step 3: the criterion
    for resumed, uninterrupted in zip(second.steps, whole.steps, strict=True):  # and every step, rewards too
        assert resumed["sample_ids"] == uninterrupted["sample_ids"]
        assert resumed["success"] == uninterrupted["success"]
    again = train(str(final_artifact), cfg.replaced(steps=4, run_dir=run_dir), score=trl_helpers.score)
    assert again.resumed_from == 4 and "nothing to do" in again.notes[-1] and len(again.steps) == 4


def test_a_truncated_or_flipped_sampler_checkpoint_stops_the_resume_in_one_line(
    trl_run, final_artifact: Path, tmp_path: Path
):
    """The shared run's folder, copied: its only checkpoint's sampler file damaged, the same command refuses to
    resume, in one line naming the file (its manifest catches it), before anything is trained (the run folder is
    left as it was). Without the manifest's check, the sampler file's own checksum refuses it the same way."""
    import shutil

    from ads_core.storage.manifest import write_checkpoint
    from ads_core.train.errors import RunStateError

    cfg, result = trl_run
    run_dir = tmp_path / "run"
    shutil.copytree(result.run_dir, run_dir)
    path = run_dir / "checkpoints" / "checkpoint-4" / "ads_sampler.json"
    good = path.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0x02
    for bad in (good[: len(good) - 7], bytes(flipped)):
        path.write_bytes(bad)
        with pytest.raises(RunStateError) as info:
            train(str(final_artifact), cfg.replaced(run_dir=str(run_dir), steps=5))
        text = str(info.value)
        assert f"{path}: " in text and "\n" not in text, text
        assert len(read_steps(run_dir / "steps.jsonl")) == 4  # nothing trained, nothing cut
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    write_checkpoint(path.parent, 4, run_id)  # the manifest now vouches for the flipped file
    with pytest.raises(CheckpointStateError) as info:
        train(str(final_artifact), cfg.replaced(run_dir=str(run_dir), steps=5))
    assert str(info.value).startswith(f"{path}: bad sampler checkpoint: ") and "\n" not in str(info.value)
    assert len(read_steps(run_dir / "steps.jsonl")) == 4


@pytest.mark.parametrize("kind", ["uniform", "dots-lite"])
def test_the_baselines_plug_in_by_kind(kind: str, final_artifact: Path, trl_helpers, tmp_path: Path):
    cfg = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path), sampler={"kind": kind}, **trl_helpers.sizes)
    result = train(str(final_artifact), cfg, score=trl_helpers.score)
    assert [len(s["sample_ids"]) for s in result.steps] == [8, 8]  # the step's prompt count, whatever the kind
    assert all(k.startswith(f"{kind}/") for k in result.steps[-1]["metrics"])
    assert result.steps[-1]["window_position"] is None  # no window: the log says so rather than inventing one
    saved = read_checkpoint(result.last_checkpoint, 2)[0]
    assert saved.kind == kind and saved.sampler["steps"] == 2


def _command(artifact: Path, run_dir: Path, steps: int) -> list[str]:
    ads = str(Path(sys.executable).with_name("ads"))
    return [
        ads,
        "train",
        str(artifact),
        "--trainer",
        "trl",
        "--steps",
        str(steps),
        "--run-dir",
        str(run_dir),
        "--no-eval",
        "--num-generations",
        "2",
        "--max-completion-length",
        "8",
        "--save-steps",
        "1",  # a checkpoint every step: the test kills the run once checkpoint 2 is complete
    ]


def test_ctrl_c_stops_training_with_one_line_naming_the_checkpoint_a_rerun_resumes_from(
    final_artifact: Path, tmp_path: Path
):
    """A terminal's Ctrl-C (SIGINT to the whole process group): status 130 and one line, not a traceback."""
    run_dir = tmp_path / "run"
    command = _command(final_artifact, run_dir, 200)  # far more steps than it gets to run
    env = {**os.environ, "COLUMNS": "200"}
    log = tmp_path / "train.log"
    with open(log, "wb") as fh:  # a file, not a pipe: nobody reads a pipe while the run trains
        proc = subprocess.Popen(command, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    marker = run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json"
    deadline = time.monotonic() + 240
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), log.read_text()[-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(60)  # a bound, not a timing claim
    printed = log.read_text()
    assert proc.returncode == 130 and "Traceback" not in printed, printed[-3000:]
    (line,) = [x for x in printed.splitlines() if x.startswith("interrupted:")]
    assert re.fullmatch(
        r"interrupted: training stopped; rerun the same command to resume from \S+/checkpoint-(\d+) \(step \1\)", line
    )


@pytest.mark.slow  # two `ads train` processes (each imports torch, transformers and TRL): ~25 s on an idle 2-core box
def test_kill_9_mid_run_then_the_same_command_resumes(final_artifact: Path, tmp_path: Path):
    """The CLI as users run it: killed (SIGKILL) once checkpoint 2 is complete, then started again."""
    run_dir, steps = tmp_path / "run", 4  # killed after checkpoint 2: steps 3 and 4 come from the resumed run
    command = _command(final_artifact, run_dir, steps)
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    marker = run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json"
    deadline = time.monotonic() + 240
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "no checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    logged = read_steps(run_dir / "steps.jsonl")
    assert 2 <= len(logged) < steps
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from" in done.stderr
    final = read_steps(run_dir / "steps.jsonl")
    assert [s["step"] for s in final] == list(range(1, steps + 1))  # each step once, none lost or repeated
    assert [s["sample_ids"] for s in final[:2]] == [s["sample_ids"] for s in logged[:2]]
    assert (run_dir / "checkpoints" / f"checkpoint-{steps}" / "ads_sampler.json").is_file()
