"""The sampler boundary (issue 51): what a sampler's `next_batch` returns is checked where a trainer takes it, before
any row is rolled out. Every index is a Python or NumPy integer (not a bool, float or str) in [0, n_rows) and the
batch is exactly as long as the step takes; anything else is one line naming the sampler, the step and the value.
TRL's prompt feed and verl's train sampler call the same check, and verl's launcher ends on it with one `error:`
line and status 2. (`ads train` with such a kind: tests/integrations/test_trl_sampler_boundary.py.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ads_core.sampler.base import SamplerBatchError, checked_batch

WHERE = "sampler 'my_pkg.mod:mine' at step 5 returned"


def check(batch: Any) -> list[int]:
    """BATCH as sampler my_pkg.mod:mine's draw for step 5 of a 3-row batch over a 5-row training set."""
    return checked_batch(batch, n_rows=5, batch_size=3, sampler="my_pkg.mod:mine", step=5)


@pytest.mark.parametrize(
    "batch",
    [
        [4, 0, 2],
        (4, 0, 2),
        np.array([4, 0, 2], dtype=np.int64),
        np.array([4, 0, 2], dtype=np.uint8),
        [np.int32(4), np.int64(0), 2],
        np.array([4, 0, 2], dtype=object),
    ],
)
def test_integer_rows_of_the_training_set_pass_as_python_ints(batch: Any):
    rows = check(batch)
    assert rows == [4, 0, 2] and all(type(r) is int for r in rows)


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (np.array([1.7, 0.7, 2.7]), "1.7 (float) at position 0; row positions are integers in [0, 5)"),
        ([4, 0, 2.0], "2.0 (float) at position 2; row positions are integers in [0, 5)"),  # integral floats too
        ([4, 0, float("nan")], "nan (float) at position 2; row positions are integers in [0, 5)"),
        ([4, "0", 2], "'0' (str) at position 1; row positions are integers in [0, 5)"),
        (np.array(["4", "0", "2"]), "'4' (str) at position 0; row positions are integers in [0, 5)"),
        ([4, True, 2], "True (bool) at position 1; row positions are integers in [0, 5)"),
        (np.array([True, False, True]), "True (bool) at position 0; row positions are integers in [0, 5)"),
        ([4, 0, -1], "row -1 at position 2, outside the training set's rows [0, 5)"),
        (np.array([4, 5, 2]), "row 5 at position 1, outside the training set's rows [0, 5)"),
        ([4, 0, 2, 1], "4 row positions; the step takes exactly 3"),
        (np.array([4, 0]), "2 row positions; the step takes exactly 3"),
        (np.array([[4, 0, 2]]), "array([[4, 0, 2]]), not a 1-D sequence of row positions"),
        (None, "None, not a 1-D sequence of row positions"),
    ],
)
def test_anything_else_is_one_line_naming_the_sampler_the_step_and_the_value(batch: Any, expected: str):
    with pytest.raises(SamplerBatchError) as caught:
        check(batch)
    assert str(caught.value) == f"{WHERE} {expected}"


class Fixed:
    """A sampler whose every batch is BATCH (row positions or not)."""

    def __init__(self, batch: Any, batch_size: int = 3, n_rows: int = 5) -> None:
        self.batch, self.batch_size, self.n_rows = batch, batch_size, n_rows
        self.draws = 0

    def next_batch(self) -> Any:
        self.draws += 1
        return self.batch


def test_trls_feed_refuses_a_bad_batch_before_handing_out_any_row():
    pytest.importorskip("torch")
    from ads_core.train.trl.feed import FeedbackSampler

    feed = FeedbackSampler(Fixed([4, 0, 5]), "my_pkg.mod:mine", num_generations=2, repeat_count=1, n_rows=5, steps=4)
    rows = iter(feed)
    with pytest.raises(SamplerBatchError, match=r"^sampler 'my_pkg.mod:mine' at step 1 returned row 5 at position 2"):
        next(rows)  # the dataloader's first index: nothing of the batch was handed out
    assert (feed.draws, feed.pending) == (0, [])  # and nothing counts as drawn, so no checkpoint holds it
    feed.updates = 3  # dynamic sampling's extra draws inside step 3
    with pytest.raises(SamplerBatchError, match=r"^sampler 'my_pkg.mod:mine' at step 3 returned row 5"):
        feed.draw_extra()
    good = FeedbackSampler(Fixed(np.array([4, 0, 2])), "mine", num_generations=2, repeat_count=1, n_rows=5, steps=4)
    assert [next(r) for r in [iter(good)] for _ in range(6)] == [4, 4, 0, 0, 2, 2]


def test_verls_train_sampler_refuses_a_bad_batch_before_the_loader_takes_a_row():
    pytest.importorskip("torchdata")
    from torchdata.stateful_dataloader import StatefulDataLoader

    from ads_core.train.verl.sampler import ADSVerlSampler

    sampler = ADSVerlSampler(Fixed(np.array([4.5, 0.5, 2.5])), np.arange(100, 105), kind="my_pkg.mod:mine")
    loader = StatefulDataLoader(list(range(5)), batch_size=3, sampler=sampler, num_workers=0, drop_last=True)
    with pytest.raises(SamplerBatchError) as caught:
        next(iter(loader))  # verl builds its train loader this way (tests/integrations/test_verl_loop.py)
    assert str(caught.value) == (
        "sampler 'my_pkg.mod:mine' at step 1 returned 4.5 (float) at position 0; row positions are integers in [0, 5)"
    )
    sampler.step_of = lambda: 7  # ADSRayPPOTrainer links its global step
    with pytest.raises(SamplerBatchError, match=r"^sampler 'my_pkg.mod:mine' at step 7 returned 4.5 \(float\)"):
        next(iter(loader))


def test_verls_launcher_ends_on_a_bad_batch_with_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    """The batch is refused inside Ray's task runner; `ray.get` raises Ray's error as an instance of ours too."""
    pytest.importorskip("hydra")
    from ray.exceptions import RayTaskError

    from ads_core.train.verl import main as verl_main

    line = "sampler 'my_pkg.mod:mine' at step 2 returned row 9 at position 7, outside the training set's rows [0, 9)"

    def run(config: Any) -> None:
        error = RayTaskError("ADSTaskRunner.run", "Traceback (most recent call last): ...", SamplerBatchError(line))
        raise error.as_instanceof_cause()

    monkeypatch.setattr(verl_main, "finalize", lambda config: None)
    monkeypatch.setattr(verl_main, "run", run)
    with pytest.raises(SystemExit) as exited:
        verl_main.main.__wrapped__({})
    assert exited.value.code == 2 and capsys.readouterr().err == f"error: {line}\n"
