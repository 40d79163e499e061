"""Shared fixtures, kept small and generic.

Nothing reaches the network at run time: the hub and datasets libraries are told so before any test module
imports them (a library that reads these variables at import would otherwise try the hub, and time out).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from ads_core.common.gc_tuning import freeze_what_is_loaded, tune_gc_for_batch_work

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One compute thread per process, here and in every process a test starts (they inherit the environment). The
# suite runs one xdist worker more than the cores, beside servers and build subprocesses: a second OpenMP/BLAS
# thread has no idle core to run on, and its partner spins at each barrier while it waits. Measured on 2 cores:
# the same in-process torch tests took 1.8-2.7x the CPU time under the full suite with the default 2 threads; a
# tiny-model forward pass gives bit-identical logits with 1 or 2 threads. Set these variables to override.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Let Python cache compiled modules (__pycache__, its default) in this run and every process it starts, even where
# the shell sets PYTHONDONTWRITEBYTECODE (this workplace's machines do): uv installs packages without bytecode, so
# otherwise every test process (CLI runs, flow-run workers, Prefect servers, bench smokes) compiles torch,
# transformers and Prefect again. Measured on 2 cores: importing torch + transformers + prefect + TRL's GRPO
# trainer costs 14.9 CPU-s without cached bytecode and 6.4 with it; `ads demo --smoke`'s test 84 against 51.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# One folder the whole run shares: the xdist workers inherit its path (they start after pytest_configure). A
# server every worker needs (the Prefect server of tests/flows) is started once, by the first worker that asks
# for it, and recorded here; the process that made the folder stops every recorded server at the end, after the
# workers are gone. Measured on 2 cores, whole suite with 3 workers, back to back: 547 s and 1,015 CPU-s with a
# server per worker, 500 s and 859 CPU-s with one for the run. Unless ADS_CACHE_DIR is set (`.ci/run` sets it),
# the run's cache of generated models, scored rows and Prefect databases is here too, one for every worker (never
# the user's, whose default model it starts with): a build made in one worker is cached for another.
SHARED_DIR_ENV = "ADS_TEST_RUN_DIR"
CACHE_ENV = "ADS_CACHE_DIR"
_RUN_DIR = pytest.StashKey[Path]()
_OWN_CACHE = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    tune_gc_for_batch_work()  # in every test process, as the `ads` commands set it (ads_core/common/gc_tuning.py)
    if os.environ.get(SHARED_DIR_ENV):
        return  # an xdist worker (or a pytest a test started): the run's folder is already there
    run_dir = Path(tempfile.mkdtemp(prefix="ads-tests-"))
    os.environ[SHARED_DIR_ENV] = str(run_dir)
    config.stash[_RUN_DIR] = run_dir
    if not os.environ.get(CACHE_ENV):
        seed_cache_from_setup(run_dir / "cache")
        os.environ[CACHE_ENV] = str(run_dir / "cache")
        config.stash[_OWN_CACHE] = True


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, transformers, Prefect, every test module) lives as long as the process and
    holds no garbage: frozen, full collections no longer walk it. In-process tests each ran a few, explicit ones
    included (accelerate collects at every `Trainer.train`): measured on the 16 quick TRL tests of
    test_trl_train/features/resume with `-n 0`, 47.8 CPU-s before, 39.4 after (with the raised threshold; two
    runs each, alternated)."""
    freeze_what_is_loaded()


def seed_cache_from_setup(cache: Path) -> None:
    """The run's own cache starts with a copy of the default model the README's setup (`ads build`) built in the
    user's cache, which is only read: building it costs about 20 CPU-s (measured on 2 cores: tests/ads_core/
    test_models.py with 2 workers, 38 CPU-s from an empty user cache, 18 with the setup's model)."""
    from ads_core.models.tiny import cached_model_dir, is_built

    setup_model = cached_model_dir("tiny")  # ADS_CACHE_DIR is unset here: the user's cache
    if is_built(setup_model):
        shutil.copytree(setup_model, cache / "models" / setup_model.name)


def pytest_unconfigure(config: pytest.Config) -> None:
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return
    os.environ.pop(SHARED_DIR_ENV, None)
    if config.stash.get(_OWN_CACHE, False):
        os.environ.pop(CACHE_ENV, None)
    left = [f"{record.name}: pid {pid}" for record in run_dir.glob("*.server.json") if (pid := stop_recorded(record))]
    shutil.rmtree(run_dir, ignore_errors=True)
    if left:
        raise RuntimeError(f"servers still running after the run: {left}")


