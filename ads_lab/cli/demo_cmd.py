"""`ads demo`: ADS against uniform sampling on a task a tiny policy learns on a CPU, in a few minutes, no download.
Registered by ``ads_cli.main``."""

from __future__ import annotations

import sys
import time
from typing import Any

import typer
from rich.markup import escape

from ads_cli.common import console, fail, progress_bar
from ads_cli.options import common_parameters, config_parameters, resolve_config, with_signature
from ads_core.common.errors import InputError
from ads_lab.config.demo import DemoConfig


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cmd)


def demo_cmd(**options: Any) -> None:
    """Generate a small arithmetic task, build it with the real pipeline (format, score, cluster, sort), warm up the
    tiny policy, train GRPO (TRL) with ADS and with uniform sampling from the same start (same seeds and steps,
    validated on held-out problems as they train), and compare them with `ads compare`'s table and plot.

    Writes OUT/demo/ (compare.png, compare.md, compare.json, the runs, the build). Runs the `ads-demo` Prefect
    flow: with PREFECT_API_URL set (e.g. `ads server`) the whole demo shows in that server's UI. A rerun reuses
    the policy, the build and every finished run; a killed demo run again gives the same result.
    """
    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    cfg = resolve_config(DemoConfig, options, config_file, assignments)
    from ads_core.common import progress as progress_lines
    from ads_lab.flows.launch import run_demo
    from ads_prefect.runtime.runner import say_stderr

    progress_lines.enable_when_logged()  # stdout to a file: a line per phase, chunk and training step there
    started = time.perf_counter()
    try:
        with progress_lines.heartbeat("demo: starting (the Prefect flow, the task, the policy)"):
            run = run_demo(cfg, progress=progress_bar, say=say_stderr)
    except (InputError, ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    result = run.result
    sys.stdout.write("\n" + result["markdown"] + "\n")
    sys.stdout.write("\n".join(result["lines"]) + "\n")  # plain text on stdout, beside the tables
    where = f": {run.run_url}" if run.run_url else " (ephemeral mode: `ads server` keeps the runs and shows them)"
    console.print(f"run {escape(result['flow_run']['name'])}{where}", highlight=False, soft_wrap=True)
    console.print(
        f"wall {time.perf_counter() - started:.0f} s, CPU {cpu_seconds():.0f} s (this process and its workers)",
        highlight=False,
    )


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the training workers, the temporary server)."""
    import resource

    return sum(
        u.ru_utime + u.ru_stime
        for u in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


with_signature(
    demo_cmd,
    config_parameters(DemoConfig, ("", "task", "policy"))
    + common_parameters(DemoConfig, "--set policy.warmup_lr=0.001"),
)
