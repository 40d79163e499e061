"""`dtype=auto` on a CPU is measured, not assumed: AMX is bf16, emulated bf16 is fp32, and AVX512-BF16 without AMX
is bf16 only when a timed matmul says it is clearly faster; the measurement is cached per machine and shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ads_core import models
from ads_core.models import dtype

AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_bf16"})


class FakeTimer:
    """Seconds per matmul by dtype name, and the calls made."""

    def __init__(self, float32: float, bfloat16: float) -> None:
        self.seconds = {"float32": float32, "bfloat16": bfloat16}
        self.calls: list[tuple[int, str]] = []

    def __call__(self, hidden: int, name: str) -> float:
        self.calls.append((hidden, name))
        return self.seconds[name]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / dtype.CACHE_NAME


def never(hidden: int, name: str) -> float:
    raise AssertionError("nothing should be timed here")


def test_amx_is_bf16_and_emulated_bf16_is_fp32_without_timing():
    assert dtype.cpu_auto_dtype({"avx512_bf16", "amx_bf16", "amx_tile"}, timer=never) == "bfloat16"
    assert dtype.cpu_auto_dtype({"avx2", "fma"}, timer=never) == "float32"
    assert dtype.cpu_auto_dtype(set(), timer=never) == "float32"


def test_avx512_bf16_slower_than_fp32_is_fp32():
    """The case of issue 36: avx512_bf16 without AMX, bf16 matmuls at 2/3 of fp32's rate."""
    timer = FakeTimer(float32=1.0, bfloat16=1.5)
    assert dtype.cpu_auto_dtype(AVX512_BF16, timer=timer) == "float32"
    assert {name for _, name in timer.calls} == {"float32", "bfloat16"}


def test_bf16_clearly_faster_is_bf16_and_a_small_lead_is_not():
    assert dtype.cpu_auto_dtype(AVX512_BF16, timer=FakeTimer(float32=1.0, bfloat16=0.5)) == "bfloat16"
    assert dtype.measure(64, FakeTimer(float32=1.0, bfloat16=0.95))["choice"] == "float32"  # 5% is within noise


def test_noisy_rounds_do_not_decide():
    """Rounds alternate dtypes: slow fp32 rounds (a neighbour's burst) do not make bf16 look faster, and neither does
    one lucky bf16 round; bf16 needs its best round and most rounds."""
    fp32 = iter([1.0, 9.0, 1.0, 9.0, 1.0, 1.0, 1.0])
    got = dtype.measure(64, lambda hidden, name: next(fp32) if name == "float32" else 1.0)
    assert got["choice"] == "float32" and got["float32_s"] == got["bfloat16_s"] == 1.0
    bf16 = iter([0.2, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    got = dtype.measure(64, lambda hidden, name: next(bf16) if name == "bfloat16" else 1.0)
    assert got["choice"] == "float32" and got["bf16_rounds_won"] == "1/7"


def test_the_measurement_is_cached_per_shape(own_cache: Path, tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 96}))
    timer = FakeTimer(float32=1.0, bfloat16=0.5)
    assert dtype.cpu_auto_dtype(AVX512_BF16, str(model), timer=timer) == "bfloat16"
    first = len(timer.calls)
    assert first == 2 * dtype.ROUNDS and {h for h, _ in timer.calls} == {96}  # the model's shape is timed
    timer.seconds["bfloat16"] = 5.0  # a cache hit must not look again
    assert dtype.cpu_auto_dtype(AVX512_BF16, str(model), timer=timer) == "bfloat16"
    assert len(timer.calls) == first
    entry = json.loads(own_cache.read_text())[dtype.cache_key(96)]
    assert entry["choice"] == "bfloat16" and entry["bf16_speedup"] == 2.0
    assert dtype.cpu_auto_dtype(AVX512_BF16, None, timer=timer) == "float32"  # another shape: measured
    assert {h for h, _ in timer.calls[first:]} == {dtype.DEFAULT_HIDDEN}


def test_the_key_names_the_machine_torch_shape_and_threads(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    key = dtype.cache_key(512)
    assert "hidden 512" in key and "threads 3" in key and f"torch {dtype.torch_version()}" in key
    assert dtype.cache_key(512) != dtype.cache_key(1024)


def test_a_cached_choice_is_read_without_importing_torch(own_cache: Path, tmp_path: Path):
    """The score cache's namespace holds the choice: a fully cached build must not import torch to compute it."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 80}))
    own_cache.parent.mkdir(parents=True)
    own_cache.write_text(json.dumps({dtype.cache_key(80): {"choice": "bfloat16"}}))
    probe = (
        "import sys; from ads_core import models; "
        f"print(models.dtype_choice('cpu', 'auto', frozenset({sorted(AVX512_BF16)!r}), sys.argv[1]), "
        "'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(model)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["bfloat16", "False"]


def test_explicit_and_gpu_dtypes_never_measure():
    assert models.dtype_choice("cpu", "float32", AVX512_BF16) == "float32"
    assert models.dtype_choice("cuda:0", "auto", AVX512_BF16) == "bfloat16"


def test_the_hidden_size_is_read_from_the_config(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 2048}}))
    assert dtype.hidden_size(str(tmp_path)) == 2048
    assert dtype.hidden_size(str(tmp_path / "missing")) is None
    assert dtype.hidden_size(None) is None