def _group_running(pgid: int) -> bool:
    """Whether any process of process group PGID runs (a zombie, ended but not yet reaped, does not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def stop_recorded(record: Path) -> int | None:
    """SIGTERM the process group a `*.server.json` record names (its leader started with start_new_session), then
    SIGKILL, until no process of the group runs; reap the leader when it is this process's child. Returns its pid
    while one still runs, else None."""
    info = json.loads(record.read_text())
    pid, marker = int(info["pid"]), str(info["cmdline_has"])
    try:
        if marker not in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
            return None  # gone, and the pid maybe reused
    except FileNotFoundError:
        return None
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while _group_running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)  # polling processes this process cannot wait for (the leader's parent was a worker)
        try:
            os.waitpid(pid, os.WNOHANG)  # reaped here when this process started it (pytest -n 0)
        except ChildProcessError:
            pass
        if not _group_running(pid):
            return None
    return pid


def once_per_run(name: str, make: Callable[[Path], Any]) -> Any:
    """MAKE(folder) once for the whole run, its JSON value shared by the xdist workers: the first worker that asks
    makes it in a folder of the run's (ADS_TEST_RUN_DIR/NAME, always there: pytest_configure made it) and records
    the value in NAME.json; the others wait for the record and read it. What MAKE writes must not depend on which
    worker asks."""
    run_dir = Path(os.environ[SHARED_DIR_ENV])
    record = run_dir / f"{name}.json"
    with open(run_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker; the others wait for its record
        if record.is_file():
            return json.loads(record.read_text())
        value = make(run_dir / name)
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, record)
        return value


@pytest.fixture(scope="session")
def run_once() -> Callable[[str, Callable[[Path], Any]], Any]:
    """`once_per_run` above, for fixtures in other conftest files (with --import-mode=importlib they cannot import
    this one)."""
    return once_per_run


@pytest.fixture(scope="session")
def stop_recorded_server() -> Callable[[Path], int | None]:
    """`stop_recorded` above, for its own test (with --import-mode=importlib test modules cannot import conftest)."""
    return stop_recorded


@pytest.fixture(autouse=True)
def _progress_lines_stay_in_their_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI command run in-process (CliRunner: stdout is not a terminal) turns progress lines on for its process
    and children (ADS_PROGRESS_LINES, `ads_core.common.progress`); the switch ends with the test."""
    monkeypatch.delenv("ADS_PROGRESS_LINES", raising=False)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets in ../shared/data (GSM8K, MATH-500, AIME24, AMC23); skip when this checkout has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def grader_verifier() -> None:
    """The grader's verifier started as entry points start it (`start_verifier`), for tests that check verdicts
    math-verify gives: in a process that has none, answers that need it while it starts (seconds) are timeouts.
    Not shared with the processes tests start (they test a fresh process's own start)."""
    from ads_core.grading.api import start_verifier

    start_verifier(share_with_children=False)


def copy_prefect_home(source: Path, home: Path) -> Path:
    """A new PREFECT_HOME holding a consistent copy (SQLite's backup, safe while a server writes) of SOURCE's
    database, migrations done, when SOURCE has one (else empty): a process that starts its own temporary server
    there skips the ~13 CPU-s a fresh database costs."""
    import sqlite3

    home.mkdir(parents=True, exist_ok=True)
    if (source / "prefect.db").is_file():
        with sqlite3.connect(source / "prefect.db") as src, sqlite3.connect(home / "prefect.db") as dst:
            src.backup(dst)
    return home


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Callable[..., None]:
    """Declare entry points as installed packages would, in copies of the registries read afresh:
    `installed(SAMPLER_KIND_ENTRY_POINTS, TRAINER_ENTRY_POINTS)`."""
    from ads_core.common.registry import Registry
    from ads_core.sampler import kinds
    from ads_core.train import options, trainers

    def declare(sampler_kinds: list[EntryPoint], trainer_eps: list[EntryPoint]) -> None:
        declared = {kinds.ENTRY_POINT_GROUP: sampler_kinds, trainers.ENTRY_POINT_GROUP: trainer_eps}
        for module, registry in ((kinds, "KINDS"), (trainers, "TRAINERS")):
            copy = Registry(getattr(module, registry).kind)
            for name in getattr(module, registry).names():
                copy.register(name)(getattr(module, registry).get(name))
            monkeypatch.setattr(module, registry, copy)
            monkeypatch.setattr(module, "entry_points", lambda group: declared[group])
        monkeypatch.setattr(kinds, "_entry_points_loaded", False)
        monkeypatch.setattr(trainers, "_loaded", False)

    request.addfinalizer(options._config_model.cache_clear)  # trees made from these registries go with them
    request.addfinalizer(options._sampler_model.cache_clear)
    return declare


