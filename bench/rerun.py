"""Warm rerun vs cold run of the `ads-build` flow on a 2k-row build (target: warm / cold <= 5%).

    .venv/bin/python bench/rerun.py [--rows 2000] [--shards 4] [--model default] [--smoke]

What is timed: two calls of the flow in one process, against a Prefect API that is already up (the
PREFECT_API_URL in use, or a temporary local server started before any timing). The cold run starts from
an empty output directory (OUT's manifests are the build's only cache); the warm rerun is the identical call,
so every stage is Cached (the report tasks still publish the UI artifacts). The tiny default model is built (if needed)
before timing; loading it is part of the cold run. Process and server start-up are excluded from both.
Data: the first ROWS problems of ../shared/data/gsm8k/train.jsonl, or, without that checkout, the bundled
300-problem sample made unique with a suffix. The last line printed is the ratio.

`--smoke` (what the test suite runs, in seconds) writes 20 rows and checks the flow accepts the bench's parameters
(its signature), without a Prefect server and without timing anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GSM8K = REPO.parent / "shared" / "data" / "gsm8k" / "train.jsonl"


def make_source(rows: int, path: Path) -> str:
    if GSM8K.is_file():
        lines = GSM8K.read_text().splitlines()[:rows]
        origin = f"{GSM8K} (first {len(lines)})"
    else:
        from ads_core.common import defaults

        base = [json.loads(line) for line in Path(defaults.sample_path()).read_text().splitlines()]
        lines = []
        for i in range(rows):
            row = dict(base[i % len(base)])
            row["question"] = f"{row['question']} (variant {i // len(base)})" if i >= len(base) else row["question"]
            lines.append(json.dumps(row))
        origin = "bundled sample, made unique"
    path.write_text("\n".join(lines) + "\n")
    print(f"data: {len(lines)} rows from {origin}")
    return str(path)


def flow_params(args: argparse.Namespace, source: str, work: Path) -> dict[str, Any]:
    return dict(
        source=source,
        out=str(work / "out"),
        dataset="bench-rerun",
        score={"model": args.model, "num_shards": args.shards},
        cluster={"num_clusters": args.clusters},
    )


def smoke(args: argparse.Namespace, work: Path) -> None:
    """What can go stale without a server: the data, the imports and the flow's parameters (its signature)."""
    import inspect
    import shutil

    from ads_core.models import resolve_model  # noqa: F401
    from ads_prefect.flows.ads_build import ads_build

    try:
        params = flow_params(args, make_source(20, work / "data.jsonl"), work)
        inspect.signature(ads_build.fn).bind(**params)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"smoke: ads_build accepts {sorted(params)}")
    print("smoke: skipped the timed runs (they need a Prefect server): run without --smoke for the ratio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--clusters", type=int, default=64)
    parser.add_argument("--model", default="default")
    parser.add_argument("--warm-runs", type=int, default=3, help="warm reruns; the median is used")
    parser.add_argument("--smoke", action="store_true", help="seconds: data and the flow's parameters, no server")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ads-bench-rerun-"))
    if args.smoke:
        smoke(args, work)
        return
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ["ADS_LOCK_DIR"] = str(work / "locks")
    if not os.environ.get("PREFECT_API_URL"):
        os.environ["PREFECT_HOME"] = str(work / "prefect-home")
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    source = make_source(args.rows, work / "data.jsonl")

    from prefect import flow
    from prefect.client.orchestration import get_client

    from ads_core.models import resolve_model
    from ads_prefect.flows.ads_build import ads_build

    @flow(name="bench-warmup")
    def warmup() -> None:  # starts the temporary server (if any) and the client outside the timings
        return None

    warmup()
    with get_client(sync_client=True) as client:
        print(f"prefect api: {client.api_url}")
    print(f"model: {resolve_model(args.model)}")
    params = flow_params(args, source, work)

    t0 = time.perf_counter()
    cold = ads_build(**params)
    cold_s = time.perf_counter() - t0
    print(f"cold run: {cold_s:.2f} s  {json.dumps(cold['stages'])}")
    warm_times = []
    for _ in range(args.warm_runs):
        t0 = time.perf_counter()
        warm = ads_build(**params)
        warm_times.append(time.perf_counter() - t0)
        print(f"warm rerun: {warm_times[-1]:.2f} s  {json.dumps(warm['stages'])}")
        if set(warm["stages"].values()) != {"Cached"}:
            sys.exit("error: the warm rerun recomputed a stage")
    warm_s = statistics.median(warm_times)
    ratio = warm_s / cold_s
    print(f"warm / cold = {warm_s:.2f} s / {cold_s:.2f} s = {100 * ratio:.1f}% (target <= 5%)")
    print(f"{ratio:.4f}")


if __name__ == "__main__":
    main()
