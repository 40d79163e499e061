"""A build reported to `ads server`, seen in a real browser: the report pictures render inline in the Prefect
UI, the UI talks to this server's API, not to Prefect's default port, the CLI's last line is the run's page,
the run form of an ads-build deployment keeps its help texts' placeholders and offers force_from as a
choice of stage names, a cached rerun through an ads-build deployment shows every stage Cached, and a training run
shows its progress and its plot inline."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
DATASET = "gsm8k60"
ROWS = 60
STAGES = ["format", "model", "score-shard-0", "merge", "cluster", "sort", "report"]  # one score shard

PAGE_STATE = """JSON.stringify({
  text: document.body ? document.body.innerText : "",
  images: [...document.images].filter(i => i.src.startsWith("data:image/png")).map(
      i => ({src: i.src, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})),
  requests: performance.getEntriesByType("resource").map(e => e.name),
})"""


@pytest.fixture(scope="module")
def build(ads_server: Any, model_cache: Path, web: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`ads build` of 60 sample rows reported to the server; its flow run and artifacts, read from the API."""
    from ads_core.common import defaults

    root = tmp_path_factory.mktemp("browser-build")
    shutil.copytree(model_cache / "models", ads_server.cache / "models", dirs_exist_ok=True)  # nothing rebuilt
    source = root / f"{DATASET}.jsonl"
    source.write_text("\n".join(Path(defaults.sample_path()).read_text().splitlines()[:ROWS]) + "\n")
    out = root / "out"
    cmd = [web.ads, "build", str(source), "--out", str(out), "--max-length", "256", "-k", "4", "--name", DATASET]
    # the same build as flow parameters, for the deployment below
    params = {
        "source": str(source),
        "out": str(out),
        "format": {"name": DATASET},
        "score": {"max_length": 256},
        "cluster": {"num_clusters": 4},
    }
    proc = subprocess.run(
        cmd, env=ads_server.env(PREFECT_API_URL=f"{ads_server.base}/api"), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = web.http_json(f"{ads_server.base}/api/flow_runs/filter", {"flows": {"name": {"any_": ["ads-build"]}}})
    assert len(runs) == 1 and runs[0]["state_type"] == "COMPLETED", runs  # the server was fresh
    artifacts = web.http_json(
        f"{ads_server.base}/api/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [runs[0]["id"]]}}}
    )
    last = proc.stderr.strip().splitlines()[-1]
    return {
        "run": runs[0],
        "artifacts": {a["key"]: a for a in artifacts},
        "out": out,
        "last_line": last,
        "params": params,
    }


def ui_page(ads_server: Any, web: Any, ui: str, route: str) -> str:
    """URL of ROUTE in the V1 or V2 UI, under the base URLs the server announces."""
    base = web.http_json(f"{ads_server.base}/ui-settings")[f"{ui}_base_url"]
    return f"{ads_server.base}{base.rstrip('/')}{route}"


def open_page(browser: Any, web: Any, url: str, ready: Any, timeout: float = 60) -> dict[str, Any]:
    """Navigate and wait until READY(state) holds; the state holds the page text, data: PNGs and requests."""
    browser.goto(url)
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        last.update(json.loads(browser.evaluate(PAGE_STATE)))
        return dict(last) if ready(last) else None

    try:
        return web.wait_until(check, timeout, f"page {url}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; page text: {last.get('text', '')[:1500]!r}") from exc


def assert_talks_to_its_own_api(browser: Any, state: dict[str, Any], ads_server: Any) -> None:
    api = f"{ads_server.base}/api"
    assert "Can't connect" not in state["text"], state["text"][:1500]
    # what the page itself was told, and what it asked: only this server's API
    assert browser.evaluate("fetch('/ui-settings').then(r => r.json()).then(s => s.api_url)") == api
    calls = [url for url in state["requests"] if "/api/" in url]
    assert calls and all(url.startswith(f"{api}/") for url in calls), calls


def assert_inline_png(state: dict[str, Any], artifact: dict[str, Any]) -> None:
    """The artifact's embedded PNG is in the page as an <img> the browser decoded, at its real size."""
    from PIL import Image

    wanted = [img for img in state["images"] if img["src"] in artifact["data"]]
    assert wanted, f"no <img> with the artifact's data:image/png; images: {[i['src'][:60] for i in state['images']]}"
    img = wanted[0]
    png = Image.open(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1])))
    assert png.format == "PNG" and png.size[0] >= 200 and png.size[1] >= 100
    assert img["complete"] and (img["width"], img["height"]) == png.size  # decoded, not a broken image


