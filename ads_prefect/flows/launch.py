"""`ads build`'s one call: its flow under the build runner (`ads_prefect.runtime.runner`).

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
