"""Corrupted verl adapter states (issue 13, item 7): ``ADSVerlSampler.load_state_dict`` checks every field, the
nested ADS state too, before it assigns anything, so a refused load is a ``SamplerStateError`` naming the
field by its full path (``state['sampler']['steps']``) and leaves the adapter exactly as it was; a valid state
resumes at the saved batch. Also ``read_sampler_state``: a bad ``ads_sampler.json`` names the file.

The states are real ones, saved by an adapter driven through batches and updates, then mutated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.state import SamplerStateError
from ads_core.train.verl.sampler import STATE_KIND, ADSVerlSampler

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SIZES = [3, 12, 7, 20, 1, 9]  # a 1-row and a 3-row cluster: windows smaller than B
CFG = ADSSamplerConfig(active_clusters=3, mini_cluster_size=4, reset_every=5)
BS = CFG.batch_size
GRID = np.arange(9) / 8
DROP = object()  # a mutation that deletes the key
Path_ = tuple[Any, ...]


def columns() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    cid = np.repeat(rng.choice(np.arange(-5, 300), len(SIZES), replace=False), SIZES)
    rank = np.concatenate([rng.permutation(s) for s in SIZES])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm], rng.choice(10**6, len(cid), replace=False)  # sample ids: not row positions


CID, RANK, SIDS = columns()
STEPS = max(1, len(CID) // BS)  # the adapter's default steps_per_epoch


def adapter() -> ADSVerlSampler:
    return ADSVerlSampler(ADSSampler(CID, RANK, CFG), SIDS, cluster_ids=CID)


def drive(s: ADSVerlSampler, batches: int, seed: int) -> Iterator[int]:
    """Take ``batches`` whole batches from the live iterator (as torchdata's BatchSampler does), feeding each
    back; a new epoch starts when one runs out. Returns the live iterator."""
    rng, done, it = np.random.default_rng(seed), 0, iter(s)
    while done < batches:
        rows = [next(it, None) for _ in range(BS)]
        if rows[0] is None:  # epoch over
            it = iter(s)
            continue
        s.sampler.update(np.array(rows), rng.choice(GRID, BS))
        done += 1
    return it


def epoch(s: ADSVerlSampler) -> list[int]:
    """What a fresh ``iter()`` gives (what the trainer reads after a load): the rest of the epoch."""
    return list(iter(s))


@functools.cache
def saved_json() -> str:
    s = adapter()
    drive(s, 7, seed=1)  # into the second epoch (batch 3 of 4), past an ADS reset
    return json.dumps(s.state_dict())


def saved() -> dict[str, Any]:
    """A real saved adapter state, as a fresh copy."""
    return json.loads(saved_json())


def target() -> ADSVerlSampler:
    """The adapter a state is loaded into: another schedule, and a resume position already set, so a partial
    load of the schedule or of the position shows."""
    s = adapter()
    drive(s, 2, seed=2)
    s.load_state_dict(s.state_dict())  # next iter() resumes at batch 2 of the epoch
    return s


def snapshot(s: ADSVerlSampler) -> str:
    return json.dumps(s.state_dict(), sort_keys=True)


def field(path: Path_, root: str = "state") -> str:
    return root + "".join(f"[{key!r}]" for key in path)


def get(state: Any, path: Path_) -> Any:
    for key in path:
        state = state[key]
    return state


def mutate(path: Path_, value: Any) -> Any:
    state = saved()
    if not path:
        return value
    parent = get(state, path[:-1])
    if value is DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return state


def assert_refused_unchanged(state: Any, fields: set[str]) -> SamplerStateError:
    s, twin = target(), target()
    before = snapshot(s)
    with pytest.raises(ValueError) as info:
        s.load_state_dict(state)
    err = info.value
    assert isinstance(err, SamplerStateError), repr(err)
    assert err.field in fields, (str(err), fields)
    assert str(err).startswith(f"{err.field}: ")
    assert snapshot(s) == before  # nothing was half-loaded
    rest = epoch(s)  # same resume position (batch 2), same schedule and generator
    assert len(rest) == (STEPS - 2) * BS and rest == epoch(twin)
    assert epoch(s) == epoch(twin)
    return err


def test_the_fixture_can_show_a_partial_load():
    """The saved state differs from the target's in the schedule and in the position."""
    mine, theirs = target().state_dict(), saved()
    assert mine["sampler"] != theirs["sampler"] and mine["yielded"] != theirs["yielded"]
    assert theirs["yielded"] % BS == 0 and 0 < theirs["yielded"] < STEPS * BS


# -- the adapter's own fields -----------------------------------------------------------------------------

not_int = (
    st.floats(allow_nan=True)
    | st.text(max_size=4)
    | st.booleans()
    | st.none()
    | st.lists(st.integers(0, 3), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)
)


def other_than(value: int) -> st.SearchStrategy[Any]:
    """Anything but the int ``value``: other ints (huge ones too), the same number as a float/str/bool."""
    near = st.integers(-3, 3).map(lambda d: value + d).filter(lambda v: v != value)
    return (
        near
        | st.integers().filter(lambda v: v != value)
        | st.just(float(value))
        | st.just(str(value))
        | st.just(True)
        | st.just(value + 0.9)
        | st.just(2**200)
        | not_int
    )


BAD_TOP = {
    "kind": st.text(max_size=20).filter(lambda v: v != STATE_KIND) | st.sampled_from(["ADSSampler", None, 1]),
    "yielded": st.integers(max_value=-1)
    | st.integers(min_value=STEPS * BS + 1)
    | st.just(2**70)
    | st.just(str(BS))
    | st.just(3.9)
    | st.just(float(BS))
    | not_int,
    "batch_size": other_than(BS),
    "steps_per_epoch": other_than(STEPS),
    "sampler": st.none() | st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=3) | st.just({}),
}