def image_ready(state: dict[str, Any]) -> bool:
    return any(img["complete"] and img["width"] > 0 for img in state["images"]) or "Can't connect" in state["text"]


@pytest.mark.parametrize("ui", ["v1", "v2"])
def test_report_plot_renders_inline(
    ui: str, ads_server: Any, web: Any, browser: Any, build: dict[str, Any], tmp_path: Path
):
    artifact = build["artifacts"][f"ads-{DATASET}-report-plot"]
    assert artifact["type"] == "markdown" and "data:image/png;base64," in artifact["data"]
    state = open_page(browser, web, ui_page(ads_server, web, ui, f"/artifacts/artifact/{artifact['id']}"), image_ready)
    shot = browser.screenshot(tmp_path / f"report-plot-{ui}.png")
    print(f"screenshot: {shot}")
    assert_talks_to_its_own_api(browser, state, ads_server)
    assert_inline_png(state, artifact)
    assert f"{DATASET}: build report" in state["text"]


def test_cluster_terms_picture_renders_inline(
    ads_server: Any, web: Any, browser: Any, build: dict[str, Any], tmp_path: Path
):
    # The report stage declares the picture (ads_core/stages/report/ui.py): a build that lacks it is a failure.
    artifact = build["artifacts"].get(f"ads-{DATASET}-cluster-terms-image")
    assert artifact is not None, f"the build published no ads-{DATASET}-cluster-terms-image artifact"
    state = open_page(
        browser, web, ui_page(ads_server, web, "v2", f"/artifacts/artifact/{artifact['id']}"), image_ready
    )
    shot = browser.screenshot(tmp_path / "cluster-terms-v2.png")
    print(f"screenshot: {shot}")
    assert_talks_to_its_own_api(browser, state, ads_server)
    assert_inline_png(state, artifact)


@pytest.mark.parametrize("what", ["summary", "final"])
def test_summary_and_final_name_the_output_as_a_path(
    what: str, ads_server: Any, web: Any, browser: Any, build: dict[str, Any]
):
    artifact = build["artifacts"][f"ads-{DATASET}-{what}"]
    final = str((build["out"] / "final" / "train.parquet").resolve())
    state = open_page(
        browser,
        web,
        ui_page(ads_server, web, "v2", f"/artifacts/artifact/{artifact['id']}"),
        lambda s: final in s["text"] or "Can't connect" in s["text"],
    )
    assert_talks_to_its_own_api(browser, state, ads_server)
    assert "file://" not in state["text"]  # a browser refuses file:// links, and they mean nothing elsewhere


def test_the_cli_ends_with_the_runs_page_in_the_ui(ads_server: Any, web: Any, browser: Any, build: dict[str, Any]):
    run = build["run"]
    assert run["name"].startswith(f"build-{DATASET}-")
    assert build["last_line"] == f"run {run['name']}: {ads_server.base}/runs/flow-run/{run['id']}"
    state = open_page(
        browser,
        web,
        build["last_line"].split(": ", 1)[1],
        lambda s: run["name"] in s["text"] or "Can't connect" in s["text"],
    )
    assert_talks_to_its_own_api(browser, state, ads_server)


@pytest.fixture(scope="module")
def deployment(ads_server: Any, web: Any) -> dict[str, Any]:
    """An ads-build deployment on the server with the flow's real parameter schema (what `prefect deploy` sends)."""
    from prefect.utilities.callables import parameter_schema

    from ads_prefect.flows.ads_build import ads_build

    api = f"{ads_server.base}/api"
    flow = web.http_json(f"{api}/flows/", {"name": "ads-build"})
    return web.http_json(
        f"{api}/deployments/",
        {
            "name": "myds-form",
            "flow_id": flow["id"],
            "entrypoint": "ads_prefect/flows/ads_build.py:ads_build",
            "parameter_openapi_schema": parameter_schema(ads_build.fn).model_dump(),
            "parameters": {"dataset": "myds", "run": {"trigger_training": "on_change"}},
        },
    )


