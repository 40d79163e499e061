"""`ads_core.evaluation` and `ads eval`: the estimators' literal values, the summary recomputed from the
completions file, a resumed evaluation equal to an uninterrupted one (tiny model, real transformers backend),
and the CLI's one-line errors."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_core.common.errors import InputError
from ads_core.config.eval import EvalConfig
from ads_core.evaluation import metrics
from ads_core.evaluation.backends import Problem, Sample, mix, uniforms
from ads_core.evaluation.runner import evaluate


def test_pass_at_k_literal_values():
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert metrics.pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # C(7,5) / C(10,5)
    assert metrics.pass_at_k(16, 1, 4) == pytest.approx(0.25)  # 1 - C(15,4)/C(16,4) = 4/16
    assert metrics.pass_at_k(5, 0, 3) == 0.0
    assert metrics.pass_at_k(5, 3, 3) == 1.0  # n - c < k: some draw of 3 always holds a correct one
    assert metrics.pass_at_k(2, 1, 2) == 1.0
    with pytest.raises(ValueError):
        metrics.pass_at_k(4, 5, 2)
    with pytest.raises(ValueError):
        metrics.pass_at_k(4, 1, 5)


def test_majority_vote_and_set_summary():
    # ties go to the answer seen first; spacing does not split a vote; no answer never wins
    assert metrics.majority_answer(["2", "3", "3 ", "2"]) == 0
    assert metrics.majority_answer([None, "7", None, " 7"]) == 1
    assert metrics.majority_answer([None, None]) is None
    problems = [
        ([True, False, False, False], ["1", "2", "2", None]),  # mean .25, pass@4 1, maj wrong (2)
        ([False, True, True, False], ["5", "4", "4", "5"]),  # tie 5 vs 4: 5 seen first -> wrong
        ([False, False, False, False], [None, None, None, None]),
        ([True, True, True, False], ["9", "9", "9", "8"]),
    ]
    s = metrics.summarize_problems(problems, 4)
    assert s["mean_at_k"] == pytest.approx((0.25 + 0.5 + 0 + 0.75) / 4)
    assert s["pass_at_k"] == pytest.approx(3 / 4)
    assert s["maj_at_k"] == pytest.approx(1 / 4)
    assert (s["n"], s["k"]) == (4, 4)
    assert s["ci_low"] is None and s["ci_high"] is None  # 4 problems: too few for an interval (issue 53)
    more = metrics.summarize_problems(problems * 3, 4)
    assert 0 <= more["ci_low"] <= more["mean_at_k"] <= more["ci_high"] <= 1
    assert metrics.summarize_problems(problems * 3, 4) == more  # the bootstrap is seeded
    avg = metrics.overall({"a": s, "b": {**s, "mean_at_k": 1.0}})
    assert avg["mean_at_k"] == pytest.approx((s["mean_at_k"] + 1.0) / 2) and avg["n"] == 8


def test_uniforms_depend_only_on_their_own_stream():
    seeds = [mix(0, 11, 0), mix(0, 11, 1), mix(0, 12, 0)]
    import numpy as np

    together = uniforms(np.array(seeds, dtype=np.uint64), 5)
    alone = uniforms(np.array(seeds[1:2], dtype=np.uint64), 5)
    assert together[1] == alone[0] and len(set(together.tolist())) == 3
    assert ((together >= 0) & (together < 1)).all()


class ScriptedBackend:
    """Deterministic answers per (problem, sample): a mix of right, wrong and missing answers."""

    name = "scripted"

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after

    def generate(self, problems: Sequence[Problem], cfg: EvalConfig) -> list[list[Sample]]:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt  # as a killed run
        self.calls += 1
        out = []
        for p in problems:
            samples = []
            for s in range(cfg.k):
                pick = mix(p.problem_id, s) % 3
                text = [f"the answer is \\boxed{{{p.ground_truth}}}", "\\boxed{12345}", "no idea"][pick]
                samples.append(Sample(text=text, tokens=len(text), seconds=0.01))
            out.append(samples)
        return out


def _problems(name: str, n: int) -> list[Problem]:
    return [Problem(name, 1000 + i, [{"role": "user", "content": f"q{i}"}], str(i + 2)) for i in range(n)]


def test_summary_equals_what_the_completions_recompute(tmp_path: Path):
    cfg = EvalConfig(k=3, batch_size=6)
    sets = {"alpha": _problems("alpha", 7), "beta": _problems("beta", 4)}
    evaluate(ScriptedBackend(), sets, cfg, out=str(tmp_path), policy="p")
    table = pq.read_table(tmp_path / "completions.parquet")
    assert table.num_rows == (7 + 4) * 3
    assert set(table.column("reason").to_pylist()) == {"correct", "wrong", "no_answer"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    recomputed = metrics.summarize_table(table, 3)
    assert summary["sets"] == json.loads(json.dumps(recomputed))
    assert 0 < summary["sets"]["alpha"]["mean_at_k"] < summary["sets"]["alpha"]["pass_at_k"] <= 1
    # by hand, from the correct flags alone
    rows = table.to_pylist()
    for name, n in (("alpha", 7), ("beta", 4)):
        flags = [r["correct"] for r in rows if r["set"] == name]
        assert summary["sets"][name]["mean_at_k"] == pytest.approx(sum(flags) / len(flags))
        assert summary["sets"][name]["n"] == n
    assert summary["overall"]["mean_at_k"] == pytest.approx(
        (summary["sets"]["alpha"]["mean_at_k"] + summary["sets"]["beta"]["mean_at_k"]) / 2
    )
    assert "| p |" in (tmp_path / "table.md").read_text()
    assert not (tmp_path / "parts").exists()


def test_a_folder_of_another_evaluation_is_refused(tmp_path: Path):
    evaluate(ScriptedBackend(), {"alpha": _problems("alpha", 2)}, EvalConfig(k=2), out=str(tmp_path))
    with pytest.raises(InputError, match="k differ"):
        evaluate(ScriptedBackend(), {"alpha": _problems("alpha", 2)}, EvalConfig(k=3), out=str(tmp_path))


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir: Path):
    from ads_core.evaluation.hf import TransformersBackend
    from ads_core.models import load_causal_lm

    loaded = load_causal_lm(str(tiny_model_dir), device="cpu", dtype="float32")
    return TransformersBackend(loaded.model, loaded.tokenizer)


def _eval_set() -> dict[str, list[Problem]]:
    from ads_core.evaluation.sets.problems import load_problems, resolve_sets

    return load_problems(resolve_sets(["amc23"]), limit=5)


def test_a_resumed_evaluation_equals_an_uninterrupted_one(tmp_path: Path, tiny_policy):
    cfg = EvalConfig(k=2, batch_size=4, max_tokens=12, temperature=1.0, top_p=0.9)  # 2 problems per chunk
    problems = _eval_set()
    order = {"order": lambda p: len(tiny_policy.prompt_ids(p))}
    whole = evaluate(tiny_policy, problems, cfg, out=str(tmp_path / "whole"), **order)

    class Killed(Exception):
        pass

    calls = {"n": 0}
    real = tiny_policy.generate

    def dies_after_first_chunk(ps, c):
        if calls["n"] == 1:
            raise Killed
        calls["n"] += 1
        return real(ps, c)

    tiny_policy.generate = dies_after_first_chunk
    try:
        with pytest.raises(Killed):
            evaluate(tiny_policy, problems, cfg, out=str(tmp_path / "again"), **order)
    finally:
        del tiny_policy.generate
    parts = sorted((tmp_path / "again" / "parts").iterdir())
    assert len(parts) == 1 and pq.read_table(parts[0]).num_rows == 2 * 2
    resumed = evaluate(tiny_policy, problems, cfg, out=str(tmp_path / "again"), **order)
    assert resumed.generated == 3 and whole.generated == 5
    a = pq.read_table(tmp_path / "whole" / "completions.parquet").drop(["seconds"])
    b = pq.read_table(tmp_path / "again" / "completions.parquet").drop(["seconds"])
    assert a.equals(b)
    assert len(set(a.column("text").to_pylist())) > 5  # samples really differ
    sa, sb = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("whole", "again"))
    assert sa == sb
    # nothing left to generate: the same summary again
    assert evaluate(tiny_policy, problems, cfg, out=str(tmp_path / "again"), **order).generated == 0


def test_evaluate_policy_on_a_loaded_model(tiny_policy):
    from ads_core.evaluation.api import evaluate_policy

    model = tiny_policy.model
    model.train()
    seen = []
    per_set = evaluate_policy(
        model,
        tiny_policy.tokenizer,
        {"amc23": "amc23"},
        EvalConfig(k=1, greedy=True, max_tokens=4),
        limit=3,
        progress=seen.append,
    )
    assert set(per_set) == {"amc23"} and per_set["amc23"]["n"] == 3 and per_set["amc23"]["k"] == 1
    assert set(per_set["amc23"]) >= {"mean_at_k", "pass_at_k", "maj_at_k", "ci_low", "ci_high"}
    assert sum(seen) == 3 and model.training  # the train/eval mode is restored


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch-model"], "'nosuch-model': not a model folder"),
        (
            ["tiny", "--set", "nosuch"],
            "eval set 'nosuch': not a named set (math500, aime24, aime25, amc23, minerva, gpqa_diamond, mmlu_pro, "
            "paper)",
        ),
        (["tiny", "-k", "0"], "-k: Input should be greater than or equal to 1"),
        (["tiny", "--greedy", "-k", "4"], "-k: Value error, greedy decoding gives one sample per problem"),
        (["tiny", "--backend", "vllm"], "backend vllm needs the vllm package and a CUDA GPU"),
    ],
)
def test_cli_bad_input_is_one_error_line(args: list[str], message: str, monkeypatch, tmp_path: Path):
    from ads_cli.main import app

    monkeypatch.setattr("ads_core.evaluation.backends.vllm_usable", lambda: False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_publish_without_a_server_is_refused_before_any_evaluation(monkeypatch, tmp_path: Path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ads_cli.main import app

    monkeypatch.chdir(tmp_path)
    with temporary_settings(updates={PREFECT_API_URL: None}):
        result = CliRunner().invoke(app, ["eval", "tiny", "--set", "amc23", "--publish"])
    assert result.exit_code == 2 and "--publish needs a Prefect server" in result.output, result.output
    assert not (tmp_path / "ads-eval").exists()


def test_cli_evaluates_a_run_folder(tmp_path: Path, tiny_model_dir: Path, monkeypatch):
    import shutil

    from ads_cli.common import BAR_LINE
    from ads_cli.main import app

    run = tmp_path / "ads-runs" / "r1"
    shutil.copytree(tiny_model_dir, run / "checkpoints" / "checkpoint-3")
    (run / "steps.jsonl").write_text("")
    about = {"sampler": "uniform", "trainer": "trl", "model": "org/base", "seed": 42}
    (run / "run.json").write_text(json.dumps({"run_id": "x", "about": about, "trajectory": {}}))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["eval", "r1", "--set", "amc23", "--limit", "2", "-k", "2", "--max-tokens", "4", "--seed", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "mean@2" in result.output and "pass@2" in result.output and "amc23" in result.output
    lines = result.stdout.splitlines()  # stdout not a terminal: lines, the first saying what will run (issue 53)
    assert re.fullmatch(
        r"evaluating r1@3 \(.*checkpoint-3\) with transformers: sets amc23, at most 2 problems per set, k=2, "
        r"max_tokens=4, template ads_think \(.*\) -> ads-eval/r1@3",
        lines[0],
    ), lines[0]
    assert "eval r1@3: 2/2 problems, eta 0:00" in lines
    assert not BAR_LINE.search(result.output)  # stderr is not a terminal either: no bar drawn into it
    out = tmp_path / "ads-eval" / "r1@3"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sets"]["amc23"]["n"] == 2 and summary["config"]["seed"] == 3
    trained = summary["model"]["trained"]  # what trained the evaluated policy (issue 45)
    assert (trained["sampler"], trained["trainer"], trained["base_model"], trained["seed"], trained["step"]) == (
        "uniform",
        "trl",
        "org/base",
        42,
        3,
    )
    table = pq.read_table(out / "completions.parquet")
    assert table.num_rows == 4 and pa.types.is_boolean(table.schema.field("correct").type)


def test_auto_backend_and_the_vllm_backend_with_a_stand_in_engine(monkeypatch):
    """vLLM is GPU-only: its backend is driven here through a stand-in engine with vLLM's call shapes."""
    import sys
    import types

    from ads_core.evaluation import backends
    from ads_core.evaluation.vllm_backend import VLLMBackend

    assert backends.choose("auto", usable=lambda: False) == "transformers"
    assert backends.choose("auto", usable=lambda: True) == "vllm"
    with pytest.raises(ValueError, match="needs the vllm package"):
        backends.choose("vllm", usable=lambda: False)

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class Tokenizer:
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text.split())))}

    class Engine:
        llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=10))

        def get_tokenizer(self):
            return Tokenizer()

        def generate(self, prompts, params, use_tqdm=False):
            self.seen = list(zip(prompts, params, strict=True))
            return [
                types.SimpleNamespace(
                    outputs=[types.SimpleNamespace(index=i, text=f"s{i}", token_ids=[1] * (i + 1)) for i in (1, 0)]
                )
                for _ in prompts
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    engine = Engine()
    problems = _problems("alpha", 2)
    out = VLLMBackend(engine).generate(problems, EvalConfig(k=2, max_tokens=100))
    assert [[s.text for s in ps] for ps in out] == [["s0", "s1"], ["s0", "s1"]]  # in sample order
    (p0, a), (p1, b) = engine.seen
    assert p0 == {"prompt_token_ids": [0]} and a.n == 2 and a.max_tokens == 9  # cut to the context
    assert a.seed != b.seed and (a.temperature, a.top_p) == (0.6, 0.95)


def test_a_larger_limit_reuses_the_folder_and_a_smaller_one_is_refused(tmp_path: Path):
    backend = ScriptedBackend()
    evaluate(backend, {"alpha": _problems("alpha", 3)}, EvalConfig(k=2), out=str(tmp_path))
    more = evaluate(backend, {"alpha": _problems("alpha", 5)}, EvalConfig(k=2), out=str(tmp_path))
    assert more.generated == 2 and pq.read_table(tmp_path / "completions.parquet").num_rows == 10
    with pytest.raises(InputError, match="holds completions of 2 problems this evaluation does not include"):
        evaluate(backend, {"alpha": _problems("alpha", 3)}, EvalConfig(k=2), out=str(tmp_path))


def test_a_prompt_encoded_once_for_its_k_rows_gives_the_same_samples(tiny_policy, monkeypatch):
    from ads_core.evaluation import hf

    problems = _eval_set()["amc23"][:3]
    cfg = EvalConfig(k=3, max_tokens=6, temperature=1.0)
    shared = tiny_policy.generate(problems, cfg)
    monkeypatch.setattr(hf, "prefill", lambda *a: None)  # every row prefilled by generate itself
    alone = tiny_policy.generate(problems, cfg)
    assert [[s.text for s in ps] for ps in shared] == [[s.text for s in ps] for ps in alone]
    assert len({s.text for ps in shared for s in ps}) > 3


def test_seeded_sampler_draws_from_the_tempered_nucleus(monkeypatch):
    import numpy as np
    import torch

    from ads_core.evaluation import hf

    logits = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.06, 0.04], dtype=torch.float64))
    rows = 20_000
    seeds = np.array([mix(7, r) for r in range(rows)], dtype=np.uint64)
    scores = logits.float().repeat(rows, 1)
    ids = torch.zeros((rows, 3), dtype=torch.long)

    def draw(temperature: float, top_p: float) -> np.ndarray:
        out = hf.SeededSampler(seeds, 2, temperature, top_p)(ids, scores)
        assert torch.isinf(out).sum(dim=-1).eq(4).all()  # one token left per row
        return np.bincount(out.argmax(dim=-1).numpy(), minlength=5) / rows

    # top_p 0.8: the nucleus is {0.5, 0.25, 0.15} (0.5 + 0.25 < 0.8), renormalised
    assert np.allclose(draw(1.0, 0.8), [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0], atol=0.015)
    tempered = np.array([0.5, 0.25, 0.15, 0.06, 0.04]) ** 2
    assert np.allclose(draw(0.5, 1.0), tempered / tempered.sum(), atol=0.015)
    # a candidate list too short for the nucleus falls back to the full sort: the same tokens
    full = hf.SeededSampler(seeds, 2, 1.0, 0.8)(ids, scores).argmax(dim=-1)
    monkeypatch.setattr(hf, "NUCLEUS_CANDIDATES", 2)
    assert torch.equal(hf.SeededSampler(seeds, 2, 1.0, 0.8)(ids, scores).argmax(dim=-1), full)
    monkeypatch.setattr(hf, "NUCLEUS_CANDIDATES", 3)
    assert torch.equal(hf.SeededSampler(seeds, 2, 1.0, 0.8)(ids, scores).argmax(dim=-1), full)