@pytest.fixture(scope="session")
def prefect_home_copy() -> Any:
    """`copy_prefect_home` above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    return copy_prefect_home


# A test's rough cost in seconds on 2 busy cores, from its markers and fixtures (means measured over the whole
# suite with 3 workers): a `slow` one 68, one that uses a Prefect server, moto or the browser 12, the rest 0.6.
SERVER_FIXTURES = frozenset({"prefect_api", "prefect_server", "clean_build", "ads_server", "moto_s3"})
HEAVY_UNIT_S = 20.0  # a module costing more is placed as a whole; lighter ones fill the chunks


def estimated_cost(item: pytest.Item) -> float:
    if item.get_closest_marker("slow"):
        return 68.0
    if item.get_closest_marker("browser") or SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return 12.0
    return 0.6


def worksteal_chunks(total: int, workers: int) -> list[int]:
    """How many tests pytest-xdist's worksteal scheduler first hands each worker: contiguous parts of the
    collection, `len(pending) // workers_left` each, in order."""
    sizes, left = [], total
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    return sizes


def balanced_order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The collection reordered so that each worker's first contiguous part starts with an equal share of the
    expensive modules (largest first, each to the least loaded part with room), then light modules up to the
    part's size. A worker that finishes early steals half of the longest queue from its tail, where only light
    tests remain. Each module stays together and in order, so its fixtures are set up once; modules with browser
    tests (or that use `ads server`) form one unit, sharing one `ads server` and its first build."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    browser = [
        m
        for m, its in modules.items()
        if any(i.get_closest_marker("browser") or "ads_server" in getattr(i, "fixturenames", ()) for i in its)
    ]
    units: list[tuple[float, list[pytest.Item]]] = []  # (estimated cost, tests) of each unit placed whole
    if browser:
        together = [i for m in browser for i in modules[m]]
        units.append((sum(map(estimated_cost, together)), together))
    light: list[pytest.Item] = []
    for path, its in modules.items():
        if path not in browser:
            cost = sum(map(estimated_cost, its))
            if cost >= HEAVY_UNIT_S:
                units.append((cost, its))
            else:
                light.extend(its)
    sizes = worksteal_chunks(len(items), workers)
    parts: list[list[pytest.Item]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    for cost, unit in sorted(units, key=lambda u: -u[0]):  # stable: ties keep collection order
        roomy = [k for k in range(len(parts)) if len(parts[k]) + len(unit) <= sizes[k]] or list(range(len(parts)))
        k = min(roomy, key=lambda k: load[k])
        parts[k].extend(unit)
        load[k] += cost
    for k, part in enumerate(parts):
        take = max(0, sizes[k] - len(part)) if k < len(parts) - 1 else len(light)
        part.extend(light[:take])
        light = light[take:]
    return [item for part in parts for item in part]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the tests for pytest-xdist's worksteal scheduler (`balanced_order`). Without balancing, the long
    tests all sat in one worker's part and the others stole them from its tail last: one worker still ran
    minute-long tests while the other cores idled (measured: workers busy 580, 700 and 570 s). Every worker
    computes the same order from the same collection, as xdist requires."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    ordered = balanced_order(items, workers)
    assert sorted(map(id, ordered)) == sorted(map(id, items)), "the test order lost or repeated a test"
    items[:] = ordered


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker more than the cores this process may use. Many tests wait on a
    server, a subprocess or a lease while their worker's core idles; measured on 2 cores, whole suite, with one
    Prefect server for the run (2026-12-07, back to back): 2 workers 533 s (819 CPU-s), 3 workers 500 s (859),
    4 workers 558 s (963). PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)  # not on macOS
    return cores + 1
