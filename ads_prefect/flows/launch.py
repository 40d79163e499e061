"""`ads build`'s one call: the `ads-build` flow under the build runner (`ads_prefect.runtime.runner`).

Importing this module imports no Prefect: the runner sets Prefect's environment first, then loads the flow.
"""

from __future__ import annotations

from typing import Any

from ads_core.common import defaults
from ads_core.config.build import BuildConfig
from ads_prefect.runtime import runner


def _ads_build() -> Any:
    from ads_prefect.flows.ads_build import ads_build

    return ads_build


def run_build(
    source: str | None,
    out: str | None,
    dataset: str | None,
    cfg: BuildConfig,
    progress: Any = None,
    say: runner.Say = runner.say_stderr,
) -> runner.BuildRun:
    """Build OUT/final/train.parquet from SOURCE in this process (see `runner.run_build`)."""
    return runner.run_build(_ads_build, source, out, dataset, cfg, defaults.cache_dir(), progress, say)


def run_demo(cfg: Any, progress: Any = None, say: runner.Say = runner.say_stderr) -> runner.BuildRun:
    """Run the `ads-demo` flow (`ads demo`) in this process, as `ads build` runs its flow: the configured Prefect
    server, or a temporary one (ephemeral mode); Ctrl-C / SIGTERM exits with status 130 and a rerun resumes."""
    from ads_prefect.runtime.prefect_env import local_prefect_env

    with runner.quiet_terminal(), local_prefect_env(defaults.cache_dir()) as api_url:
        if api_url is None:
            say(
                "no Prefect server configured: starting a temporary local one (ephemeral mode, ~10-20 s); "
                "run `ads server` and set PREFECT_API_URL to watch the demo in the UI"
            )
        from prefect.exceptions import TerminationSignal

        from ads_prefect.flows.ads_demo import ads_demo
        from ads_prefect.runtime.progress import set_progress_factory
        from ads_prefect.runtime.runs import run_url
        from ads_prefect.runtime.server import start_temporary_server, stop_temporary_server

        set_progress_factory(progress)
        try:
            if api_url is None:
                start_temporary_server()
            result = ads_demo(demo=cfg)
            page = run_url(result["flow_run"]["id"]) if api_url else None
        except (KeyboardInterrupt, TerminationSignal):
            runner.stop_now(say)
        finally:
            set_progress_factory(None)
            if api_url is None:
                stop_temporary_server()
    return runner.BuildRun(result, page)