FORM_FIELD = """(() => {
  const label = [...document.querySelectorAll('label, span, div, p')].find(e => e.childElementCount === 0 &&
      e.textContent.trim().startsWith(%s));
  if (!label) return null;
  let control = label.htmlFor ? document.getElementById(label.htmlFor) : null;
  let box = label;  // the smallest ancestor that holds the field's control
  while (box && !(control ? box.contains(control) : box.querySelector('select'))) box = box.parentElement;
  if (!control && box) control = box.querySelector('select');
  return JSON.stringify({
    id: control ? control.id : null,
    tag: control ? control.tagName : null,
    options: control && control.tagName === 'SELECT'
        ? [...control.options].map(o => o.value || o.textContent.trim()) : null,
    value: control ? control.textContent.trim() : null,
    popup: control ? control.getAttribute('aria-haspopup') : null,
    text: box ? box.innerText : ''});
})()"""


@pytest.mark.parametrize("ui", ["v1", "v2"])
def test_the_run_form_keeps_placeholders_and_offers_force_from_as_a_dropdown(
    ui: str, ads_server: Any, web: Any, browser: Any, deployment: dict[str, Any], tmp_path: Path
):
    from ads_core.config.build import STAGE_NAMES

    url = ui_page(ads_server, web, ui, f"/deployments/deployment/{deployment['id']}/run")
    state = open_page(browser, web, url, lambda s: "Force From" in s["text"] or "Can't connect" in s["text"])
    shot = browser.screenshot(tmp_path / f"run-form-{ui}.png")
    print(f"screenshot: {shot}")
    assert_talks_to_its_own_api(browser, state, ads_server)
    # The UI drops anything in angle brackets from a help text ("$ADS_OUT_DIR/<dataset>" showed as "$ADS_OUT_DIR/")
    assert "default: $ADS_OUT_DIR/{dataset}, else ./ads-out/{dataset}" in state["text"]
    assert "$ADS_OUT_DIR/," not in state["text"]
    assert "score-cache in the ADS cache dir" in state["text"]
    field = json.loads(browser.evaluate(FORM_FIELD % json.dumps("Force From")))
    assert field is not None and field["tag"], state["text"][:3000]
    assert 'Property is type "None"' not in field["text"]  # a choice, not a str/None switch
    if field["tag"] == "SELECT":  # the V1 form
        assert field["options"] == ["none", *STAGE_NAMES], field
    else:  # the V2 form: a button showing the value, whose list box opens on a click
        assert field["popup"] == "listbox" and field["value"] == "none", field
        browser.evaluate(f"document.getElementById({json.dumps(field['id'])}).click()")
        options = web.wait_until(
            lambda: json.loads(browser.evaluate(OPTIONS)),
            20,
            "the force_from options",
        )
        assert options == ["none", *STAGE_NAMES], options


OPTIONS = "JSON.stringify([...document.querySelectorAll('[role=option]')].map(o => o.textContent.trim()))"


