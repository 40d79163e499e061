"""Quiet logs (issue 53): no third-party warning repeated in every SmolLM2 process, no "leaked semaphore objects"
after the demo's Ctrl-C, and a demo whose worker alone got SIGINT says which run it stopped and stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]

STOPPED_WITH_A_POOL = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def dies_with_parent():
    import ctypes, signal
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # as the demo's workers (PR_SET_PDEATHSIG)


if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=dies_with_parent)
    pool.submit(abs, -1).result()
    from ads_prefect.runtime.runner import stop_now
    stop_now(what="the demo")
"""


def test_ctrl_c_of_a_demo_with_worker_processes_leaks_no_semaphores(tmp_path: Path):
    """Regression: after the demo's Ctrl-C, the resource tracker warned "There appear to be 5 leaked semaphore
    objects to clean up at shutdown" (stop_now exits with os._exit, which skips the pool's finalizers)."""
    script = tmp_path / "stopped.py"
    script.write_text(STOPPED_WITH_A_POOL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    # the output is read to its end: the resource tracker (which warns as it exits) holds stderr open until then
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("interrupted: the demo stopped")
    assert "leaked semaphore" not in proc.stderr, proc.stderr


def test_a_demo_run_interrupted_in_its_worker_is_named_and_stops_the_demo(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    """Regression: when only the demo's worker processes got SIGINT, the demo went on to new runs without saying
    which ones had stopped."""
    from ads_core.config.demo import DemoConfig
    from ads_prefect.runtime import runner
    from ads_prefect.tasks import demo

    class Interrupted:
        def result(self) -> str:
            raise KeyboardInterrupt

    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(demo.runs, "finished", lambda *_: False)
    monkeypatch.setattr(demo, "_pool", SimpleNamespace(submit=lambda *_: Interrupted()))
    monkeypatch.setattr(runner.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    prepared = SimpleNamespace(policy="p", heldout="h")
    with pytest.raises(demo.DemoInterrupted, match="ads seed 3: interrupted in its worker process"):
        demo.train_demo_run.fn(DemoConfig(), "ads", 3, "a.parquet", prepared)
    assert sent == [(os.getpid(), signal.SIGINT)]  # the demo itself stops as on Ctrl-C: exit 130, runs kept
    assert capsys.readouterr().err == (
        "interrupted: the ads run, seed 3, stopped in its worker process (SIGINT); stopping the demo (finished runs "
        "are kept)\n"
    )
    monkeypatch.setattr(runner, "_interrupting", SimpleNamespace(is_set=lambda: True))
    with pytest.raises(demo.DemoInterrupted):
        demo.train_demo_run.fn(DemoConfig(), "uniform", 3, "a.parquet", prepared)
    assert len(sent) == 1  # a Ctrl-C the demo is already stopping on is not sent again


def test_a_bpe_tokenizer_that_asks_for_cleanup_is_loaded_without_it(tmp_path: Path):
    """Regression: every SmolLM2 log repeated transformers' "Ignoring clean_up_tokenization_spaces=True for BPE
    tokenizer" (SmolLM2's converted tokenizer asks for it; transformers ignores it for BPE and warns per process)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ads_core import models
    from ads_core.models.loading import load_for_training

    source = models.default_model_dir("tiny")
    tokenizer = AutoTokenizer.from_pretrained(str(source), clean_up_tokenization_spaces=True)
    assert tokenizer.clean_up_tokenization_spaces and type(tokenizer.backend_tokenizer.model).__name__ == "BPE"
    tokenizer.save_pretrained(tmp_path)
    AutoModelForCausalLM.from_pretrained(str(source)).save_pretrained(tmp_path)
    _, loaded = load_for_training(str(tmp_path), "cpu")
    assert loaded.clean_up_tokenization_spaces is False
    ids = tokenizer("Hello , world . It is 3 .")["input_ids"]
    assert loaded.decode(ids) == tokenizer.decode(ids)  # transformers ignored it for BPE: the text is the same


def test_a_sigint_a_library_turned_into_another_error_is_still_told_as_an_interruption():
    """Regression: a worker interrupted while importing failed with scipy's "ImportError: initialization failed" and
    the demo ended in that traceback, not in a line naming the run it stopped."""
    from ads_prefect.runtime.interrupts import run_interruptible

    def cut_short() -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as exc:  # what a C extension's module init does with it
            raise ImportError("initialization failed") from exc

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt, match="SIGINT, surfacing as ImportError: initialization failed"):
        run_interruptible(cut_short)
    assert signal.getsignal(signal.SIGINT) is before
    assert run_interruptible(abs, -2) == 2
    with pytest.raises(ImportError):  # without a SIGINT an error stays what it is
        run_interruptible(__import__, "no_such_module_anywhere")
