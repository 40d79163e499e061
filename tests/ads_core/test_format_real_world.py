"""The layouts and distribution formats real math sets come in (issue 11 "Why"), and inputs that used to
crash or lose rows (issue 13, item 4). Rows are shaped like the published sets; the files are written here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_core.common.errors import InputError
from ads_core.config.build import FormatConfig
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.readers import loads_limited
from ads_core.ingest.sources import dataset_name

Q = ["What is the sum of 17 and 25?", "Compute $3^4$.", "How many primes are below 20?", "Simplify 14/21."]
A = ["42", "81", "8", "\\frac{2}{3}"]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(source: Path | str, out: Path, **cfg: Any) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    manifest = format_dataset(str(source), str(out), FormatConfig(**cfg)).to_dict()
    train = pl.read_parquet(out / "formatted" / "train.parquet")
    info = train.select(
        pl.col("extra_info").struct.unnest(), pl.col("reward_model").struct["ground_truth"].alias("gt"), "data_source"
    )
    return manifest, info, pl.read_parquet(out / "formatted" / "rejects.parquet")


# ---------------------------------------------------------------------------------------------
# list-valued fields (OlympiadBench-like: final_answer ["$2$"], solution a list of strings)


def test_list_valued_solution_and_answer(tmp_path):
    rows = [
        {"question": q, "solution": [f"Step one for {a}.", f"So the answer is ${a}$."], "final_answer": [f"${a}$"]}
        for q, a in zip(Q, A, strict=True)
    ]
    rows.append(
        {"question": "Find all real x with x^2 = 4.", "solution": ["x = 2 or x = -2"], "final_answer": ["$2$", "$-2$"]}
    )
    manifest, info, rejects = run(write_jsonl(tmp_path / "olympiad.jsonl", rows), tmp_path / "out")
    assert rejects.height == 0 and manifest["counts"]["rows_out"] == 5
    assert info["gt"].to_list()[:4] == A  # one-element list -> its element, $…$ removed
    assert json.loads(info["gt"][4]) == ["2", "-2"]  # several answers: the reward's JSON-list encoding
    assert info["solution"][0] == "Step one for 42.\n\nSo the answer is $42$."


def test_multi_answer_ground_truth_is_accepted_by_the_reward(tmp_path):
    from ads_core.train import reward

    rows = [{"problem": "Roots of x^2-1?", "answer": ["1", "-1"]}, {"problem": "Two plus two?", "answer": "4"}]
    _, info, _ = run(write_jsonl(tmp_path / "r.jsonl", rows), tmp_path / "out")
    gt = info["gt"][0]
    assert reward.is_correct("-1", gt) and reward.is_correct("1", gt) and not reward.is_correct("3", gt)


# ---------------------------------------------------------------------------------------------
# questions under less common names


@pytest.mark.parametrize("name", ["content", "problem_text", "input", "query", "text", "Problem", "QUESTION"])
def test_question_under_a_less_common_name(tmp_path, name):
    rows = [{name: q, "answer": a, "source": "amc"} for q, a in zip(Q, A, strict=True)]
    manifest, info, _ = run(write_jsonl(tmp_path / "q.jsonl", rows), tmp_path / "out")
    assert info["question"].to_list() == Q and info["gt"].to_list() == A
    [evidence] = manifest["extra"]["evidence"].values()
    assert evidence["question"]["chosen"] == name


# ---------------------------------------------------------------------------------------------
# multiple choice: answer letter under other names, options with their letters inside


@pytest.mark.parametrize("answer_name", ["correct", "label", "gold", "answerKey"])
def test_multiple_choice_with_lettered_option_strings(tmp_path, answer_name):
    rows = [
        {
            "question": "Evaluate 5(√3+1) at the given point.",
            "options": ["A)5(√3 + 1)", "B)6", "C)7", "D)8"],
            answer_name: "A",
            "rationale": "Direct.",
        },
        {"question": "What is 3*4?", "options": ["(A) 10", "(B) 12", "(C) 14"], answer_name: "B"},
        {"question": "What is 2+2?", "options": "A. 3\nB. 4\nC. 5", answer_name: "(b)"},
    ]
    manifest, info, rejects = run(write_jsonl(tmp_path / "aqua.jsonl", rows), tmp_path / "out")
    assert rejects.height == 0, rejects.to_dicts()
    assert info["gt"].to_list() == ["A", "B", "B"]
    assert info["question"][0] == "Evaluate 5(√3+1) at the given point.\n\nA. 5(√3 + 1)\nB. 6\nC. 7\nD. 8"
    assert info["question"][1].endswith("A. 10\nB. 12\nC. 14")
    assert manifest["extra"]["detected"][str(tmp_path / "aqua.jsonl")]["answer"] == answer_name


def test_multiple_choice_in_columns_a_to_d(tmp_path):
    rows = [
        {"question": "Which is prime?", "A": "4", "B": "6", "C": "7", "D": "9", "answer": "C"},
        {"question": "Which is even?", "A": "3", "B": "8", "C": "5", "D": "1", "answer": "B"},
    ]
    _, info, _ = run(write_jsonl(tmp_path / "mmlu.jsonl", rows), tmp_path / "out")
    assert info.select("question", "gt").row(0) == ("Which is prime?\n\nA. 4\nB. 6\nC. 7\nD. 9", "C")


# ---------------------------------------------------------------------------------------------
# distribution formats


def test_directory_of_one_object_json_files_in_subject_folders(tmp_path):
    root = tmp_path / "MATH" / "train"
    for i, (q, a) in enumerate(zip(Q, A, strict=True)):
        subject = ["algebra", "geometry"][i % 2]
        (root / subject).mkdir(parents=True, exist_ok=True)
        (root / subject / f"{i}.json").write_text(
            json.dumps(
                {"problem": q, "level": "Level 2", "type": subject.title(), "solution": f"Work. $\\boxed{{{a}}}$"}
            )
        )
    manifest, info, _ = run(root, tmp_path / "out")
    assert manifest["counts"]["rows_out"] == 4
    assert sorted(info["gt"].to_list()) == sorted(A)
    assert {json.loads(m)["folder"] for m in info["source_meta"]} == {"algebra", "geometry"}
    assert info["data_source"].unique().to_list() == ["MATH"]  # `train` is generic: the folder above names it


def _arrow_stream(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def test_save_to_disk_folder_and_a_bare_arrow_file(tmp_path):
    folder = tmp_path / "my_math" / "train"
    folder.mkdir(parents=True)
    _arrow_stream(folder / "data-00000-of-00001.arrow", pa.table({"problem": Q, "answer": A}))
    _arrow_stream(folder / "cache-1234.arrow", pa.table({"problem": ["stale cache row?"], "answer": ["0"]}))
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))
    manifest, info, _ = run(folder, tmp_path / "out")
    assert info["gt"].to_list() == A and manifest["counts"]["rows_in"] == 4
    assert info["data_source"][0] == "my_math"
    _, bare, _ = run(folder / "data-00000-of-00001.arrow", tmp_path / "bare")
    assert bare["question"].to_list() == Q


def test_hub_cache_snapshot_reads_one_split(tmp_path):
    repo = tmp_path / "hub" / "datasets--someorg--tiny_math"
    commit = "a" * 40
    data = repo / "snapshots" / commit / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"question": Q[:3], "answer": A[:3]}), data / "train-00000-of-00001.parquet")
    pq.write_table(pa.table({"question": Q[3:], "answer": A[3:]}), data / "test-00000-of-00001.parquet")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    _, info, _ = run(repo, tmp_path / "out")
    assert info["gt"].to_list() == A[:3] and info["data_source"][0] == "tiny_math"
    _, test, _ = run(repo, tmp_path / "out_test", split="test")
    assert test["gt"].to_list() == A[3:]
    with pytest.raises(InputError, match="no files for split 'dev'.*set split"):
        run(repo, tmp_path / "o3", split="dev")


def test_gzipped_jsonl_and_parquet_in_a_tree(tmp_path):
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "a" / "part.jsonl.gz").write_bytes(
        gzip.compress(
            "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in zip(Q[:2], A[:2], strict=True)).encode()
        )
    )
    (root / "b" / "c").mkdir(parents=True)
    pq.write_table(pa.table({"question": Q[2:], "answer": A[2:]}), root / "b" / "c" / "rest.parquet")
    _, info, _ = run(root, tmp_path / "out")
    assert info["gt"].to_list() == A


def test_corrupt_gzip_is_one_input_error(tmp_path):
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(b'{"question": "q?", "answer": "1"}\n' * 50)[:40])
    with pytest.raises(InputError, match="bad.jsonl.gz"):
        run(tmp_path / "bad.jsonl.gz", tmp_path / "out")


# ---------------------------------------------------------------------------------------------
# a run that keeps (almost) nothing, and all missing columns at once


def test_a_run_that_keeps_nothing_fails_after_writing_the_rejects(tmp_path):
    rows = [{"question": q, "answer": None} for q in Q] + [{"question": None, "answer": "1"}]
    src = write_jsonl(tmp_path / "empty_answers.jsonl", rows)
    with pytest.raises(InputError) as err:
        format_dataset(str(src), str(tmp_path / "out"), FormatConfig())
    message = str(err.value)
    assert "0 of 5 rows kept" in message and "missing_answer x4" in message and "missing_question x1" in message
    assert "row 0" in message and "\n" not in message and "min_kept" in err.value.options
    assert pl.read_parquet(tmp_path / "out" / "formatted" / "rejects.parquet").height == 5
    assert json.loads((tmp_path / "out" / "formatted" / "manifest.json").read_text())["counts"]["rows_rejected"] == 5
    assert format_dataset(str(src), str(tmp_path / "o2"), FormatConfig(min_kept=0)).counts["rows_out"] == 0


def test_all_missing_columns_are_reported_at_once(tmp_path):
    src = write_jsonl(tmp_path / "odd.jsonl", [{"foo": "What is 1+1?", "bar": "2"}] * 2)
    with pytest.raises(InputError) as err:
        run(src, tmp_path / "out")
    assert "no question and no answer or solution column" in str(err.value)
    spelled = err.value.render(lambda f: "--" + f.replace("_", "-"))
    assert "set --question-col and --answer-col (or --solution-col)" in spelled


def test_ambiguous_columns_name_the_candidates_and_the_option(tmp_path):
    src = write_jsonl(tmp_path / "two.jsonl", [{"question": "What is 1+1?", "answer": "two", "final_answer": "2"}])
    with pytest.raises(InputError) as err:
        run(src, tmp_path / "out")
    assert "answer, final_answer" in str(err.value) and "set answer_col" in str(err.value)
    assert err.value.render(lambda f: f"format.{f}=") != str(err.value)


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("/d/math500/test.jsonl", "math500"),
        ("/d/gsm8k/train.jsonl", "gsm8k"),
        ("/d/aime24/validation.parquet", "aime24"),
        ("/d/set/data/part-00000.parquet", "set"),
        ("/d/set/default/train/0000.parquet", "set"),
        ("openai/gsm8k", "gsm8k"),
        ("/d/rows.jsonl", "rows"),
        ("train.jsonl", "train"),
    ],
)
def test_dataset_name_skips_generic_parts(source, name):
    assert dataset_name(source) == name


# ---------------------------------------------------------------------------------------------
# issue 13, item 4


def test_parquet_with_invalid_utf8_is_a_reject_not_a_crash(tmp_path):
    raw = pa.array([q.encode() for q in Q[:3]] + [b"caf\xe9 costs 3?"], pa.binary())
    question = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # bytes Arrow does not validate
    pq.write_table(pa.table({"question": question, "answer": A}), tmp_path / "bad.parquet")
    manifest, info, rejects = run(tmp_path / "bad.parquet", tmp_path / "out")
    assert info["gt"].to_list() == A[:3]
    assert rejects.select("source_row", "reason").rows() == [(3, "bad_encoding")]
    assert "question" in rejects["message"][0]


def test_deeply_nested_options_json_is_a_reject(tmp_path):
    rows = [
        {"question": "Pick one?", "options": ["1", "2"], "answer": "A"},
        {"question": "Pick two?", "options": ["1", "2"], "answer": "B"},
        {"question": "Deep?", "options": "[" * 5000 + "]" * 5000, "answer": "A"},
    ]
    _, info, rejects = run(write_jsonl(tmp_path / "deep.jsonl", rows), tmp_path / "out")
    assert info.height == 2 and rejects.select("source_row", "reason").rows() == [(2, "bad_json")]
    with pytest.raises(ValueError, match="nested"):
        loads_limited("[" * 100 + "]" * 100)


@pytest.mark.parametrize("newline", [b"\r", b"\n", b"\r\n", "mixed"])
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("kind", ["jsonl", "csv", "json"])
def test_line_endings_and_bom_in_every_text_format(tmp_path, newline, bom, kind):
    rows = [{"question": f"Line {i}: what is {i}+{i}?", "answer": str(2 * i)} for i in range(40)]
    ends = [b"\r", b"\n", b"\r\n"]
    if kind == "jsonl":
        lines = [json.dumps(r).encode() for r in rows]
    elif kind == "csv":
        lines = [b"question,answer"] + [f'"{r["question"]}",{r["answer"]}'.encode() for r in rows]
    else:
        lines = [b"["] + [json.dumps(r).encode() + (b"," if i < 39 else b"") for i, r in enumerate(rows)] + [b"]"]
    body = b"".join(line + (ends[i % 3] if newline == "mixed" else newline) for i, line in enumerate(lines))
    (tmp_path / f"rows.{kind}").write_bytes(bom + body)
    manifest, info, _ = run(tmp_path / f"rows.{kind}", tmp_path / "out")
    assert manifest["counts"]["rows_in"] == manifest["counts"]["rows_out"] == 40
    assert info["gt"].to_list() == [r["answer"] for r in rows]


def test_gsm8k_layout_without_any_marker_does_not_keep_solutions_as_answers(tmp_path):
    solution = (
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
        "altogether in April and May.\nSo she sold {} clips in total over the two months."
    )
    rows = [
        {"question": f"Natalia sold clips to {i} friends. How many?", "answer": solution.format(i)} for i in range(9)
    ]
    with pytest.raises(InputError, match="worked solutions.*'####'.*set answer_col"):
        run(write_jsonl(tmp_path / "gsm_nomarker.jsonl", rows), tmp_path / "out")


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_duplicate_column_names_are_refused(tmp_path, kind):
    path = tmp_path / f"dup.{kind}"
    if kind == "csv":
        path.write_text("question,answer,question\nWhat is 1+1?,2,What is 2+2?\n")
    else:
        table = pa.Table.from_arrays(
            [pa.array(["What is 1+1?"]), pa.array(["2"]), pa.array(["x"])], names=["question", "answer", "question"]
        )
        pq.write_table(table, path)
    with pytest.raises(InputError, match="duplicate column names.*'question'"):
        run(path, tmp_path / "out")
