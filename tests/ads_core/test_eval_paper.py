"""Evaluation as the paper runs it: the prompt template stated and a run's own used, raw and formatted files giving
the same prompts, the paper's seven sets (`--set paper`, its table layout), multiple choice in published layouts
graded by the chosen letter, and the output folder checked (and locked) before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_core.common.errors import InputError
from ads_core.evaluation import outfolder
from ads_core.evaluation.report import markdown_table
from ads_core.evaluation.sets import catalog as ev
from ads_core.evaluation.sets.choice import choice_row, load_choice_problems
from ads_core.evaluation.sets.problems import expand, load_problems, resolve_sets
from ads_core.evaluation.sets.templates import choose_template, record_run_template, resolve_template
from ads_core.evaluation.sets.writer import write_eval_sets
from ads_core.grading import grade
from ads_core.grading.choice import parse_truth, truth_text
from ads_core.ingest.schema import TEMPLATES

PAPER_DATA = Path(__file__).parent / "data" / "eval_paper"  # GPQA's CSV and MMLU-Pro's columns, three rows each
GPQA = PAPER_DATA / "gpqa_diamond" / "gpqa_diamond.csv"
MMLU_PRO = PAPER_DATA / "mmlu_pro" / "test.jsonl"


@pytest.mark.parametrize(
    ("completion", "correct", "extracted", "reason"),
    [
        ("so \\boxed{C}", True, "C", "correct"),
        ("the answer is (C).", True, "C", "correct"),
        ("Answer: C", True, "C", "correct"),
        ("\\boxed{\\text{C}}", True, "C", "correct"),
        ("\\boxed{Rome}", True, "C", "correct"),  # the option's text
        ("The answer is rome.", True, "C", "correct"),
        ("\\boxed{(B)}", False, "B", "wrong"),
        ("\\boxed{\\text{(C) Rome}}", True, "C", "correct"),
        ("\\boxed{E}", False, None, "no_answer"),  # not one of the four options
        ("I think it's Paris, no, the answer is (D)", False, "D", "wrong"),  # the last statement counts
        ("no idea", False, None, "no_answer"),
    ],
)
def test_a_choice_is_graded_by_its_letter(completion: str, correct: bool, extracted: str | None, reason: str):
    truth = truth_text("C", ["Paris", "London", "Rome", "Berlin"])
    got = grade(completion, truth)
    assert (got.correct, got.extracted, got.reason) == (correct, extracted, reason)


def test_a_math_ground_truth_is_not_taken_for_a_choice():
    assert parse_truth("C") is None and parse_truth("{1, 2}") is None
    assert parse_truth('{"choice": "E", "options": ["a", "b"]}') is None  # a letter beyond the options
    assert grade("\\boxed{3}", "3").correct


def test_published_layouts_give_lettered_prompts():
    gpqa = load_choice_problems("gpqa_diamond", str(GPQA), "{question}")
    truths = [parse_truth(p.ground_truth) for p in gpqa]
    # GPQA lists the right answer first: the options are put in an order drawn from the question (every run alike)
    assert [(t.letter, t.options[ord(t.letter) - 65]) for t in truths] == [
        ("C", "Coulomb"),
        ("A", "Carbon"),
        ("B", "46"),
    ]
    assert gpqa[0].messages[0]["content"] == (
        "What is the SI unit of electric charge?\n\n(A) Ohm\n(B) Volt\n(C) Coulomb\n(D) Ampere\n\n"
        "Answer with the letter of the correct option."
    )
    mmlu = load_choice_problems("mmlu_pro", str(MMLU_PRO), TEMPLATES["boxed"])
    assert [parse_truth(p.ground_truth).letter for p in mmlu] == ["C", "D", "B"]
    assert "(J) 57" in mmlu[0].messages[0]["content"] and mmlu[0].messages[0]["content"].endswith("\\boxed{}.")
    # MMLU (an index), ARC (labels), an answer given as the option's text, and a row that can't be used
    assert choice_row({"question": "q", "choices": ["a", "b"], "answer": 1}) == ("q", ["a", "b"], "B")
    arc = {"question": "q", "choices": {"text": ["x", "y", "z"], "label": ["1", "2", "3"]}, "answerKey": "3"}
    assert choice_row(arc) == ("q", ["x", "y", "z"], "C")
    assert choice_row({"question": "q", "options": ["a", "b"], "answer": "b"}) == ("q", ["a", "b"], "B")
    assert choice_row({"question": "q", "options": ["a", "b"], "answer": "Z"}) == (
        "answer 'Z' is not a letter, index or text of an option"
    )


def test_paper_takes_the_sets_there_are_and_says_how_to_add_the_rest(monkeypatch):
    monkeypatch.delenv("ADS_EVAL_DATA_DIR", raising=False)
    specs, missing = expand(["paper"], str(PAPER_DATA))
    assert specs == ["math500", "aime25", "aime24", "amc23", "gpqa_diamond", "mmlu_pro"]
    assert missing == [
        "minerva: Minerva Math (272 problems, CC BY-NC-SA): test.jsonl from Qwen2.5-Math's evaluation/data/"
        "minerva_math; put it at DATA/minerva/test.jsonl with --data-dir DATA (or $ADS_EVAL_DATA_DIR), or pass "
        "--set minerva=PATH"
    ]
    specs, missing = expand(["paper", f"minerva={MMLU_PRO}"], str(PAPER_DATA))
    assert missing == [] and specs[-1] == f"minerva={MMLU_PRO}"
    sets = resolve_sets(["aime25", f"mc={GPQA}"], str(PAPER_DATA))
    assert sets == {"aime25": str(ev.packaged_data_dir() / "aime25" / "test.jsonl"), "mc": str(GPQA)}
    problems = load_problems(sets, TEMPLATES["plain"], 2)
    assert [p.ground_truth for p in problems["aime25"]] == ["70", "588"]  # AIME 2025 I, problems 1 and 2
    assert len(problems["mc"]) == 2 and parse_truth(problems["mc"][0].ground_truth) is not None


def test_table_md_is_laid_out_like_the_papers():
    def summary(sets: dict[str, float]) -> dict:
        per = {
            n: {"mean_at_k": v, "pass_at_k": v, "maj_at_k": v, "n": 4, "ci_low": 0.0, "ci_high": 1.0}
            for n, v in sets.items()
        }
        mean = sum(sets.values()) / len(sets)
        return {
            "k": 16,
            "sets": per,
            "overall": {"mean_at_k": mean, "pass_at_k": mean, "maj_at_k": mean},
            "template": {"name": "plain", "source": "run"},
        }

    text = markdown_table({"base": summary({"gpqa_diamond": 0.25, "math500": 0.5}), "ads": summary({"math500": 0.75})})
    lines = text.splitlines()
    assert lines[0] == "### mean@16 (%)"
    assert (
        lines[2] == "| policy | MATH-500 | AIME 25 | AIME 24 | Minerva | AMC 23 | GPQA-Diamond | MMLU-Pro | Average |"
    )
    assert lines[4] == "| base | 50.00 | – | – | – | – | 25.00 | – | 37.50 |"
    assert lines[5] == "| ads | 75.00 | – | – | – | – | – | – | 75.00 |"
    assert lines[-1] == "Prompt template: base plain (run); ads plain (run)"


def _raw_set(tmp_path: Path) -> Path:
    raw = tmp_path / "toy.jsonl"
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 4)]
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw


def test_raw_and_formatted_files_give_the_same_prompts(tmp_path: Path):
    raw = _raw_set(tmp_path)
    formatted = write_eval_sets(str(tmp_path / "out"), sources={"toy": str(raw)}, names=[], template=TEMPLATES["plain"])
    parquet = formatted["toy"].uri
    boxed = TEMPLATES["boxed"]
    from_raw, from_parquet = (
        load_problems({"toy": str(raw)}, boxed)["toy"],
        load_problems({"toy": parquet}, boxed)["toy"],
    )
    assert from_raw == from_parquet
    assert from_raw[0].messages == [{"role": "user", "content": boxed.replace("{question}", "What is 1 + 1?")}]
    # no template (validation during training): a formatted file keeps the prompts it was written with
    assert load_problems({"toy": parquet})["toy"][0].messages[0]["content"] == "What is 1 + 1?"


def test_templates_by_name_file_or_text_and_the_runs_own(tmp_path: Path):
    assert resolve_template("boxed").name == "boxed"
    path = tmp_path / "mine.txt"
    path.write_text("Q: {question}\nA:")
    assert (resolve_template(str(path)).name, resolve_template(str(path)).text) == (str(path), "Q: {question}\nA:")
    assert resolve_template("Solve {question}").name == "custom"
    with pytest.raises(InputError, match="template 'chatty': neither a named template"):
        resolve_template("chatty")
    # a run records the template its artifact was formatted with, read back from the artifact's rows
    artifact = tmp_path / "train.parquet"
    prompt = [{"role": "user", "content": "Solve: What is 1 + 1?\nEnd."}]
    pq.write_table(pa.Table.from_pylist([{"prompt": prompt, "extra_info": {"question": "What is 1 + 1?"}}]), artifact)
    run = tmp_path / "run"
    run.mkdir()
    record_run_template(str(run), str(artifact))
    assert json.loads((run / "template.json").read_text())["template"] == "Solve: {question}\nEnd."
    chosen, warning = choose_template(None, str(run))
    assert (chosen.name, chosen.source, chosen.text, warning) == ("custom", "run", "Solve: {question}\nEnd.", None)
    chosen, warning = choose_template("boxed", str(run))
    assert chosen.describe() == "boxed (--template)"
    assert warning == (
        f"warning: {run} was trained with the template custom; evaluating with boxed (--template): its numbers are "
        "not the run's own"
    )
    assert choose_template(None, None)[0].describe() == "ads_think (default)"


def test_the_output_folder_is_checked_and_held(tmp_path: Path):
    out = tmp_path / "ev"
    (out / "parts").mkdir(parents=True)
    (out / "completions.parquet").write_bytes(b"PAR1 torn")
    with pytest.raises(InputError, match=rf"^{out}/completions.parquet: not a readable Parquet file"):
        outfolder.check(str(out))
    (out / "completions.parquet").unlink()
    pq.write_table(pa.table({"set": ["a"]}), out / "parts" / "part-00000.parquet")
    with pytest.raises(InputError, match=r"part-00000.parquet: not a completions file \(no column problem_id, sample"):
        outfolder.check(str(out))
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=rf"^--out {tmp_path}/file/sub: {tmp_path}/file is a file, not a folder$"):
        outfolder.check(str(tmp_path / "file" / "sub"))
    with outfolder.holding(str(out)):
        with pytest.raises(InputError, match=rf"^--out {out} is in use by another evaluation \("):
            with outfolder.holding(str(out)):
                pass
    with outfolder.holding(str(out)):  # released at the end of the block
        pass


def test_ads_eval_of_a_run_uses_its_template_and_raw_equals_formatted(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch
):
    import shutil

    from ads_cli.main import app

    monkeypatch.setattr("ads_core.evaluation.backends.vllm_usable", lambda: False)
    run = tmp_path / "ads-runs" / "r1"
    shutil.copytree(tiny_model_dir, run / "final")
    (run / "steps.jsonl").write_text("")
    (run / "template.json").write_text(json.dumps({"template": TEMPLATES["plain"]}))
    raw = _raw_set(tmp_path)
    parquet = write_eval_sets(str(tmp_path / "o"), sources={"toy": str(raw)}, names=[], template=TEMPLATES["boxed"])
    monkeypatch.chdir(tmp_path)
    common = ["-k", "2", "--max-tokens", "3"]
    runner = CliRunner()
    first = runner.invoke(app, ["eval", "r1", "--set", f"toy={raw}", "--out", "a", *common])
    second = runner.invoke(app, ["eval", "r1", "--set", f"toy={parquet['toy'].uri}", "--out", "b", *common])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert "template plain (run)" in first.output and "Prompt template: r1 plain (run)" in first.output
    a, b = (json.loads((tmp_path / x / "summary.json").read_text()) for x in ("a", "b"))
    assert a["template"] == {"name": "plain", "source": "run", "text": "{question}"}
    assert a["sets"] == b["sets"]
    texts = [pq.read_table(tmp_path / x / "completions.parquet").column("text").to_pylist() for x in ("a", "b")]
    assert texts[0] == texts[1]
    assert "Prompt template: r1 plain (run)" in (tmp_path / "a" / "table.md").read_text()
    other = runner.invoke(app, ["eval", "r1", "--set", f"toy={raw}", "--out", "c", "--template", "boxed", *common])
    assert other.exit_code == 0, other.output
    warnings = [line for line in other.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "trained with the template plain; evaluating with boxed" in warnings[0]


def test_ads_eval_paper_prints_the_seven_columns(tmp_path: Path, tiny_model_dir: Path, monkeypatch):
    from ads_cli.main import app

    monkeypatch.setattr("ads_core.evaluation.backends.vllm_usable", lambda: False)
    monkeypatch.delenv("ADS_EVAL_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    args = ["eval", str(tiny_model_dir), "--set", "paper", "--data-dir", str(PAPER_DATA), "--limit", "1", "-k", "1"]
    result = CliRunner().invoke(app, [*args, "--max-tokens", "2", "--out", "p"])
    assert result.exit_code == 0, result.output
    assert "missing from the paper's table: minerva: Minerva Math" in result.output
    header = "| policy | MATH-500 | AIME 25 | AIME 24 | Minerva | AMC 23 | GPQA-Diamond | MMLU-Pro | Average |"
    assert header in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| tiny-qwen2"))
    assert row.split(" | ")[4] == "–"  # Minerva: not evaluated
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert sorted(summary["sets"]) == sorted(["math500", "aime25", "aime24", "amc23", "gpqa_diamond", "mmlu_pro"])
    assert summary["overall"]["sets"] == 6 and summary["template"]["source"] == "default"
    completions = pq.read_table(tmp_path / "p" / "completions.parquet").to_pylist()
    assert {r["ground_truth"][:10] for r in completions if r["set"] == "gpqa_diamond"} == {'{"choice":'}
