"""Corrupted saved sampler states (issue 13, item 7): a bad field is a ValueError that names it, a refused
load leaves the sampler exactly as it was, and a state that is accepted still samples and updates.

The fuzz mutates real saved states (ADS, uniform, DOTS-style) at every node: dropped and extra keys, wrong
types, out-of-range and huge ints, NaN/inf, wrong lengths, a corrupted PCG64 state, arbitrary JSON.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from ads_core.config.sampler import (
    ADSSamplerConfig,
    DifficultyTargetedConfig,
    DynamicSamplingConfig,
    UniformSamplerConfig,
)
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.baselines import DifficultyTargetedSampler, UniformSampler
from ads_core.sampler.dynamic import DynamicSamplingSampler
from ads_core.sampler.state import SamplerStateError

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
GRID = np.arange(9) / 8
Path = tuple[Any, ...]


def dataset(sizes: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(-5, 300), size=len(sizes), replace=False)
    cid, rank = np.repeat(ids, sizes), np.concatenate([rng.permutation(s) for s in sizes])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm]


CID, RANK = dataset([3, 12, 7, 20, 1, 9], seed=0)  # a 1-row and a 3-row cluster: windows smaller than B
CID2, RANK2 = dataset([2, 9], seed=1)  # fewer clusters than active slots
CASES: dict[str, Callable[[], Any]] = {
    "ads": lambda: ADSSampler(CID, RANK, ADSSamplerConfig(active_clusters=3, mini_cluster_size=4, reset_every=5)),
    "ads_few_clusters": lambda: ADSSampler(
        CID2, RANK2, ADSSamplerConfig(active_clusters=3, mini_cluster_size=4, reset_every=0, prob_floor=0.1, seed=7)
    ),
    "ads_frontier": lambda: ADSSampler(
        CID, RANK, ADSSamplerConfig(active_clusters=2, mini_cluster_size=3, window="frontier", frontier_band=0.3)
    ),
    "ads_skip": lambda: ADSSampler(
        CID, RANK, ADSSamplerConfig(active_clusters=3, mini_cluster_size=4, reset_every=5, skip=True, skip_max=0.5)
    ),
    "ads_frontier_skip": lambda: ADSSampler(
        CID, RANK, ADSSamplerConfig(active_clusters=2, mini_cluster_size=3, window="frontier", skip=True)
    ),
    "uniform": lambda: UniformSampler(CID, RANK, UniformSamplerConfig(batch_size=7, seed=3)),
    "dynamic": lambda: DynamicSamplingSampler(CID, RANK, DynamicSamplingConfig(batch_size=5, max_draws=3, seed=2)),
    "dots": lambda: DifficultyTargetedSampler(
        CID, RANK, DifficultyTargetedConfig(batch_size=6, memory_size=10, candidate_pool=20, seed=5)
    ),
}
# Two fields checked against each other: a plausible change to one may be reported on the other.
AT_MOST_LISTS = {("used_rows",), ("solved_rows",), ("failed_rows",)}  # one more entry names the entry
PARTNERS = {
    "steps": {"steps", "steps_in_epoch"},
    "memory_rows": {"memory_rows", "memory_success"},
    "draws": {"draws", "informative"},
    "used_rows": {"used_rows", "use_counts"},
    "solved_rows": {"solved_rows", "solved_streaks", "failed_rows"},
    "failed_rows": {"failed_rows", "failed_streaks"},
}


def drive(s: Any, steps: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        batch = s.next_batch()
        s.update(batch, rng.choice(GRID, len(batch)))
    return s


@functools.cache
def saved_json(case: str) -> str:
    return json.dumps(drive(CASES[case](), 7, seed=1).state_dict())


def saved(case: str) -> dict[str, Any]:
    """A real saved state, through JSON as a checkpoint holds it (a fresh copy each call)."""
    return json.loads(saved_json(case))


def target(case: str) -> Any:
    """The sampler a state is loaded into: in another state than the saved one, so a partial load shows."""
    return drive(CASES[case](), 2, seed=2)


def field(path: Path) -> str:
    return "state" + "".join(f"[{key!r}]" for key in path)


def nodes(value: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    out = [(path, value)]
    if isinstance(value, dict):
        for key, v in value.items():
            out += nodes(v, (*path, key))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += nodes(v, (*path, i))
    return out


def get(state: Any, path: Path) -> Any:
    for key in path:
        state = state[key]
    return state


def put(state: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    get(state, path[:-1])[path[-1]] = value
    return state


def is_exact(case: str, path: Path) -> bool:
    """Leaves that must equal this sampler's own value (any change refuses the state)."""
    if path[0] in ("kind", "version", "n_rows", "fingerprint", "window") or path == ("rng", "bit_generator"):
        return True
    return path[0] == "config" and not (path[1] == "seed" and case.startswith("ads"))