@pytest.fixture(scope="module")
def deployment_rerun(ads_server: Any, web: Any, build: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`ads-build/gsm8k60`, a deployment of the flow with the `ads build` above as its parameters, run as a worker runs
    it (`prefect flow-run execute`): a rerun of that build, which must compute nothing. Its flow run and task runs."""
    from prefect.utilities.callables import parameter_schema

    from ads_prefect.flows.ads_build import ads_build

    api = f"{ads_server.base}/api"
    flow = web.http_json(f"{api}/flows/name/ads-build")
    deployment = web.http_json(
        f"{api}/deployments/",
        {
            "name": DATASET,
            "flow_id": flow["id"],
            "entrypoint": "ads_prefect/flows/ads_build.py:ads_build",
            "pull_steps": [{"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}],
            "parameter_openapi_schema": parameter_schema(ads_build.fn).model_dump(),
            "parameters": build["params"],
        },
    )
    run = web.http_json(f"{api}/deployments/{deployment['id']}/create_flow_run", {})
    log = tmp_path_factory.mktemp("deployment-rerun") / "execute.log"
    with log.open("w") as fh:
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("prefect")), "flow-run", "execute", run["id"]],
            cwd=REPO,
            env=ads_server.env(PREFECT_API_URL=api),
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
    assert proc.returncode == 0, log.read_text()[-3000:]
    run = web.http_json(f"{api}/flow_runs/{run['id']}")
    assert run["state_type"] == "COMPLETED" and run["deployment_id"] == deployment["id"], run
    task_runs = web.http_json(f"{api}/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})
    return {"run": run, "task_runs": {t["name"]: t for t in task_runs}}


def test_a_cached_rerun_of_the_deployment_shows_every_stage_cached(
    ads_server: Any, web: Any, browser: Any, deployment_rerun: dict[str, Any], tmp_path: Path
):
    """The manifests in OUT are the build's one cache (no Prefect cache policy, no stored result): a stage they say is
    done ends in a Completed state named Cached with its manifest's summary, which the run's Task Runs tab shows."""
    run, task_runs = deployment_rerun["run"], deployment_rerun["task_runs"]
    assert {name: task_runs[name]["state"]["name"] for name in STAGES} == dict.fromkeys(STAGES, "Cached")
    assert task_runs["format"]["state"]["message"] == "reused: rows_in 60, rows_out 60, rows_rejected 0"
    url = ui_page(ads_server, web, "v2", f"/runs/flow-run/{run['id']}?tab=TaskRuns")
    state = open_page(browser, web, url, lambda s: "Cached)" in s["text"] or "Can't connect" in s["text"])
    shot = browser.screenshot(tmp_path / "rerun-task-runs-v2.png")
    print(f"screenshot: {shot}")
    assert_talks_to_its_own_api(browser, state, ads_server)
    lines = state["text"].splitlines()  # each card: flow, flow run, task run, state badge
    shown = {lines[i + 1]: lines[i + 2] for i, line in enumerate(lines[:-2]) if line == run["name"]}
    assert {name: shown.get(name) for name in STAGES} == dict.fromkeys(STAGES, "Cached"), state["text"][:3000]

    page = ui_page(ads_server, web, "v2", f"/runs/task-run/{task_runs['format']['id']}")
    summary = "reused: rows_in 60, rows_out 60, rows_rejected 0"
    state = open_page(browser, web, page, lambda s: summary in s["text"] or "Can't connect" in s["text"])
    assert_talks_to_its_own_api(browser, state, ads_server)
    assert "\nformat\nCached\n" in state["text"] and "Cache Key\nNone\n" in state["text"], state["text"][:3000]


TRAIN = """
import sys
from ads_prefect.flows.ads_train import ads_train
ads_train(artifact_uri=sys.argv[1], trainer="trl", steps=2, run_dir=sys.argv[2],
          trl={"num_generations": 2, "max_completion_length": 8})
"""


def test_a_training_run_shows_its_progress_and_its_plot_inline(
    ads_server: Any, web: Any, browser: Any, build: dict[str, Any], tmp_path: Path
):
    """`ads-train` (TRL, 2 real steps on CPU) reported to the server: its progress artifact at 100 % and the
    reward / per-cluster success / window plot, an inline PNG in the UI, as the build's plots are."""
    import sys

    final = str(build["out"] / "final" / "train.parquet")
    proc = subprocess.run(
        [sys.executable, "-c", TRAIN, final, str(tmp_path / "run")],
        env=ads_server.env(PREFECT_API_URL=f"{ads_server.base}/api"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    api = f"{ads_server.base}/api"
    runs = web.http_json(f"{api}/flow_runs/filter", {"flows": {"name": {"any_": ["ads-train"]}}})
    assert len(runs) == 1 and runs[0]["state_type"] == "COMPLETED", runs
    artifacts = web.http_json(f"{api}/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [runs[0]["id"]]}}})
    progress = [a for a in artifacts if a["type"] == "progress"]
    assert len(progress) == 1 and float(progress[0]["data"]) == 100.0, artifacts
    plot = next(a for a in artifacts if (a["key"] or "").endswith("-training"))
    assert plot["type"] == "markdown" and "data:image/png;base64," in plot["data"]
    state = open_page(browser, web, ui_page(ads_server, web, "v2", f"/artifacts/artifact/{plot['id']}"), image_ready)
    shot = browser.screenshot(tmp_path / "training-plot-v2.png")
    print(f"screenshot: {shot}")
    assert_talks_to_its_own_api(browser, state, ads_server)
    assert_inline_png(state, plot)
