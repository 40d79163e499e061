"""The Prefect layer's part of the locks (the machinery is `ads_core.locks`): by default a build's locks live in
$PREFECT_HOME/ads-locks. Imported by the `ads_prefect` package itself, so every flow and task sees it."""

from __future__ import annotations

from pathlib import Path

from ads_core.locks.store import set_default_lock_dir


def prefect_lock_dir() -> Path:
    """$PREFECT_HOME/ads-locks (Prefect's settings, read at call time)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser().resolve() / "ads-locks"


set_default_lock_dir(prefect_lock_dir)