def invalid_leaf_values(case: str, path: Path, value: Any) -> list[Any]:
    """Replacements that are wrong at this leaf whatever the other fields hold."""
    out: list[Any] = [repr(value), [value], {"v": value}, True, False]
    if value is not None:
        out.append(None)
    if is_exact(case, path):
        same_type_other = {
            int: lambda v: v + 1,
            float: lambda v: v + 0.125,
            str: lambda v: v + "x",
            bool: lambda v: not v,
        }
        out.append(same_type_other[type(value)](value) if value is not None else 0)
        return [v for v in out if not (type(v) is type(value) and v == value)]  # a bool's True/False above
    if isinstance(value, int):
        out += [value + 0.5, float(value), -1 - value, -(2**200), float("nan"), float("inf")]
        if path != ("config", "seed"):  # the only int with no upper bound
            out += [2**200, 10**5000]
    else:
        out += [float("nan"), float("inf"), -float("inf"), -0.25 - value, 1.25 + value, 10**400]
    return out


def invalid_mutations(case: str) -> list[tuple[Path, Any, set[str]]]:
    """Every (path, new value, fields the error may name) that must be refused."""
    state, muts = saved(case), []
    partner = {
        "memory_rows": "memory_success",
        "memory_success": "memory_rows",
        "used_rows": "use_counts",
        "use_counts": "used_rows",
        "solved_rows": "solved_streaks",
        "solved_streaks": "solved_rows",
        "failed_rows": "failed_streaks",
        "failed_streaks": "failed_rows",
    }
    for path, value in nodes(state):
        if isinstance(value, dict):
            muts += [(path, [], {field(path)})]
            muts += [((*path, key), "<drop>", {field((*path, key))}) for key in value]
            muts += [((*path, "bogus"), 0, {field((*path, "bogus"))})]
        elif isinstance(value, list):
            named = {field(path)} | ({field((partner[path[0]],))} if path in {(k,) for k in partner} else set())
            extra = copy.deepcopy(value[-1]) if value else 0
            # an at-most list (used rows) takes one more entry: then the repeated entry itself is named
            longer = named | ({field((*path, len(value)))} if path in AT_MOST_LISTS else set())
            muts += [(path, {}, {field(path)}), (path, "abc", {field(path)}), (path, [*value, extra], longer)]
            if value:
                muts += [(path, value[:-1], named)]
        else:
            muts += [(path, v, {field(path)}) for v in invalid_leaf_values(case, path, value)]
    return muts


MUTATIONS = {case: invalid_mutations(case) for case in CASES}


def mutate(case: str, path: Path, value: Any) -> Any:
    state = saved(case)
    if value == "<drop>":
        del get(state, path[:-1])[path[-1]]
        return state
    return put(state, path, value)


def snapshot(s: Any) -> str:
    return json.dumps(s.state_dict(), sort_keys=True)


def assert_refused_and_unchanged(case: str, state: Any, fields: set[str] | None = None) -> SamplerStateError:
    s, twin = target(case), target(case)
    before = snapshot(s)
    with pytest.raises(ValueError) as info:
        s.load_state_dict(state)
    err = info.value
    assert isinstance(err, SamplerStateError), repr(err)
    assert str(err).startswith(f"{err.field}: ")
    if fields is not None:
        assert err.field in fields, (str(err), fields)
    assert snapshot(s) == before  # nothing was half-loaded
    for _ in range(2):  # and the generator, windows and memory behave as before
        b1, b2 = s.next_batch(), twin.next_batch()
        assert b1.tolist() == b2.tolist()
        succ = np.full(len(b1), 0.625)
        s.update(b1, succ)
        twin.update(b2, succ)
    return err


