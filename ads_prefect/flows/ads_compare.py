"""The `ads-compare` flow: `ads compare`'s comparison of training runs (final accuracy per eval set, steps and
prompts rolled out to the first run's final accuracy, the curves) published as a Prefect artifact, next to the
`ads-train` runs it compares. `ads compare RUN... --publish` runs it on the configured server; a deployment can run
it after training runs (parameters: the run folders and where to write the comparison)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from ads_core.common.errors import InputError
from ads_prefect.flows.setup import flow, prepare_process
from ads_prefect.tasks import train as tt


def compare_run_name() -> str:
    """``compare-<first run>-vs-<second>...-<UTC time>``, as the other flows' runs are named (build-, train-, demo-)."""
    from prefect.runtime import flow_run

    refs = [str(r) for r in flow_run.parameters.get("runs") or []]
    names = [r.partition("=")[0] if "=" in r else Path(r).name for r in refs]  # a group by its name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "-vs-".join(names)).strip("-")[:80] or "runs"
    return f"compare-{slug}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}"


@flow(name="ads-compare", flow_run_name=compare_run_name, validate_parameters=True)
def ads_compare(runs: list[str], out: str) -> dict[str, Any]:
    """Compare training runs and publish the comparison.

    Args:
        runs: run folders (or names under ./ads-runs), or groups NAME=RUN,RUN,... of one run per seed; the first
            is the baseline.
        out: folder for compare.png, compare.json and compare.md.
    """
    prepare_process()
    return tt.publish_comparison(runs, out)


def publish_comparison(runs: list[str], out: str) -> str:
    """Run ads-compare on the configured Prefect server (a temporary one would take the artifact with it when it
    stops); returns the flow run's page, or its id when the UI's address is unknown."""
    from prefect.settings import PREFECT_API_URL

    from ads_prefect.runtime.runs import run_url

    if not PREFECT_API_URL.value():
        raise InputError("--publish needs a Prefect server: start one with `ads server` and set PREFECT_API_URL")
    state = ads_compare(runs, out, return_state=True)
    if not state.is_completed():
        raise InputError(f"ads-compare ended {state.name}: {state.message}")
    flow_run_id = str(state.state_details.flow_run_id)
    return run_url(flow_run_id) or f"flow run {flow_run_id}"
