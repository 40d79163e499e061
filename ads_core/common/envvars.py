"""Settings read from environment variables: the one parser of a number of seconds, with its bounds."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping


def seconds_from_env(
    name: str,
    default: float,
    low: float = 0.0,
    high: float = math.inf,
    why: str = "",
    error: type[ValueError] = ValueError,
    environ: Mapping[str, str] | None = None,
) -> float:
    """$NAME as seconds in [LOW, HIGH], DEFAULT when unset or empty; anything else raises ERROR in one line naming
    the variable (WHY says where a bound comes from)."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise error(f"{name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or not low <= value <= high:
        bounds = f"{low:g} to {high:g} seconds" if math.isfinite(high) else f"at least {low:g} seconds"
        raise error(f"{name}={raw} is out of bounds: use {bounds}{why}")
    return value
