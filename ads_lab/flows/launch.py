"""`ads demo`'s and the studies' one call each: their flow under the build runner (`ads_prefect.runtime.runner`),
as `ads build` runs its own (`ads_prefect.flows.launch`).

Importing this module imports no Prefect: the runner sets Prefect's environment first, then loads the flow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ads_core.common import defaults
from ads_prefect.runtime import runner

StudyRunner = Callable[[Any, dict[str, Any]], runner.BuildRun]


def run_demo(cfg: Any, progress: Any = None, say: runner.Say = runner.say_stderr) -> runner.BuildRun:
    """Run the `ads-demo` flow (`ads demo`) in this process, as `ads build` runs its flow (`runner.flow_session`):
    the configured Prefect server, or a temporary one (ephemeral mode); Ctrl-C / SIGTERM exits with status 130 and
    a rerun resumes."""
    with runner.flow_session(defaults.cache_dir(), progress, say, "the demo", "watch the demo in the UI") as api_url:
        from ads_lab.flows.ads_demo import ads_demo
        from ads_prefect.runtime.runs import run_url

        result = ads_demo(demo=cfg)
        page = run_url(result["flow_run"]["id"]) if api_url else None
    return runner.BuildRun(result, page)


def run_study(
    cfg: Any, sections: dict[str, Any], progress: Any = None, say: runner.Say = runner.say_stderr
) -> runner.BuildRun:
    """Run the `ads-study` flow (`bench/study.py`) in this process, as `run_demo` runs the demo's."""
    with study_session(progress, say) as run:
        return run(cfg, sections)


@contextmanager
def study_session(progress: Any = None, say: runner.Say = runner.say_stderr) -> Iterator[StudyRunner]:
    """A Prefect session (the configured server, or one temporary server for all of them) in which several
    `ads-study` flow runs go one after another (Experiment 2's pilot, main runs and sweep)."""
    with runner.flow_session(defaults.cache_dir(), progress, say, "the study", "watch the study in the UI") as api_url:
        from ads_lab.flows.ads_study import ads_study
        from ads_prefect.runtime.runs import run_url

        def run(cfg: Any, sections: dict[str, Any]) -> runner.BuildRun:
            result = ads_study(study_cfg=cfg, sections=sections)
            return runner.BuildRun(result, run_url(result["flow_run"]["id"]) if api_url else None)

        yield run
