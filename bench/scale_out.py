"""How the build grows with Dask workers: in-process, 1 worker, 2 workers (1 thread each), artifacts on S3.

    .venv/bin/python bench/scale_out.py [--rows 20000] [--shards 8] [--model bench] [--max-length 512] [--smoke]

Each mode is one cold `ads-build` flow run of the same rows into its own `s3://bench/<mode>` on a moto S3
server, with its own empty row score cache on S3 (`score.cache_uri`), so every row is scored in every mode:
- in-process: the flow scores its shards one after another; torch uses every core (its default);
- dask-1 / dask-2: a `dask scheduler` and `dask worker --nworkers N --nthreads 1` (with nannies, so Dask sets
  OMP_NUM_THREADS=1 in each worker: torch uses exactly one thread per worker, checked and printed before timing;
  TOKENIZERS_PARALLELISM=false keeps the tokenizer on that thread too; Dask's sampling profiler is off, as
  docs/prefect.md recommends for workers that score).
What is timed: the flow call only. The Prefect server (a temporary local one, or PREFECT_API_URL), moto, the
model (the locally built 47M `bench` preset by default), the cluster and its workers' imports
(`--preload ads_prefect.runtime.dask_worker`) are ready before. Data: ROWS rows of ../shared/data/gsm8k/train.jsonl
(the bundled sample without that checkout), repeated with a " (variant N)" suffix until ROWS unique questions.

Printed per mode: wall seconds, rows/s of the whole build and of the score stage, each stage's seconds (format,
score, merge, cluster, sort, report: the ones that do not grow with workers stand out) and the cores other
processes used meanwhile (this machine may be shared: a ratio measured on a busy machine means little). Then the
2-worker / 1-worker ratio of the score stage and of the build; the last line is the build's ratio (target >= 1.7
on 2 cores). `--smoke` (what the test suite runs, in seconds) checks the data, the tools and the flow's parameters,
without servers or timing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_load import busy_cpu  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GSM8K = REPO.parent / "shared" / "data" / "gsm8k" / "train.jsonl"  # ../shared beside the checkout
BIN = Path(sys.executable).parent
BUCKET = "bench"
STAGES = ("format", "score", "merge", "cluster", "sort", "report")


def make_source(rows: int, path: Path) -> str:
    """ROWS unique problems: GSM8K's, then the same again with a variant suffix on the question."""
    if GSM8K.is_file():
        base = [json.loads(line) for line in GSM8K.read_text().splitlines() if line.strip()]
        origin = str(GSM8K)
    else:
        from ads_core.common import defaults

        base = [json.loads(line) for line in Path(defaults.sample_path()).read_text().splitlines() if line.strip()]
        origin = "the bundled sample"
    out = []
    for i in range(rows):
        row = dict(base[i % len(base)])
        if i >= len(base):
            row["question"] = f"{row['question']} (variant {i // len(base)})"
        out.append(json.dumps(row))
    path.write_text("\n".join(out) + "\n")
    print(f"data: {rows} unique rows from {origin} ({len(base)} rows, repeated with variants)")
    return str(path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child in its own process group that gets SIGTERM when this process ends, kill -9 included."""
    from ads_core.common.procs import die_with_parent

    with open(log, "ab") as fh:
        return subprocess.Popen(
            args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent()
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group (a worker's nanny and its workers), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(20)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"error: process {proc.pid} never listened on {port}") from None
            time.sleep(0.3)


def start_moto(work: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """moto's S3 server; its endpoint and (dummy) credentials go to this process and every worker by env."""
    port = free_port()
    procs.append(
        start([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], work / "moto.log", dict(os.environ))
    )
    wait_port(port, procs[-1])
    os.environ.update(
        ADS_S3_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import boto3

    boto3.client("s3", endpoint_url=os.environ["ADS_S3_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)


def start_cluster(workers: int, work: Path, procs: list[subprocess.Popen[bytes]]) -> str:
    """A scheduler and WORKERS single-threaded workers (nannies: Dask sets OMP_NUM_THREADS=1), ready and checked."""
    from distributed import Client

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # the API comes with each task
    # one thread means the tokenizer too: its Rust pool would otherwise let a lone worker borrow the idle core
    # (measured: 1.05 cores for "1 worker, 1 thread"), which flatters the 1-worker baseline
    env["TOKENIZERS_PARALLELISM"] = "false"
    # Dask's statistical profiler samples every thread's stack every 10 ms, holding the GIL: measured here, 5-6 %
    # of a core per worker, which a lone worker takes from the idle core and two workers take from their scoring
    # (docs/prefect.md, "Running on a cluster", sets it for every worker too)
    env["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    port = free_port()
    scheduler = [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
    procs.append(start(scheduler, work / f"scheduler-{workers}.log", env))
    wait_port(port, procs[-1])
    address = f"tcp://127.0.0.1:{port}"
    args = [str(BIN / "dask"), "worker", address, "--nworkers", str(workers), "--nthreads", "1", "--no-dashboard"]
    procs.append(start([*args, "--preload", "ads_prefect.runtime.dask_worker"], work / f"workers-{workers}.log", env))
    with Client(address, timeout=60) as client:
        client.wait_for_workers(workers, timeout=600)
        threads = client.run(lambda: __import__("torch").get_num_threads())
    print(f"dask-{workers}: {address}, torch threads per worker: {sorted(threads.values())}")
    if set(threads.values()) != {1}:
        raise SystemExit(f"error: each worker must use one torch thread, got {threads}")
    return address


def tree_cpu() -> float:
    """CPU seconds of this process and its live descendants (the workers, moto)."""
    total = 0.0
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        except psutil.Error:
            continue
    return total


def worker_cpu(nanny: subprocess.Popen[bytes] | None) -> dict[int, float]:
    """CPU seconds of each worker process below a `dask worker` command (its nanny)."""
    found = {}
    for proc in psutil.Process(nanny.pid).children(recursive=True) if nanny else []:
        try:
            if "resource_tracker" in " ".join(proc.cmdline()):  # multiprocessing's helper, not a worker
                continue
            t = proc.cpu_times()
            found[proc.pid] = t.user + t.system
        except psutil.Error:
            continue
    return found


def timed(mode: str, params: dict[str, Any], nanny: subprocess.Popen[bytes] | None) -> dict[str, Any]:
    from ads_prefect.flows.ads_build import ads_build

    t0, busy0, ours0, workers0 = time.perf_counter(), busy_cpu(), tree_cpu(), worker_cpu(nanny)
    result = ads_build(**params)
    wall = time.perf_counter() - t0
    others = max(0.0, (busy_cpu() - busy0) - (tree_cpu() - ours0)) / wall
    workers = {pid: cpu - workers0.get(pid, 0.0) for pid, cpu in worker_cpu(nanny).items()}
    stages = result["refresh"]["stage_seconds"]
    rows = result["refresh"]["rows"]
    if result["refresh"]["rows_scored"] != rows:
        raise SystemExit(f"error: {mode} scored {result['refresh']['rows_scored']} of {rows} rows (cache not cold?)")
    return {"mode": mode, "wall": wall, "rows": rows, "stages": stages, "others": others, "workers": workers}


def flow_params(mode: str, source: str, model: str, args: argparse.Namespace, dask: str | None) -> dict[str, Any]:
    return dict(
        source=source,
        out=f"s3://{BUCKET}/{mode}",
        dataset="bench-scale",
        score={
            "model": model,
            "num_shards": args.shards,
            "max_length": args.max_length,
            "cache_uri": f"s3://{BUCKET}/score-cache-{mode}",  # cold: every row is scored in every mode
        },
        run={"dask": dask},
    )


def smoke(args: argparse.Namespace, work: Path) -> None:
    """What can go stale without servers: the data, the tools it starts, the imports and the flow's parameters."""
    import inspect

    from ads_core.common.procs import die_with_parent  # noqa: F401
    from ads_core.models import resolve_model  # noqa: F401
    from ads_core.models.tiny import model_fingerprint  # noqa: F401
    from ads_prefect.flows.ads_build import ads_build

    missing = [tool for tool in ("moto_server", "dask") if not (BIN / tool).exists()]
    if missing:
        raise SystemExit(f"error: {', '.join(missing)} not found beside {sys.executable}")
    source = make_source(20, work / "data.jsonl")
    for mode in args.modes.split(","):
        inspect.signature(ads_build.fn).bind(**flow_params(mode, source, args.model, args, None))
    print(f"smoke: ads_build accepts the parameters of modes {args.modes}")
    print("smoke: skipped the timed runs (they need moto, a Prefect server and Dask): run without --smoke")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=8, help="score shards (the same in every mode)")
    parser.add_argument("--model", default="bench", help="policy model (default: the local 47M 'bench' preset)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--modes", default="in-process,dask-1,dask-2")
    parser.add_argument("--smoke", action="store_true", help="seconds: data, tools and the flow's parameters")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ads-bench-scale-"))
    if args.smoke:
        try:
            smoke(args, work)
        finally:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        return
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.pop("ADS_LOCK_DIR", None)  # OUT on S3: its lock lives in the bucket
    if not os.environ.get("PREFECT_API_URL"):
        os.environ["PREFECT_HOME"] = str(work / "prefect-home")
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        source = make_source(args.rows, work / "data.jsonl")
        start_moto(work, procs)
        from prefect.client.orchestration import get_client

        from ads_core.models import resolve_model
        from ads_core.models.tiny import model_fingerprint
        from ads_prefect.runtime.server import start_temporary_server

        model = resolve_model(args.model)  # built now if needed, outside every timing
        model_fingerprint(model)
        if not os.environ.get("PREFECT_API_URL"):
            start_temporary_server()  # as `ads build` does: outside the timings, and stopped with this process
        with get_client(sync_client=True) as client:
            print(f"prefect api: {client.api_url}; model: {model}; load average {os.getloadavg()}")
        import torch

        print(f"in-process: torch threads {torch.get_num_threads()} (its default: every core)")
        runs = []
        for mode in args.modes.split(","):
            dask = None
            if mode.startswith("dask-"):
                dask = start_cluster(int(mode.removeprefix("dask-")), work, procs)
            params = flow_params(mode, source, model, args, dask)
            runs.append(timed(mode, params, procs[-1] if dask else None))
            run = runs[-1]
            times = ", ".join(f"{s} {run['stages'].get(s, 0):.1f}" for s in STAGES)
            busy = ", ".join(f"{cpu:.1f}" for cpu in run["workers"].values())
            print(
                f"{mode}: {run['wall']:.1f} s, {run['rows'] / run['wall']:.1f} rows/s (build), "
                f"{run['rows'] / run['stages']['score']:.1f} rows/s (score stage); stage s: {times}; "
                + (f"worker CPU s: {busy}; " if dask else "")
                + f"other processes used {run['others']:.2f} cores meanwhile",
                flush=True,
            )
            if dask:  # the next mode starts its own cluster
                for proc in procs[1:]:
                    stop(proc)
                del procs[1:]
    finally:
        for proc in reversed(procs):
            stop(proc)
    by_mode = {r["mode"]: r for r in runs}
    if "dask-1" in by_mode and "dask-2" in by_mode:
        one, two = by_mode["dask-1"], by_mode["dask-2"]
        score = one["stages"]["score"] / two["stages"]["score"]
        build = one["wall"] / two["wall"]
        print(f"score stage, 2 workers / 1 worker: {score:.2f}x")
        print(f"build rows/s, 2 workers / 1 worker: {build:.2f}x (target >= 1.7 on 2 cores)")
        print(f"{build:.4f}")


if __name__ == "__main__":
    main()