@FUZZ
@given(st.sampled_from(sorted(BAD_TOP)), st.data())
def test_a_bad_adapter_field_is_refused_naming_it_and_changes_nothing(key: str, data: st.DataObject):
    value = data.draw(BAD_TOP[key] | st.just(DROP), label="value")
    fields = {f"state[{key!r}]"}
    if key == "sampler" and value == {}:
        fields = {"state['sampler']['kind']"}  # the first missing key of the nested state
    assert_refused_unchanged(mutate((key,), value), fields)


@FUZZ
@given(
    st.none()
    | st.integers()
    | st.text(max_size=8)
    | st.lists(st.integers(), max_size=3)
    | st.just([["kind", STATE_KIND]])
    | st.just(saved_json())
)
def test_a_state_that_is_not_a_dict_is_refused(value: Any):
    assert_refused_unchanged(value, {"state"})


def test_an_unexpected_key_is_refused():
    state = saved()
    state["epoch"] = 1
    assert_refused_unchanged(state, {"state['epoch']"})


@FUZZ
@given(st.sampled_from(["yielded", "batch_size", "steps_per_epoch"]), st.integers(-3, STEPS * BS + 3))
def test_near_values_are_refused_or_resume_exactly(key: str, value: int):
    """An int near the saved one: accepted exactly when the spec allows it (yielded in [0, steps*batch],
    batch size and steps per epoch those of this adapter), and an accepted one resumes at its batch."""
    allowed = {"yielded": 0 <= value <= STEPS * BS, "batch_size": value == BS, "steps_per_epoch": value == STEPS}
    state = mutate((key,), value)
    if not allowed[key]:
        assert_refused_unchanged(state, {f"state[{key!r}]"})
        return
    s = target()
    s.load_state_dict(state)
    start = state["yielded"] - state["yielded"] % BS  # mid-batch: the batch is drawn again
    assert s.state_dict() == {**state, "yielded": start}
    reference = ADSSampler(CID, RANK, CFG)
    reference.load_state_dict(state["sampler"])
    remaining = STEPS - start // BS
    assert epoch(s) == [r for _ in range(remaining) for r in reference.next_batch().tolist()]


# -- the nested ADS state ---------------------------------------------------------------------------------


