"""The `ads-eval` flow: `ads eval`'s results (mean@k, pass@k, maj@k per set, what trained each policy) published as
Prefect artifacts, in a run named `eval-<policy>-<UTC time>` beside the `ads-train` runs. `ads eval ... --publish`
runs it on the configured server once the evaluation is written; a deployment can run it on finished
evaluation folders (parameter: name -> folder)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from ads_core import storage
from ads_core.common.errors import InputError
from ads_prefect.flows.setup import flow
from ads_prefect.tasks.artifact_keys import artifact_key


def eval_run_name() -> str:
    """``eval-<policy>[-<policy>...]-<UTC time>``, as the other flows' runs are named (build-, train-, compare-)."""
    from prefect.runtime import flow_run

    names = list((flow_run.parameters.get("folders") or {}).keys())
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(names)).strip("-")[:80] or "policy"
    return f"eval-{slug}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}"


@task(name="publish-evaluation", cache_policy=NO_CACHE, retries=0)
def publish_folder(name: str, folder: str) -> dict[str, Any]:
    """One policy's table.md as a markdown artifact and its per-set metrics as a table artifact."""
    summary = storage.read_json(storage.join(folder, "summary.json"))
    table = storage.read_bytes(storage.join(folder, "table.md")).decode("utf-8")
    trained = (summary.get("model") or {}).get("trained") or {}
    about = ", ".join(f"{k} {v}" for k, v in trained.items() if v is not None)
    create_markdown_artifact(
        key=artifact_key("eval", name),
        markdown=f"# {name}: evaluation\n\n{'Trained: ' + about + chr(10) * 2 if about else ''}{table}\n\n"
        f"Files: `{folder}`",
        description=f"ads eval of {name}: mean@k, pass@k, maj@k per set",
    )
    per_set = [*summary["sets"].items(), ("average", summary["overall"])]
    rows = [{"set": s, **{k: v for k, v in m.items() if isinstance(v, int | float)}} for s, m in per_set]
    create_table_artifact(key=artifact_key("eval", name, "metrics"), table=rows, description=f"{name} per set")
    return {"policy": name, "overall": summary["overall"], "trained": trained}


@flow(name="ads-eval", flow_run_name=eval_run_name, validate_parameters=True)
def ads_eval(folders: dict[str, str]) -> list[dict[str, Any]]:
    """Publish evaluations written by `ads eval`.

    Args:
        folders: policy name -> its evaluation folder (summary.json, table.md).
    """
    return [publish_folder(name, folder) for name, folder in folders.items()]


def needs_server() -> None:
    """--publish without a server is refused before anything is evaluated."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        raise InputError("--publish needs a Prefect server: start one with `ads server` and set PREFECT_API_URL")


def publish_evaluation(folders: dict[str, str]) -> str:
    """Run ads-eval on the configured server; returns the flow run's page, or its id."""
    from ads_prefect.runtime.runs import run_url

    needs_server()
    state = ads_eval(folders, return_state=True)
    if not state.is_completed():
        raise InputError(f"ads-eval ended {state.name}: {state.message}")
    flow_run_id = str(state.state_details.flow_run_id)
    return run_url(flow_run_id) or f"flow run {flow_run_id}"
