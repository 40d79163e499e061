"""The default model is built locally, deterministically, and loads through `from_pretrained`."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from ads_core import models

TEXTS = [
    "Question:\nWhat is 12+30?\n\nAnswer:\n42",
    "Natalia sold 48/2 = 24 clips in May.\n#### 72",
    "Let $f(x) = \\frac{1}{x}$; then \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.",
    "héllo wörld — ünïcode 123456789 \t  tabs\n\n\nnewlines",
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tiny_model_is_deterministic(tiny_model_dir: Path, tmp_path: Path):
    """Two builds, warm-up included, give the same bytes (a few warm-up steps: the full 100 cost ~3 CPU-minutes);
    the session's default model has the tokenizer a fresh build trains."""
    spec = replace(models.TINY_PRESETS["tiny"], train_steps=3)
    a = models.make_tiny_model(tmp_path / "a", spec=spec)
    b = models.make_tiny_model(tmp_path / "b", spec=spec)
    untrained = models.make_tiny_model(tmp_path / "c", spec=replace(spec, train_steps=0))
    assert _sha(a / "model.safetensors") == _sha(b / "model.safetensors")
    assert _sha(a / "model.safetensors") != _sha(untrained / "model.safetensors")  # the warm-up did run
    assert _sha(a / "tokenizer.json") == _sha(tiny_model_dir / "tokenizer.json")
    assert json.loads((tiny_model_dir / "config.json").read_text())["model_type"] == "qwen2"


def test_autotokenizer_matches_the_trained_tokenizer_after_reload(tiny_model_dir: Path):
    auto = AutoTokenizer.from_pretrained(tiny_model_dir)
    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    for text in TEXTS:
        assert auto(text, add_special_tokens=False)["input_ids"] == raw.encode(text, add_special_tokens=False).ids
        assert auto.decode(auto(text, add_special_tokens=False)["input_ids"]) == text
    rendered = auto.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_load_uses_the_asked_dtype_on_cpu_and_the_real_from_pretrained_path(tiny_model_dir: Path):
    loaded = models.load_causal_lm(str(tiny_model_dir), device="cpu", dtype="float32")
    assert loaded.dtype == torch.float32
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert loaded.name == str(tiny_model_dir)


def test_training_loads_through_loading_py_in_float32_on_cpu_left_padded(tiny_model_dir: Path, tmp_path: Path):
    """Issue 41: the TRL run loaded its policy with its own from_pretrained calls; it now uses `load_for_training`,
    which keeps training in float32 on a CPU (not the measured scoring dtype) and pads prompts on the left."""
    import ast

    from ads_core.models.loading import ModelLoadError, load_for_training

    model, tokenizer = load_for_training(str(tiny_model_dir), "cpu")
    assert next(model.parameters()).dtype == torch.float32 and model.training is False  # as from_pretrained left it
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    with pytest.raises(ModelLoadError, match="cannot load model"):
        load_for_training(str(tmp_path / "nope"), "cpu")
    source = Path(models.__file__).parents[1] / "train" / "trl" / "run.py"
    called = [n.func for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.Call)]
    assert not [f for f in called if isinstance(f, ast.Attribute) and f.attr == "from_pretrained"]
    assert [f.id for f in called if isinstance(f, ast.Name) and f.id == "load_for_training"] == ["load_for_training"]


def test_default_alias_resolves_to_the_cached_tiny_model(tiny_model_dir: Path):
    assert models.resolve_model(None) == str(tiny_model_dir)
    assert models.resolve_model("default") == str(tiny_model_dir)
    assert models.resolve_model("Qwen/Qwen2.5-Math-1.5B") == "Qwen/Qwen2.5-Math-1.5B"