def test_cli_refuses_a_set_row_without_ground_truth(tmp_path: Path, tiny_model_dir: Path, monkeypatch):
    from ads_cli.main import app

    bad = tmp_path / "mine.parquet"
    prompt = [{"role": "user", "content": "1+1?"}]
    pq.write_table(
        pa.table(
            {
                "prompt": [prompt, prompt],
                "reward_model": [{"style": "rule", "ground_truth": "2"}, {"style": "rule", "ground_truth": " "}],
                "sample_id": [1, 2],
            }
        ),
        bad,
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(tiny_model_dir), "--set", str(bad), "-k", "1"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: row 1 has no ground truth"), result.output


def test_grouped_query_decoding_gives_the_samples_of_transformers_sdpa(tiny_policy, monkeypatch):
    from contextlib import nullcontext

    from ads_core.evaluation import hf

    assert tiny_policy.model.config.num_attention_heads > tiny_policy.model.config.num_key_value_heads
    problems = _eval_set()["amc23"][:3]
    cfg = EvalConfig(k=2, max_tokens=8, temperature=1.0)
    ours = tiny_policy.generate(problems, cfg)
    assert tiny_policy.model.config._attn_implementation == "sdpa"  # restored
    monkeypatch.setattr(hf, "decode_attention", lambda model: nullcontext())
    theirs = tiny_policy.generate(problems, cfg)
    assert [[s.text for s in ps] for ps in ours] == [[s.text for s in ps] for ps in theirs]
