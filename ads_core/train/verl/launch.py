"""Launching a planned verl run: fail fast on machines that can't train, run the command, read its metrics.

Errors name options by their config field (`dry_run`, `n_gpus_per_node`) and carry them in ``options``, so the
CLI and the flow each render their own spelling.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ads_core.common.procs import die_with_parent
from ads_core.train import choice
from ads_core.train.errors import LaunchError
from ads_core.train.verl import sampler_file
from ads_core.train.verl.options import VerlConfig
from ads_core.train.verl.plan import VerlPlan, launch_mode


def check_cuda(n_gpus_per_node: int) -> int:
    """Raise LaunchError unless this machine has at least ``n_gpus_per_node`` CUDA GPUs."""
    found = choice.cuda_gpu_count()
    if found == 0:
        import torch

        build = f"torch {torch.__version__}" + ("" if torch.version.cuda else " (a CPU-only build)")
        raise LaunchError(
            f"verl training needs CUDA GPUs, and this machine has none visible to {build}. Use dry_run to check "
            "the artifact and the verl config here, train with trainer trl (CPU or one GPU), run on a GPU machine, "
            "or set ray_address to a Ray dashboard (http://head:8265) to submit the job to a GPU cluster.",
            options=("dry_run", "ray_address", "trainer"),
        )
    if found < n_gpus_per_node:
        raise LaunchError(
            f"{n_gpus_per_node} GPUs per node requested but only {found} CUDA GPU(s) are visible "
            f"here; lower n_gpus_per_node or check CUDA_VISIBLE_DEVICES",
            options=("n_gpus_per_node",),
        )
    return found


def check_launch_environment(verl: VerlConfig) -> None:
    """Fail fast, before any config work or Ray start, when this machine can't run verl."""
    mode = launch_mode(verl.ray_address)
    if mode == "ray-job":
        if not (shutil.which("ray") or Path(sys.executable).with_name("ray").exists()):
            raise LaunchError("`ray` CLI not found: install ray to submit jobs")
        return
    if mode != "local":
        return  # the driver joins a cluster: GPUs and the rollout engine are the cluster's
    check_cuda(int(verl.n_gpus_per_node))
    engine = "vllm"
    for item in verl.overrides:
        if item.lstrip("+").startswith("actor_rollout_ref.rollout.name="):
            engine = item.split("=", 1)[1].strip("'\"")
    if engine in choice.ROLLOUT_ENGINES and not choice.installed(engine):
        raise LaunchError(
            f"the rollout engine {engine!r} is not installed in this environment (install the "
            f"`gpu` extra, or add actor_rollout_ref.rollout.name=... to overrides)",
            options=("overrides",),
        )


def launch(part: VerlPlan, on_line: Callable[[str], None] | None = None) -> int:
    """Write the run's sampler file (what the verl task draws with), then run the plan's command, passing each
    output line to ``on_line`` (default: inherit stdout)."""
    Path(part.run_dir).mkdir(parents=True, exist_ok=True)
    sampler_file.write(part.sampler_file, part.sampler)  # atomic: the task reads it whole or not at all
    env = {**os.environ, **part.env}
    dies_with_us = die_with_parent()  # killed with this process (this thread waits for it), kill -9 included
    if on_line is None:
        return subprocess.run(part.command, env=env, check=False, preexec_fn=dies_with_us).returncode
    proc = subprocess.Popen(
        part.command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        errors="replace",
        preexec_fn=dies_with_us,
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            on_line(line.rstrip("\n"))
    finally:
        proc.stdout.close()
    return proc.wait()


_CONSOLE_STEP = re.compile(r"^step:(\d+) - ")


def parse_console_metrics(line: str) -> dict[str, float] | None:
    """verl's console logger line ``step:N - key:value - ...`` as a dict, else None."""
    m = _CONSOLE_STEP.match(line.strip())
    if not m:
        return None
    out: dict[str, float] = {"step": float(m.group(1))}
    for part in line.strip().split(" - ")[1:]:
        key, _, value = part.rpartition(":")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def final_metrics(part: VerlPlan, console_lines: Sequence[str] = ()) -> dict[str, float]:
    """The last training step's metrics: from the metrics JSONL, else from console lines."""
    path = Path(part.metrics_file)
    last: dict[str, float] | None = None
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            data = {k: float(v) for k, v in rec.get("data", {}).items() if isinstance(v, int | float)}
            last = {"step": float(rec.get("step", 0)), **data}
    if last is None:
        for line in console_lines:
            parsed = parse_console_metrics(line)
            if parsed is not None:
                last = parsed
    return last or {}


HEADLINE_PREFIXES = (
    "ads/",
    "val-core/",
    "critic/score/mean",
    "critic/rewards/mean",
    "response_length/mean",
    "actor/entropy",
    "actor/pg_loss",
    "timing_s/step",
    "training/global_step",
    "step",
)


def headline(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics worth a table: summaries, not per-cluster series."""
    return {
        k: v
        for k, v in metrics.items()
        if k.startswith(HEADLINE_PREFIXES) and not (k.startswith("ads/") and k.count("/") > 1)
    }
