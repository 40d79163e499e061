"""Checks for saved sampler states: a checkpoint is untrusted input, so every field is validated first.

``load_state_dict`` of each sampler (ADS, the baselines, the verl adapter) builds its new state from these
helpers and assigns only once everything passed, so a refused state changes nothing. Each failure is a
``SamplerStateError`` naming the field, e.g. ``state['windows'][3][1]``; messages use a short repr, since a
corrupted state may hold a megabyte-long int. Only numpy is imported.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

INT64_MAX = 2**63 - 1  # bound of every counter in a saved state


class SamplerStateError(ValueError):
    """A saved state that can't be loaded; ``field`` is the offending entry, e.g. ``state['windows'][3][1]``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)  # both in args, so the error pickles (Prefect ships exceptions)
        self.field, self.problem = field, problem

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


def is_int(value: Any) -> bool:
    """An int or numpy integer, not a bool (True must not pass for 1)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """An int or float (numpy too), not a bool; NaN and inf pass here and fail the range checks."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def show(value: Any) -> str:
    """A short repr for messages: a huge int's repr can be megabytes long, or raise."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    try:
        return reprlib.repr(value)
    except ValueError:  # a huge int nested somewhere (int-to-str digit limit)
        return f"a {type(value).__name__}"


def field_key(field: str, key: Any) -> str:
    """The name of entry ``key`` of ``field``: ``state['rng']`` + ``'state'`` -> ``state['rng']['state']``."""
    return f"{field}[{show(key)}]"


def refuse(field: str, expected: str, value: Any) -> NoReturn:
    """Raise the standard ``<field>: expected <what>, got <short repr>`` error."""
    raise SamplerStateError(field, f"expected {expected}, got {show(value)}")


def state_int(value: Any, field: str, lo: int = 0, hi: int | None = INT64_MAX, note: str = "") -> int:
    """An int (not a bool, float or string) in [lo, hi]; ``hi=None`` for no upper bound."""
    if not (is_int(value) and lo <= value and (hi is None or value <= hi)):
        refuse(field, (f"an int in [{lo}, {hi}]" if hi is not None else f"an int >= {lo}") + note, value)
    return int(value)


def state_list(value: Any, field: str, length: int, what: str, at_most: bool = False) -> list[Any]:
    """A list (or tuple, or 1-D array) of exactly ``length`` entries, or at most that many."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    expected = f"{'at most ' if at_most else ''}{length} {what}"
    if not isinstance(value, list | tuple):
        refuse(field, f"a list of {expected}", value)
    if len(value) > length or (len(value) < length and not at_most):
        raise SamplerStateError(field, f"expected {expected}, got {len(value)}")
    return list(value)


def state_reals(value: Any, field: str, length: int, what: str, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """``length`` finite numbers in [lo, hi] (NaN fails every comparison; bools and strings are refused)."""
    values = state_list(value, field, length, what)
    for i, v in enumerate(values):
        if not (is_real(v) and lo <= v <= hi):
            refuse(f"{field}[{i}]", f"a finite number in [{lo:g}, {hi:g}]", v)
    return np.array([float(v) for v in values], dtype=np.float64)


def state_mapping(value: Any, field: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """A dict with exactly ``keys``: a missing or unexpected key is named."""
    if not isinstance(value, Mapping):
        refuse(field, "a dict", value)
    for key in keys:
        if key not in value:
            raise SamplerStateError(field_key(field, key), "missing")
    for key in value:
        if key not in keys:
            raise SamplerStateError(field_key(field, key), f"unexpected key (expected only {list(keys)})")
    return value


def state_header(state: Any, kind: str, keys: tuple[str, ...], n_rows: int, version: int) -> Mapping[str, Any]:
    """Kind first (the clearest message for a state of another sampler), then the key set, version and rows."""
    if not isinstance(state, Mapping):
        refuse("state", f"a dict (a saved {kind} state)", state)
    if "kind" in state and not (isinstance(state["kind"], str) and state["kind"] == kind):
        refuse("state['kind']", repr(kind), state["kind"])
    state_mapping(state, "state", keys)
    if not (is_int(state["version"]) and state["version"] == version):
        refuse("state['version']", f"state version {version}", state["version"])
    if not (is_int(state["n_rows"]) and state["n_rows"] == n_rows):
        raise SamplerStateError(
            "state['n_rows']",
            f"state was saved for another artifact: expected {n_rows} rows, got {show(state['n_rows'])}",
        )
    return state


def _same_kind(got: Any, want: Any) -> bool:
    if want is None:
        return got is None
    if isinstance(want, str):
        return isinstance(got, str)
    if is_int(want):
        return is_int(got)
    return is_real(got) if isinstance(want, float) else type(got) is type(want)


def state_config(
    value: Any,
    cfg: Any,
    field: str = "state['config']",
    ignore_seed: bool = False,
    expected: Mapping[str, Any] | None = None,
) -> None:
    """Every field of the config ``cfg`` equal (same kind of value too: True is not 1); the seed may be free.

    ``expected`` replaces ``cfg.model_dump()`` when some values are compared in a normalised form.
    """
    mine = dict(expected) if expected is not None else cfg.model_dump()
    saved = state_mapping(value, field, tuple(mine))
    for key, want in mine.items():
        got, where = saved[key], field_key(field, key)
        if key == "seed" and ignore_seed:  # superseded by the saved generator state
            state_int(got, where, 0, None)
        elif not (_same_kind(got, want) and got == want):
            raise SamplerStateError(
                where, f"state was saved with a different config: expected {want!r}, got {show(got)}"
            )


def state_rng(value: Any, field: str) -> np.random.Generator:
    """A generator from a saved numpy PCG64 state, checked first: numpy's setter raises TypeError or
    OverflowError halfway through, accepts some bad values (has_uint32=5) and never says which field."""
    if isinstance(value, Mapping) and "bit_generator" in value:  # another generator: say so, not "missing key"
        name = value["bit_generator"]
        if not (isinstance(name, str) and name == "PCG64"):
            refuse(field_key(field, "bit_generator"), "'PCG64' (numpy's default_rng)", name)
    saved = state_mapping(value, field, ("bit_generator", "state", "has_uint32", "uinteger"))
    inner_field = field_key(field, "state")
    inner = state_mapping(saved["state"], inner_field, ("state", "inc"))
    state = state_int(inner["state"], field_key(inner_field, "state"), 0, 2**128 - 1)
    inc = state_int(inner["inc"], field_key(inner_field, "inc"), 0, 2**128 - 1)
    if inc % 2 == 0:
        refuse(field_key(inner_field, "inc"), "an odd int (PCG64's increment is always odd)", inc)
    has_uint32 = state_int(saved["has_uint32"], field_key(field, "has_uint32"), 0, 1)
    uinteger = state_int(saved["uinteger"], field_key(field, "uinteger"), 0, 2**32 - 1)
    bit_generator = np.random.PCG64(0)
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }
    return np.random.Generator(bit_generator)
