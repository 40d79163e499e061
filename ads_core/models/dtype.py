"""What `dtype=auto` is on a CPU: bf16 only where it is faster here, measured, not assumed from the CPU's flags.

AVX512-BF16 alone does not make bf16 faster: on a 2-core Xeon with `avx512_bf16` and no AMX, a 1024^2 matmul ran
234 GFLOP/s in fp32 and 156 in bf16, and building MATH-500 in bf16 took 1.41x as long (issue 36). With AMX, bf16
is several times faster (oneDNN's tile kernels). So:
- AMX (`amx_bf16`): bf16, without measuring;
- no native bf16 at all (AVX2 and older): fp32, without measuring (bf16 is emulated there, ~8-10x slower);
- otherwise (`avx512_bf16` without AMX, Arm's `bf16`): a short timed matmul of both dtypes at the model's shape
  (hidden size, about 0.3 s in all); bf16 only when it is clearly faster (`MARGIN`, in its best round and in most
  rounds), so `auto` is never slower than fp32, also when a busy machine makes the timings noisy.
The measurement is cached per machine in `<ADS_CACHE_DIR>/dtype-choice.json`, keyed by CPU model, torch version,
shape and thread count, and read without importing torch: a build whose rows all come from the score cache (whose
namespace holds this choice) still never imports torch. The first process on a machine that needs the choice
measures it (under a file lock, so concurrent workers agree) and imports torch to do so, about a second.
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ads_core.common import defaults

log = logging.getLogger("ads.models")

AMX_FLAGS = ("amx_bf16",)
MEASURED_FLAGS = ("avx512_bf16", "bf16")  # native bf16 arithmetic without AMX: x86 AVX512-BF16, Arm's BF16
MARGIN = 1.10  # bf16 must take at most 1/1.10 of fp32's time (> 10% faster) to be chosen
DEFAULT_HIDDEN = 1024  # the shape timed when the model's hidden size cannot be read
ROUNDS = 7  # timed rounds per dtype, interleaved (see `measure`)
MIN_WINS = 0.7  # the share of paired rounds bf16 must win by MARGIN
ROUND_S = 0.02  # about this long per round
CACHE_NAME = "dtype-choice.json"
# (hidden, dtype name) -> seconds per matmul; the real one is `time_matmul`, tests pass a fake
Timer = Callable[[int, str], float]


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name ('' where /proc/cpuinfo has none)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "CPU part"):
                    return value.strip()
    except OSError:
        pass
    return ""


def torch_version() -> str:
    """The installed torch's version, from its metadata (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def thread_count() -> int:
    """The compute threads this process runs with (OMP_NUM_THREADS, else the CPUs it may use), without torch."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cache_key(hidden: int) -> str:
    return f"{cpu_model() or 'unknown cpu'} | torch {torch_version()} | hidden {hidden} | threads {thread_count()}"


def hidden_size(model: str | None) -> int | None:
    """The model's hidden size from its config.json (a local directory, or a hub id in the local cache), no torch."""
    if not model:
        return None
    config = Path(model) / "config.json"
    if not config.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config.json")
        except Exception:  # not a hub id, or no cache: the default shape is timed
            return None
        if not isinstance(found, str):
            return None
        config = Path(found)
    try:
        cfg = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}
    value = cfg.get("hidden_size") or cfg.get("n_embd") or cfg.get("d_model")
    return int(value) if isinstance(value, int) and value > 0 else None


def time_matmul(hidden: int, dtype: str) -> float:
    """Seconds per `linear` of 256 tokens through a hidden x 4*hidden weight (a transformer MLP's shape) in DTYPE,
    averaged over about `ROUND_S` of repeats after a warm-up: one round (`measure` interleaves them)."""
    import torch

    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, hidden, generator=gen).to(dt)
    w = torch.randn(4 * hidden, hidden, generator=gen).to(dt)
    with torch.inference_mode():
        torch.nn.functional.linear(x, w)  # warm-up: oneDNN picks and JITs its kernel here
        t0 = time.perf_counter()
        torch.nn.functional.linear(x, w)
        reps = max(1, min(200, int(ROUND_S / max(time.perf_counter() - t0, 1e-6))))
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.nn.functional.linear(x, w)
        return (time.perf_counter() - t0) / reps


def measure(hidden: int, timer: Timer = time_matmul, rounds: int = ROUNDS) -> dict[str, Any]:
    """Both dtypes timed in alternating rounds (a neighbour's load hits both alike). bf16 is chosen only when it is
    clearly faster both in the best rounds (the least disturbed: min over rounds) and round by round (in at least
    `MIN_WINS` of the paired rounds): a busy machine's noise leaves fp32, which is never slower than itself."""
    times: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for _ in range(rounds):
        for name in times:
            times[name].append(timer(hidden, name))
    fp32, bf16 = min(times["float32"]), min(times["bfloat16"])
    speedup = fp32 / bf16 if bf16 > 0 else 0.0
    wins = sum(f > b * MARGIN for f, b in zip(times["float32"], times["bfloat16"], strict=True))
    return {
        "choice": "bfloat16" if speedup > MARGIN and wins >= MIN_WINS * rounds else "float32",
        "float32_s": fp32,
        "bfloat16_s": bf16,
        "bf16_speedup": round(speedup, 3),
        "bf16_rounds_won": f"{wins}/{rounds}",
        "hidden": hidden,
    }


def cache_file() -> Path:
    return defaults.cache_dir() / CACHE_NAME


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def measured_choice(hidden: int, timer: Timer = time_matmul, path: Path | None = None) -> dict[str, Any]:
    """The cached measurement for this machine and shape, measured (and cached) the first time. The file lock
    makes concurrent processes (Dask workers) measure once and agree."""
    path = path or cache_file()
    key = cache_key(hidden)
    entry = _read(path).get(key)
    if isinstance(entry, dict) and entry.get("choice") in ("float32", "bfloat16"):
        return entry
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = _read(path)
        entry = data.get(key)
        if isinstance(entry, dict) and entry.get("choice") in ("float32", "bfloat16"):
            return entry
        entry = {**measure(hidden, timer), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        data[key] = entry
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    log.info(
        "dtype auto on this CPU: %s (bf16 %.2fx fp32 at hidden %d; cached in %s)",
        entry["choice"],
        entry["bf16_speedup"],
        hidden,
        path,
    )
    return entry


def cpu_auto_dtype(flags: Iterable[str], model: str | None = None, timer: Timer | None = None) -> str:
    """`auto` on a CPU with these flags, for MODEL's shape (module docstring)."""
    flags = frozenset(flags)
    if any(f in flags for f in AMX_FLAGS):
        return "bfloat16"
    if not any(f in flags for f in MEASURED_FLAGS):
        return "float32"
    hidden = hidden_size(model) or DEFAULT_HIDDEN
    if timer is not None:
        return str(measured_choice(hidden, timer)["choice"])
    return _this_machine(hidden)


@functools.cache
def _this_machine(hidden: int) -> str:
    """One answer per shape for the life of a process, whatever the file does meanwhile."""
    return str(measured_choice(hidden)["choice"])