def test_a_second_builder_waits_for_the_first_instead_of_replacing_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Regression: two processes (xdist workers, Dask workers) sharing a cache dir that lacked the default model
    both built it, and the second replaced the folder while the first was loading it. The second now waits for
    the first's build and uses it: one build."""
    from ads_core.models import tiny

    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path))
    builds: list[str] = []
    second: list[threading.Thread] = []

    def fake_build(path: Path, preset: str, progress: object = None) -> Path:
        builds.append(threading.current_thread().name)
        if not second:  # the first builder: another one asks while it builds
            second.append(threading.Thread(target=tiny.default_model_dir, name="second"))
            second[0].start()
            second[0].join(timeout=2)  # it waits on the lock (without one it builds within this time)
        path.mkdir(parents=True, exist_ok=True)
        (path / "ads_tiny_model.json").write_text("{}")
        return path

    monkeypatch.setattr(tiny, "make_tiny_model", fake_build)
    first = tiny.default_model_dir()
    second[0].join(timeout=30)
    assert not second[0].is_alive() and builds == ["MainThread"]
    assert first == tiny.cached_model_dir() and tiny.is_built(first)


def test_missing_model_gives_a_clear_error(tmp_path: Path):
    with pytest.raises(models.ModelLoadError, match="cannot load model"):
        models.load_causal_lm(str(tmp_path / "nope"))


def test_the_dtype_reaches_the_loaded_weights_and_the_logits(tiny_model_dir: Path, tmp_path: Path):
    """An explicit dtype is what the weights and the forward pass really use; with "auto" on CPU the model runs
    in the dtype this CPU gets for the model's shape (bf16 where it is faster here, else fp32), whatever dtype the
    checkpoint was saved in (the hardware decides, not the file)."""
    auto_dtype = models.pick_dtype("cpu", model=str(tiny_model_dir))
    other = "float32" if auto_dtype == torch.bfloat16 else "bfloat16"
    saved = models.load_causal_lm(str(tiny_model_dir), device="cpu", dtype=other)
    assert saved.dtype == getattr(torch, other)
    assert {p.dtype for p in saved.model.parameters()} == {getattr(torch, other)}
    ids = saved.tokenizer("What is 12+30?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert saved.model(ids).logits.dtype == getattr(torch, other)

    saved.model.save_pretrained(tmp_path / other)
    saved.tokenizer.save_pretrained(tmp_path / other)
    assert json.loads((tmp_path / other / "config.json").read_text()).get("dtype") == other
    auto = models.load_causal_lm(str(tmp_path / other), device="cpu")
    assert auto.dtype == auto_dtype
    assert {p.dtype for p in auto.model.parameters()} == {auto_dtype}
    with torch.no_grad():
        assert auto.model(ids).logits.dtype == auto_dtype


def test_gpu_devices_default_to_bf16_and_an_explicit_dtype_wins():
    assert models.pick_dtype("cuda:1") == torch.bfloat16  # an indexed GPU is still a GPU
    assert models.pick_dtype("cuda:0", "float16") == torch.float16


def test_auto_device_is_torchs_answer_and_needs_no_torch_without_gpu_nodes(tmp_path: Path):
    """`auto` agrees with torch here; with none of the GPU device nodes present it is "cpu" without importing
    torch (a build whose rows all come from the score cache then never imports it), and with one present it asks
    torch. The score cache's namespace uses the same choice, so it is the device and dtype the scorer runs in."""
    import subprocess
    import sys

    assert models.pick_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert models.pick_device("cuda:1") == "cuda:1"
    for device in ("cpu", "cuda:0"):
        for dtype in ("auto", *models.DTYPES):
            assert getattr(torch, models.dtype_choice(device, dtype)) == models.pick_dtype(device, dtype)
    probe = (
        "import sys; from ads_core import models; "
        "print(models.pick_device('auto', nodes=(sys.argv[1],)), 'torch' in sys.modules)"
    )
    absent, present = tmp_path / "no-such-node", tmp_path / "node"
    present.touch()
    for node, expected in ((absent, "cpu False"), (present, f"{models.pick_device('auto')} True")):
        out = subprocess.run([sys.executable, "-c", probe, str(node)], capture_output=True, text=True, check=True)
        assert out.stdout.split() == expected.split(), out.stderr
