"""Prefect flows and tasks over `ads_core`; importing any of it sets where build locks live ($PREFECT_HOME)."""

import ads_prefect.locks  # noqa: F401  (registers the locks' default folder)