def assert_works_after_load(case: str, state: dict[str, Any]) -> None:
    s = target(case)
    s.load_state_dict(state)
    got = s.state_dict()
    assert got["config"] == CASES[case]().state_dict()["config"]  # a sampler keeps its own config (seed too)
    assert {**got, "config": None} == {**state, "config": None}  # everything else is what was loaded
    rng = np.random.default_rng(0)
    for _ in range(3):
        batch = s.next_batch()
        assert batch.dtype == np.int64 and batch.shape == (s.batch_size,)
        assert np.all((batch >= 0) & (batch < s.n_rows))
        s.update(batch, rng.choice(GRID, len(batch)))
    s.metrics()


# -- the fuzz -------------------------------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(sorted(CASES)), st.data())
def test_invalid_state_is_refused_naming_the_field_and_changes_nothing(case, data):
    # Draw an index, not the mutation: when another thread of this worker touches the global `random` during a
    # draw, Hypothesis formats its strategy's elements into a warning, and repr(10**5000) raises ValueError.
    index = data.draw(st.integers(0, len(MUTATIONS[case]) - 1), label="mutation index")
    path, value, fields = MUTATIONS[case][index]
    shown = f"an int of {value.bit_length()} bits" if isinstance(value, int) else repr(value)[:80]
    note(f"mutation {index}: {path} <- {shown}")
    assert_refused_and_unchanged(case, mutate(case, path, value), fields)


def test_every_invalid_mutation_of_every_node_is_refused():
    """The exhaustive pass behind the fuzz (a few thousand loads): no node is left unchecked."""
    total = 0
    for case, muts in MUTATIONS.items():
        for path, value, fields in muts:
            s = target(case)
            before = snapshot(s)
            with pytest.raises(SamplerStateError) as info:
                s.load_state_dict(mutate(case, path, value))
            assert info.value.field in fields, (case, path, value, str(info.value))
            assert snapshot(s) == before
            total += 1
    assert total > 400


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def plausible_values(draw: st.DrawFn, value: Any) -> Any:
    """Mostly right-typed, in-range values (which may or may not be consistent), plus arbitrary JSON."""
    if isinstance(value, bool) or draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    if isinstance(value, int):
        return draw(st.sampled_from([value - 3, value - 1, value + 1, value + 3]) | st.integers(0, 40))
    if isinstance(value, float):
        return draw(st.floats(0.0, 1.0))
    if isinstance(value, list) and value:
        return draw(st.permutations(value))
    return draw(json_values)


@FUZZ
@given(st.sampled_from(sorted(CASES)), st.data())
def test_any_change_is_either_refused_cleanly_or_works(case, data):
    path, value = data.draw(st.sampled_from(nodes(saved(case))[1:]), label="node")
    new = data.draw(plausible_values(value), label="value")
    state = put(saved(case), path, new)
    try:
        target(case).load_state_dict(copy.deepcopy(state))
    except SamplerStateError as err:
        event("refused")
        top = {field((key,)) for key in PARTNERS.get(path[0], {path[0]})}
        assert any(err.field.startswith(name) for name in top) or err.field == "state", (str(err), path)
        assert_refused_and_unchanged(case, state)
    else:
        event("accepted")
        assert_works_after_load(case, state)


# -- the cases of the issue, spelled out ------------------------------------------------------------------


MT19937_STATE = np.random.MT19937(0).state


