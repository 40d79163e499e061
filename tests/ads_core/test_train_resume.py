"""Training that never loses a step, without training (issue 35, groups 1-3): the run folder's lock (a second run is
refused in one line naming the holder; a run that lost it writes nothing), checkpoint manifests (every changed,
truncated or missing file fails its checkpoint, named; rotation keeps the newest verified), the run's recorded
trajectory (a resume that differs is refused naming each field, unless allowed, then recorded) and steps.jsonl
repaired to each step once. The real runs are in tests/integrations/test_trl_resume.py."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ads_core.locks.store import DirLockStore
from ads_core.storage import manifest as mf
from ads_core.storage.fencing import LockLost
from ads_core.train.errors import RunStateError, TrainOptionError
from ads_core.train.resume import checkpoints, identity, saving
from ads_core.train.resume.lock import holding_run, refuse_if_held, run_lock_key, run_lock_store
from ads_core.train.trl.steps import StepWriter, keep_steps_up_to, read_steps

HOLD = """
import sys, time
from pathlib import Path
from ads_core.train.resume.lock import holding_run
with holding_run(sys.argv[1]):
    Path(sys.argv[2]).write_text("held")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.05)
"""


def test_a_second_run_on_the_folder_is_refused_in_one_line_naming_the_holder(tmp_path: Path):
    run_dir, held, done = tmp_path / "run", tmp_path / "held", tmp_path / "done"
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir), str(held), str(done)])
    try:
        while not held.exists():  # the child's own signal that it holds the folder
            assert child.poll() is None, "the holder died"
            time.sleep(0.02)
        with pytest.raises(RunStateError) as info:
            with holding_run(str(run_dir) + "/"):  # another spelling of the same folder
                pass
        text = str(info.value)
        assert "in use by another training run" in text and f":{child.pid} " in text and "\n" not in text
    finally:
        done.write_text("")
        child.wait(30)
    with holding_run(str(run_dir)):  # released at the holder's end: the next run gets it
        pass


@pytest.mark.parametrize("lock_dir_for", ["holder", "second"])
def test_two_runs_one_with_ads_lock_dir_one_without_never_both_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lock_dir_for: str
):
    """Issue 41: ADS_LOCK_DIR moved the run folder's lock instead of adding one, so a run with it and a run without
    it both trained one folder (steps.jsonl = [1, 1, 2, 2, 3, 3])."""
    run_dir, held, done, locks = tmp_path / "run", tmp_path / "held", tmp_path / "done", tmp_path / "locks"
    env = {k: v for k, v in os.environ.items() if k != "ADS_LOCK_DIR"}
    if lock_dir_for == "holder":
        env["ADS_LOCK_DIR"] = str(locks)
    else:
        monkeypatch.setenv("ADS_LOCK_DIR", str(locks))
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir), str(held), str(done)], env=env)
    try:
        while not held.exists():
            assert child.poll() is None, "the holder died"
            time.sleep(0.02)
        with pytest.raises(RunStateError, match=f":{child.pid} "):
            refuse_if_held(str(run_dir))
        with pytest.raises(RunStateError, match=f":{child.pid} "):
            with holding_run(str(run_dir)):
                pass
    finally:
        done.write_text("")
        child.wait(30)
    assert run_lock_store(str(run_dir)).location == str(run_dir / ".lock")  # the run folder's own, in both runs
    with holding_run(str(run_dir)) as fence:  # released by the holder: ours now (and the lock dir's, when we see it)
        assert fence is not None and fence.store == str(run_dir / ".lock")
        newest = DirLockStore(locks).newest(run_lock_key(str(run_dir)))
        assert newest is not None
        holder = os.getpid() if lock_dir_for == "second" else child.pid
        assert newest.record["pid"] == holder and bool(newest.record.get("released")) is (lock_dir_for == "holder")


def test_a_run_that_lost_its_lock_writes_no_step(tmp_path: Path):
    run_dir = tmp_path / "run"
    writer = StepWriter(run_dir / "steps.jsonl")
    with holding_run(str(run_dir)) as fence:
        writer.write({"step": 1})
        store, key = run_lock_store(str(run_dir)), run_lock_key(str(run_dir))
        assert fence is not None and store.create(key, fence.token + 1, {"holder": "thief", "pid": 1})  # taken over
        with pytest.raises(LockLost, match="lost the training run lock"):
            writer.write({"step": 2})
    assert [r["step"] for r in read_steps(run_dir / "steps.jsonl")] == [1]


def test_a_run_that_lost_its_lock_exports_no_final_model_and_logs_no_completion(tmp_path: Path, tiny_model_dir: Path):
    pytest.importorskip("trl")
    from types import SimpleNamespace

    from ads_core.train.options import TrainConfig
    from ads_core.train.trl.final import FINAL_DIR, export_final
    from ads_core.train.trl.hooks import COMPLETIONS_FILE, RunHooks

    run_dir = tmp_path / "run"
    run_dir.mkdir()  # training made it before the first step
    hooks = RunHooks(TrainConfig(trl={"log_completions": True}), str(run_dir))
    logs = {"prompt": ["1+1?"], "completion": ["\\boxed{2}"], "rewards": {"math": [1.0]}, "advantages": [0.0]}
    hooks.trainer = SimpleNamespace(_logs=logs, num_generations=1)
    with holding_run(str(run_dir)) as fence:
        hooks._write_completions(1)  # while the run holds its folder
        store, key = run_lock_store(str(run_dir)), run_lock_key(str(run_dir))
        assert fence is not None and store.create(key, fence.token + 1, {"holder": "thief", "pid": 1})  # taken over
        with pytest.raises(LockLost, match="lost the training run lock"):
            hooks._write_completions(2)
        with pytest.raises(LockLost, match="lost the training run lock"):
            facts = {"base_model": str(tiny_model_dir), "artifact": "a.parquet", "sampler": "ads", "experiment": "x"}
            export_final(str(run_dir), tiny_model_dir, 2, facts | {"prompts_per_step": 8, "lora_rank": 0})
    assert [r["step"] for r in read_steps(run_dir / COMPLETIONS_FILE)] == [1]
    assert not (run_dir / FINAL_DIR).exists() and not list(run_dir.glob(f".{FINAL_DIR}*"))  # no temp export left


def _checkpoint(root: Path, step: int, run_id: str = "r1") -> Path:
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    for name, size in (("model.safetensors", 300), ("optimizer.pt", 200), ("rng_state.pth", 50)):
        (folder / name).write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    mf.write_checkpoint(folder, step, run_id)
    return folder


@pytest.mark.parametrize("attack", ["flip", "truncate", "delete", "global_step", "manifest"])
def test_a_damaged_newest_checkpoint_is_skipped_naming_the_file(tmp_path: Path, attack: str):
    _checkpoint(tmp_path, 1)
    newest = _checkpoint(tmp_path, 2)
    optimizer = newest / "optimizer.pt"
    if attack == "flip":
        data = bytearray(optimizer.read_bytes())
        data[10] ^= 0xFF
        optimizer.write_bytes(bytes(data))
    elif attack == "truncate":
        optimizer.write_bytes(optimizer.read_bytes()[:-9])
    elif attack == "delete":
        optimizer.unlink()
    elif attack == "global_step":
        (newest / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    else:
        (newest / mf.CHECKPOINT_MANIFEST).write_text("{")
    choice = checkpoints.newest_verified(tmp_path, "r1")
    assert choice.chosen == (1, tmp_path / "checkpoint-1")
    assert len(choice.warnings) == 1 and "\n" not in choice.warnings[0]
    named = {"global_step": "trainer_state.json", "manifest": mf.CHECKPOINT_MANIFEST}.get(attack, "optimizer.pt")
    assert f"{newest / named}: " in choice.warnings[0], choice.warnings[0]
    checkpoints.set_aside(choice)
    assert (tmp_path / "rejected-checkpoint-2").is_dir() and not newest.exists()


def test_another_runs_checkpoint_and_a_manifestless_save_do_not_count(tmp_path: Path):
    _checkpoint(tmp_path, 1)
    _checkpoint(tmp_path, 2, run_id="other")
    killed = tmp_path / "checkpoint-3"
    killed.mkdir()
    (killed / "optimizer.pt").write_bytes(b"x")
    choice = checkpoints.newest_verified(tmp_path, "r1")
    assert choice.chosen is not None and choice.chosen[0] == 1 and "another run" in choice.warnings[1]
    lines = checkpoints.set_aside(choice)
    # a killed save (no manifest) newer than the resume point is moved aside like any failed one, never deleted
    assert not killed.exists() and (tmp_path / "rejected-checkpoint-3" / "optimizer.pt").read_bytes() == b"x"
    assert len(lines) == 2 and "checkpoint-3 skipped: " in lines[0] and "ads_manifest.json: missing" in lines[0]
    assert str(tmp_path / "rejected-checkpoint-3") in lines[0]


def test_a_complete_checkpoint_whose_manifest_was_deleted_is_moved_aside_whole(tmp_path: Path):
    _checkpoint(tmp_path, 1)
    newest = _checkpoint(tmp_path, 2)
    files = sorted(p.name for p in newest.iterdir() if p.name != mf.CHECKPOINT_MANIFEST)
    (newest / mf.CHECKPOINT_MANIFEST).unlink()
    (tmp_path / "rejected-checkpoint-2").mkdir()  # set aside by an earlier resume: kept too
    (tmp_path / "rejected-checkpoint-2" / "mark").write_text("older")
    choice = checkpoints.newest_verified(tmp_path, "r1")
    assert choice.chosen == (1, tmp_path / "checkpoint-1")
    lines = checkpoints.set_aside(choice)
    assert sorted(p.name for p in (tmp_path / "rejected-checkpoint-2.2").iterdir()) == files
    assert (tmp_path / "rejected-checkpoint-2" / "mark").read_text() == "older"
    assert lines == [
        f"checkpoint-2 skipped: {newest / mf.CHECKPOINT_MANIFEST}: missing (a save that did not finish, or a deleted "
        f"manifest); moved to {tmp_path / 'rejected-checkpoint-2.2'} (nothing deleted)"
    ]


def test_a_failed_save_is_removed_only_without_its_manifest(tmp_path: Path):
    complete = _checkpoint(tmp_path, 1)
    assert saving.remove_partial(str(complete)) is False and complete.is_dir()
    partial = tmp_path / "checkpoint-2"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")
    assert saving.remove_partial(str(partial)) is True and not partial.exists()


def test_rotation_keeps_the_newest_checkpoints_with_a_manifest(tmp_path: Path):
    for step in (1, 2, 3):
        _checkpoint(tmp_path, step)
    unfinished = tmp_path / "checkpoint-4"
    unfinished.mkdir()
    assert checkpoints.rotate(tmp_path, 2) == [tmp_path / "checkpoint-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-3", "checkpoint-4"]


def test_a_checkpoint_without_optimizer_or_rng_state_is_not_exact(tmp_path: Path):
    folder = _checkpoint(tmp_path, 1)
    assert checkpoints.missing_exact_state(folder) is None
    (folder / "rng_state.pth").unlink()
    assert "RNG state" in str(checkpoints.missing_exact_state(folder))


TRAJ = {"model": "m", "model_weights": "sha256:a", "artifact": "sha256:b", "trl.learning_rate": 1e-5, "trl.seed": 42}


def test_a_resume_with_other_options_is_refused_listing_each_unless_allowed(tmp_path: Path):
    run_id = identity.start_run(tmp_path, dict(TRAJ))
    doc = identity.read_run(tmp_path)
    assert doc is not None and doc["run_id"] == run_id
    now = {**TRAJ, "trl.learning_rate": 0.01, "trl.seed": 7}
    with pytest.raises(RunStateError) as info:
        identity.check_resume(str(tmp_path), doc, now, [], 3)
    text = str(info.value)
    assert "trl.learning_rate: run 1e-05, now 0.01" in text and "trl.seed: run 42, now 7" in text
    assert "allow_change trl.learning_rate" in text and "\n" not in text
    with pytest.raises(RunStateError, match=r"trl\.seed"):  # allowing one leaves the other refused
        identity.check_resume(str(tmp_path), doc, now, ["learning_rate"], 3)
    notes = identity.check_resume(str(tmp_path), doc, now, ["learning_rate", "trl.seed"], 3)
    assert notes and "trl.learning_rate 1e-05 -> 0.01" in notes[0]
    recorded = identity.read_run(tmp_path)
    assert recorded is not None and recorded["trajectory"]["trl.learning_rate"] == 0.01
    assert [(c["step"], c["field"]) for c in recorded["changes"]] == [(3, "trl.learning_rate"), (3, "trl.seed")]
    with pytest.raises(TrainOptionError, match="not a field"):
        identity.check_resume(str(tmp_path), recorded, now, ["learning_rat"], 3)
    with pytest.raises(RunStateError, match="artifact can't change"):
        identity.check_resume(str(tmp_path), recorded, {**now, "artifact": "sha256:c"}, ["artifact"], 3)


def test_steps_logged_twice_are_repaired_to_each_step_once(tmp_path: Path):
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps({"step": s, "n": i}) + "\n" for i, s in enumerate([1, 1, 2, 2, 3, 3, 4, 4])))
    problem = keep_steps_up_to(path, 3)
    assert problem is not None and "twice" in problem
    assert [(r["step"], r["n"]) for r in read_steps(path)] == [(1, 1), (2, 3), (3, 5)]
    path.write_text(json.dumps({"step": 3}) + "\n")
    assert "lacks steps 1, 2" in str(keep_steps_up_to(path, 3))
    os.remove(path)
    assert "missing" in str(keep_steps_up_to(path, 3))


def test_a_model_that_does_not_fit_the_checkpoint_is_one_short_line():
    """PyTorch's wall of size mismatches (4,510 characters on the issue's policy) summed up: the first tensor, the
    count; the trainer adds the checkpoint and the option (``_load_from_checkpoint``)."""
    import torch

    saved = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(6)]).state_dict()
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(6)])
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(saved)
    line = saving.mismatch_line(info.value)
    assert line is not None and line.startswith("12 weights differ in shape (0.weight: checkpoint torch.Size([8, 8])")
    assert len(line) < 200 and saving.mismatch_line(RuntimeError("probability tensor contains nan")) is None


def test_non_finite_loss_gradients_or_weights_are_named():
    import torch

    assert saving.nonfinite_logs({"loss": 0.5, "grad_norm": 1.0}) is None
    assert saving.nonfinite_logs({"loss": float("nan")}) == "the loss is nan"
    assert saving.nonfinite_logs({"loss": 0.1, "grad_norm": float("inf")}) == "the gradient norm is inf"
    model = torch.nn.Linear(2, 2)
    assert saving.nonfinite_weights(model) is None
    with torch.no_grad():
        model.bias[1] = float("nan")
    assert saving.nonfinite_weights(model) == "weight bias holds NaN or infinite values"


def test_disk_errors_during_a_save_are_recognised_whoever_raised_them(tmp_path: Path):
    folder = str(tmp_path / "checkpoint-3")
    full = saving.save_failure(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), folder)
    assert full is not None and full.startswith("No space left on device, ") and "MiB free" in full
    torch_zip = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 6464 vs 6356")
    assert saving.save_failure(torch_zip, folder) is not None
    assert saving.save_failure(ValueError("something else"), folder) is None