def nodes(value: Any, path: Path_ = ()) -> list[tuple[Path_, Any]]:
    out = [(path, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, v in items:
        out += nodes(v, (*path, key))
    return out


def free_value(path: Path_) -> bool:
    """Leaves whose exact value is free (within its range): the rest must equal this sampler's own. The seed
    is free too: the saved generator state supersedes it."""
    if path == ("config", "seed"):
        return True
    return not (
        path[0] in ("kind", "version", "n_rows", "fingerprint", "config", "window") or path == ("rng", "bit_generator")
    )


def nested_mutations() -> list[tuple[Path_, Any, set[str]]]:
    """(path in the ADS state, bad value, fields the error may name): wrong whatever the other fields hold."""
    out: list[tuple[Path_, Any, set[str]]] = []
    for path, value in nodes(saved()["sampler"]):
        names = {field(path)} | ({field(("steps_in_epoch",))} if path == ("steps",) else set())
        if isinstance(value, dict):
            out += [(path, [], names), ((*path, "bogus"), 0, {field((*path, "bogus"))})]
            out += [((*path, key), DROP, {field((*path, key))}) for key in value]
        elif isinstance(value, list):
            out += [(path, "abc", names), (path, value[:-1], names), (path, [*value, value[-1]], names)]
        else:
            out += [(path, repr(value), names), (path, [value], names), (path, True, names)]
            if not free_value(path):
                other = 0 if value is None else value + ("x" if isinstance(value, str) else 1)
                out += [(path, other, names)]
            elif isinstance(value, int):
                out += [(path, -1 - value, names), (path, value + 0.5, names)]
                out += [(path, 2**200, names)] if path != ("config", "seed") else []  # the one unbounded int
            else:
                out += [(path, float("nan"), names), (path, 1.25 + value, names), (path, -0.25 - value, names)]
    return out


NESTED = nested_mutations()


@FUZZ
@given(st.sampled_from(NESTED))
def test_a_bad_nested_field_is_refused_naming_its_full_path(mutation: tuple[Path_, Any, set[str]]):
    path, value, fields = mutation
    full = {"state['sampler']" + name.removeprefix("state") for name in fields}
    assert_refused_unchanged(mutate(("sampler", *path), value), full)


def test_every_nested_mutation_is_refused():
    """The exhaustive pass behind the fuzz: no node of the nested state goes unchecked or misnamed."""
    for path, value, fields in NESTED:
        s = target()
        before = snapshot(s)
        with pytest.raises(SamplerStateError) as info:
            s.load_state_dict(mutate(("sampler", *path), value))
        assert info.value.field in {"state['sampler']" + f.removeprefix("state") for f in fields}, (path, value)
        assert snapshot(s) == before
    assert len(NESTED) > 150


# -- valid states -----------------------------------------------------------------------------------------


@FUZZ
@given(st.integers(0, 3 * STEPS), st.integers(0, 2**32))
def test_a_saved_state_round_trips_and_the_next_batches_match(batches: int, seed: int):
    """Save at any batch boundary (through JSON), load into an adapter in another state: the rest of the epoch
    and the next epoch are what the original gives, and a second save equals the first."""
    original = adapter()
    live = drive(original, batches, seed)
    state = json.loads(json.dumps(original.state_dict()))
    resumed = target()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    assert epoch(resumed) == list(live)  # the rest of the saved epoch, however much of it is left
    assert epoch(resumed) == epoch(original)  # and the next one


def test_restore_schedule_refuses_a_bad_state_and_changes_nothing():
    s, twin = target(), target()
    before = snapshot(s)
    bad = saved()["sampler"]
    bad["r"][0] = "0.5"
    with pytest.raises(SamplerStateError, match=r"^state\['r'\]\[0\]: "):
        s.restore_schedule(bad)
    with pytest.raises(SamplerStateError, match=r"^state: expected a dict"):
        s.restore_schedule([("r", 1)])
    assert snapshot(s) == before and epoch(s) == epoch(twin)


# -- ads_sampler.json (the one sampler checkpoint file, read by the trainer) -------------------------------


def write_state_file(folder: Path, doc: Any) -> Path:
    """A checkpoint as `_save_checkpoint` writes it (a SamplerCheckpoint), or raw bytes / JSON as an attacker might."""
    from ads_core.sampler.checkpoint import FILE, SamplerCheckpoint, write_checkpoint

    if isinstance(doc, SamplerCheckpoint):
        return write_checkpoint(folder, doc)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


def saved_file_doc(**changes: Any) -> Any:
    """What _save_checkpoint writes at step 6."""
    from ads_core.sampler.checkpoint import SamplerCheckpoint

    return SamplerCheckpoint(**({"kind": "ads", "step": 6, "sampler": saved()["sampler"]} | changes))


def good_file_bytes() -> bytes:
    from ads_core.sampler.checkpoint import encode

    return encode(saved_file_doc())


BAD_FILES = [  # (file, message, found without the adapter too)
    (b'{"global_step": 6, "sampler": ', "not a sampler checkpoint file", True),
    (b"[" * 100_000, "not a sampler checkpoint file", True),
    ({"global_step": 6, "sampler": {"kind": "ADSSampler"}}, "not a sampler checkpoint file", True),  # the old file
    (good_file_bytes()[:-40], "bad sampler checkpoint: ", True),  # truncated: no header or a checksum mismatch
    (good_file_bytes().replace(b'"steps":', b'"steps" :', 1), "checksum mismatch", True),  # changed after writing
    (saved_file_doc(step=5), "at ['step']: saved at step 5, but its folder is step 6", True),
    (saved_file_doc(kind="uniform"), "at ['kind']: the run was checkpointed with sampler 'uniform'", False),
    (saved_file_doc(pending=[[1, 2]]), "at ['pending']: expected none", False),
    (saved_file_doc(sampler={"kind": STATE_KIND}), "at ['sampler']['kind']: expected 'ADSSampler'", False),
]


@pytest.mark.parametrize(("doc", "message", "always"), BAD_FILES)
def test_a_bad_state_file_names_the_file(tmp_path: Path, doc: Any, message: str, always: bool):
    trainer = pytest.importorskip("ads_core.train.verl.trainer")
    path = write_state_file(tmp_path / "global_step_6", doc)
    for sampler in (None, adapter()) if always else (adapter(),):
        with pytest.raises(trainer.CheckpointStateError) as info:
            trainer.read_sampler_state(str(path.parent), sampler)
        text = str(info.value)
        assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text
        assert f"delete {path} to resume with a fresh sampler state" in text


@FUZZ
@given(mutation=st.sampled_from([m for m in NESTED if m[0]]))  # a non-dict "sampler": refused by the format
def test_a_bad_schedule_in_the_file_names_the_file_and_the_field(
    tmp_path_factory: pytest.TempPathFactory, mutation: tuple[Path_, Any, set[str]]
):
    trainer = pytest.importorskip("ads_core.train.verl.trainer")
    path, value, fields = mutation
    doc = saved_file_doc(sampler=mutate(("sampler", *path), value)["sampler"])
    folder = tmp_path_factory.mktemp("ckpt") / "global_step_6"
    file = write_state_file(folder, doc)
    s = adapter()
    before = snapshot(s)
    with pytest.raises(trainer.CheckpointStateError) as info:
        trainer.read_sampler_state(str(folder), s)
    named = {"['sampler']" + f.removeprefix("state") for f in fields}
    text = str(info.value)
    assert text.startswith(f"{file}: bad sampler checkpoint at ") and any(f"at {n}: " in text for n in named), text
    assert snapshot(s) == before  # reading checks, it never loads


def test_a_good_state_file_is_returned_and_loads(tmp_path: Path):
    trainer = pytest.importorskip("ads_core.train.verl.trainer")
    doc = saved_file_doc()
    folder = tmp_path / "global_step_6"
    write_state_file(folder, doc)
    s = adapter()
    checkpoint = trainer.read_sampler_state(str(folder), s)
    assert checkpoint == doc and s.sampler.steps == 0  # checked, not loaded
    s.restore_schedule(checkpoint.sampler)
    assert s.sampler.state_dict() == doc.sampler
    assert trainer.read_sampler_state(str(tmp_path / "global_step_7")) is None  # no file: nothing to restore