def _set(path: Path, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda state: put(state, path, value)


def _drop(path: Path) -> Callable[[dict[str, Any]], Any]:
    return lambda state: mutate("ads", path, "<drop>")


_SIZES = [len(w) for w in json.loads(saved_json("ads"))["windows"]]
ONE = _SIZES.index(1)  # the 1-row cluster's window
FULL = _SIZES.index(4)  # a window of B = 4 positions in a larger cluster


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(("steps",), -100), r"state['steps']: expected an int in [0, 9223372036854775807], got -100"),
        (_set(("steps",), 3.9), "state['steps']: expected an int in [0, 9223372036854775807], got 3.9"),
        (_set(("steps",), 7.0), "state['steps']: expected an int in [0, 9223372036854775807], got 7.0"),
        (_set(("steps",), "7"), "state['steps']: expected an int in [0, 9223372036854775807], got '7'"),
        (_set(("steps",), True), "state['steps']: expected an int in [0, 9223372036854775807], got True"),
        (_set(("steps",), 10**5000), "state['steps']: expected an int in [0, 9223372036854775807], got an int of"),
        (_set(("steps_in_epoch",), 5), "state['steps_in_epoch']: expected an int in [0, 4], got 5"),
        (_set(("windows", FULL, 0), "0"), f"state['windows'][{FULL}][0]: expected an int in [0, "),
        (_set(("windows", FULL, 1), 0), f"state['windows'][{FULL}][1]: expected an int in ["),
        (_set(("windows", ONE), [0, 1]), f"state['windows'][{ONE}]: expected 1 positions"),
        (_set(("windows", ONE, 0), 1), f"state['windows'][{ONE}][0]: expected an int in [0, 0]"),
        (_set(("windows",), [[0]]), "state['windows']: expected 6 windows, one per cluster, got 1"),
        (_set(("r", 2), float("nan")), "state['r'][2]: expected a finite number in [0, 1], got nan"),
        (_set(("p", 0), float("inf")), "state['p'][0]: expected a finite number in [0, 1], got inf"),
        (_set(("p",), [0.5] * 6), "state['p']: expected a distribution summing to 1, got sum 3.0"),
        (_set(("last_counts",), [0, 0]), "state['last_counts']: expected 3 counts (easier, keep, harder), got 2"),
        (_set(("last_counts",), [20, 20, 20]), "state['last_counts']: expected counts summing to at most"),
        (_drop(("r",)), "state['r']: missing"),
        (_drop(("config", "alpha")), "state['config']['alpha']: missing"),
        (_set(("extra",), 1), "state['extra']: unexpected key"),
        (_set(("config", "alpha"), 0.5), "state['config']['alpha']: state was saved with a different config"),
        (_set(("config", "mini_cluster_size"), 4.0), "state['config']['mini_cluster_size']: state was saved with"),
        (_set(("config", "seed"), -1), "state['config']['seed']: expected an int >= 0, got -1"),
        (_set(("kind",), "UniformSampler"), "state['kind']: expected 'ADSSampler', got 'UniformSampler'"),
        (_set(("version",), True), "state['version']: expected state version 3, got True"),
        (_set(("n_rows",), 51), "state['n_rows']: state was saved for another artifact: expected 52 rows, got 51"),
        (_set(("fingerprint",), "0" * 32), "state['fingerprint']: state was saved for another artifact"),
        (_set(("rng",), MT19937_STATE), "state['rng']['bit_generator']: expected 'PCG64' (numpy's default_rng)"),
        (_set(("rng", "bit_generator"), "MT19937"), "state['rng']['bit_generator']: expected 'PCG64'"),
        (_set(("rng", "state", "inc"), 2), "state['rng']['state']['inc']: expected an odd int"),
        (_set(("rng", "state", "state"), 2**128), "state['rng']['state']['state']: expected an int in [0, 3402"),
        (_set(("rng", "has_uint32"), 5), "state['rng']['has_uint32']: expected an int in [0, 1], got 5"),
        (_set(("rng", "uinteger"), 2**32), "state['rng']['uinteger']: expected an int in [0, 4294967295]"),
        (_drop(("rng", "state", "inc")), "state['rng']['state']['inc']: missing"),
        (_set((), [1, 2]), "state: expected a dict (a saved ADSSampler state), got [1, 2]"),
    ],
)
def test_issue_cases_name_the_field(edit, message):
    state = saved("ads")
    assert state["steps_in_epoch"] == 2 and state["n_rows"] == 52  # what the cases above rely on
    err = assert_refused_and_unchanged("ads", edit(state))
    assert str(err).startswith(message), str(err)


def test_numpy_accepts_a_bad_generator_state_that_the_sampler_refuses():
    """Why the RNG state is checked by us: numpy sets has_uint32=5 silently and fails others halfway."""
    bit_generator = np.random.PCG64(0)
    bad = saved("ads")["rng"]
    bad["has_uint32"] = 5
    bit_generator.state = bad  # no error from numpy
    assert_refused_and_unchanged("ads", put(saved("ads"), ("rng",), bad), {"state['rng']['has_uint32']"})


@pytest.mark.parametrize(
    ("case", "path", "value", "message"),
    [
        ("uniform", ("cursor",), 53, "state['cursor']: expected an int in [0, 52], got 53"),
        ("uniform", ("epoch",), "1", "state['epoch']: expected an int in [0, 9223372036854775807], got '1'"),
        ("uniform", ("config", "seed"), 4, "state['config']['seed']: state was saved with a different config"),
        ("dots", ("memory_rows", 0), 52, "state['memory_rows'][0]: expected an int in [0, 51], got 52"),
        ("dots", ("memory_success", 1), -0.5, "state['memory_success'][1]: expected a finite number in [0, 1]"),
        ("dots", ("memory_rows",), list(range(11)), "state['memory_rows']: expected at most 10 rows, got 11"),
        ("dots", ("memory_success",), [0.5], "state['memory_success']: expected 10 values, one per memory row"),
        ("dots", ("rng", "state", "inc"), -1, "state['rng']['state']['inc']: expected an int in [0, "),
    ],
)
def test_baseline_cases_name_the_field(case, path, value, message):
    err = assert_refused_and_unchanged(case, put(saved(case), path, value))
    assert str(err).startswith(message), str(err)


# -- valid states ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("steps", [0, 1, 6, 13])
def test_valid_states_round_trip_exactly(case, steps):
    original = drive(CASES[case](), steps, seed=4)
    state = json.loads(json.dumps(original.state_dict()))
    s = target(case)
    s.load_state_dict(state)
    assert s.state_dict() == original.state_dict()
    rng = np.random.default_rng(5)
    for _ in range(6):
        b1, b2 = original.next_batch(), s.next_batch()
        assert b1.tolist() == b2.tolist()
        succ = rng.choice(GRID, len(b1))
        original.update(b1, succ)
        s.update(b2, succ)
    assert s.state_dict() == original.state_dict()


def test_ads_seed_is_free_and_numpy_values_are_accepted():
    """The saved generator supersedes the seed; numpy scalars and arrays (a state built in memory) load too."""
    state = saved("ads")
    state["config"]["seed"] = 2**70
    loaded = {**state, "steps": np.int64(state["steps"]), "r": np.array(state["r"]), "p": tuple(state["p"])}
    s = target("ads")
    s.load_state_dict(loaded)
    assert s.state_dict() == {**state, "config": CASES["ads"]().state_dict()["config"]}
    assert_works_after_load("ads", state)


def test_error_survives_copy_with_its_field():
    """Prefect and multiprocessing rebuild exceptions from their args."""
    with pytest.raises(SamplerStateError) as info:
        target("ads").load_state_dict(put(saved("ads"), ("steps",), -1))
    clone = copy.copy(info.value)
    assert (clone.field, str(clone)) == ("state['steps']", str(info.value))
    assert re.match(r"state\['steps'\]: expected an int", str(clone))


def test_one_error_class_and_check_ads_state_only_parses():
    """The baselines raise the same class; ``check_ads_state`` returns the state, assigns nothing."""
    from ads_core.sampler import ads_state

    with pytest.raises(SamplerStateError):  # raised by the helpers the baselines import
        target("uniform").load_state_dict(put(saved("uniform"), ("cursor",), -1))
    state, s = saved("ads"), target("ads")
    before = snapshot(s)
    parsed = ads_state.check_ads_state(copy.deepcopy(state), s)
    assert snapshot(s) == before
    assert (parsed.steps, parsed.steps_in_epoch) == (state["steps"], state["steps_in_epoch"])
    assert (parsed.r.tolist(), parsed.p.tolist(), parsed.last_counts.tolist()) == (
        state["r"], state["p"], state["last_counts"])  # fmt: skip
    assert [row[: len(w)].tolist() for row, w in zip(parsed.windows, state["windows"], strict=True)] == state["windows"]
    assert parsed.rng.bit_generator.state == state["rng"]
