"""Format stage: real data sets end to end, every layout from small synthetic files, schema, ids, duplicates."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import polars.testing as plt
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_core import storage
from ads_core.config.build import FormatConfig
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.records import combine
from ads_core.ingest.sources import source_digest

# The ADS reference's prompt (ads_spec.md, prepare step): instruction line, blank line, question, blank line, <think>.
REFERENCE_PROMPT = "Please reason step by step, and put your final answer within \\boxed{{}}.\n\n{}\n\n<think>"
REAL_FILES = ["gsm8k/train.jsonl", "gsm8k/test.jsonl", "math500/test.jsonl", "aime24/test.jsonl", "amc23/test.jsonl"]
CORE_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "sample_id"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_format(source: Path | str, out: Path, **cfg: Any) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    """Format SOURCE into OUT; return the manifest (as a dict), the train rows and the rejects."""
    manifest = format_dataset(str(source), str(out), FormatConfig(**cfg))
    train = pl.read_parquet(out / "formatted" / "train.parquet")
    rejects = pl.read_parquet(out / "formatted" / "rejects.parquet")
    return manifest.to_dict(), train, rejects


def extra(train: pl.DataFrame) -> pl.DataFrame:
    """extra_info as columns, plus the ground truth (gt) and the top-level sample_id (top_sample_id)."""
    gt = pl.col("reward_model").struct["ground_truth"].alias("gt")
    return train.select(pl.col("extra_info").struct.unnest(), gt, pl.col("sample_id").alias("top_sample_id"))


def only_layout(manifest: dict[str, Any]) -> dict[str, Any]:
    [layout] = manifest["extra"]["detected"].values()
    return layout


# ---------------------------------------------------------------------------------------------
# real data sets


@pytest.fixture(scope="module")
def formatted_real(shared_data, tmp_path_factory) -> dict[str, tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]]:
    out_root = tmp_path_factory.mktemp("real")
    return {name: run_format(shared_data / name, out_root / name.replace("/", "_")) for name in REAL_FILES}


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_file_accounts_for_every_row(name, shared_data, formatted_real):
    manifest, train, rejects = formatted_real[name]
    counts = manifest["counts"]
    lines = len(read_jsonl(shared_data / name))
    assert counts["rows_in"] == lines
    assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"]
    assert counts["rows_out"] >= 0.95 * counts["rows_in"]
    assert train.height == counts["rows_out"] == manifest["outputs"]["train"]["rows"]
    assert rejects.height == counts["rows_rejected"]
    assert sorted(train["extra_info"].struct["source_row"].to_list() + rejects["source_row"].to_list()) == list(
        range(lines)
    )


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_file_matches_verl_grpo_schema(name, formatted_real):
    _, train, _ = formatted_real[name]
    schema = pq.read_schema(Path(formatted_real[name][0]["outputs"]["train"]["uri"]))
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info", "sample_id"]
    assert schema.field("data_source").type == pa.string()
    assert schema.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert schema.field("ability").type == pa.string()
    assert schema.field("reward_model").type == pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
    assert schema.field("sample_id").type == pa.int64()
    extra_type = schema.field("extra_info").type
    for field, type_ in [
        ("index", pa.int64()),
        ("sample_id", pa.int64()),
        ("question", pa.string()),
        ("solution", pa.string()),
        ("answer", pa.string()),
        ("source_row", pa.int64()),
    ]:
        assert extra_type.field(field).type == type_, field

    info = extra(train)
    assert (train["ability"] == "math").all()
    assert (train["reward_model"].struct["style"] == "rule").all()
    assert (train["data_source"] == Path(name).parent.name).all()  # a generic file name: the folder names the set
    assert train["prompt"].list.len().eq(1).all()
    messages = train["prompt"].list.first()
    assert (messages.struct["role"] == "user").all()
    assert messages.struct["content"].to_list() == [REFERENCE_PROMPT.format(q) for q in info["question"]]
    assert info["gt"].to_list() == info["answer"].to_list()
    assert info["index"].to_list() == list(range(train.height))
    assert info["sample_id"].to_list() == info["top_sample_id"].to_list()
    assert train["sample_id"].is_unique().all() and (train["sample_id"] >= 0).all()


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_questions_come_from_their_source_row(name, shared_data, formatted_real):
    source = read_jsonl(shared_data / name)
    info = extra(formatted_real[name][1])
    for row, question in zip(info["source_row"], info["question"], strict=True):
        assert question == (source[row].get("question") or source[row]["problem"]).strip()


@pytest.mark.parametrize(("name", "first_answer"), [("gsm8k/train.jsonl", "72"), ("gsm8k/test.jsonl", "18")])
def test_gsm8k_ground_truth_is_the_number_after_the_marker(name, first_answer, shared_data, formatted_real):
    source = read_jsonl(shared_data / name)
    info = extra(formatted_real[name][1])
    assert info.height == len(source)
    for row, gt, solution in zip(info["source_row"], info["gt"], info["solution"], strict=True):
        final = source[row]["answer"].split("####")[-1].strip()
        assert gt == final.replace(",", "")
        assert re.fullmatch(r"-?\d+(\.\d+)?", gt), gt
        assert "####" not in solution and "<<" not in solution
    assert info.filter(pl.col("source_row") == 0)["gt"].item() == first_answer  # read off the published file


def test_math500_ground_truth_is_its_answer_field(shared_data, formatted_real):
    source = read_jsonl(shared_data / "math500/test.jsonl")
    info = extra(formatted_real["math500/test.jsonl"][1])
    assert info.height == len(source) == 500
    for row, gt, solution, source_id in zip(
        info["source_row"], info["gt"], info["solution"], info["source_id"], strict=True
    ):
        assert gt == source[row]["answer"]
        assert solution == source[row]["solution"].strip()
        assert source_id == source[row]["unique_id"]
    meta = json.loads(info["source_meta"][0])
    assert {"subject", "level"} <= set(meta)


def test_aime24_keeps_string_answers_as_written(shared_data, formatted_real):
    source = read_jsonl(shared_data / "aime24/test.jsonl")
    info = extra(formatted_real["aime24/test.jsonl"][1])
    assert [source[r]["answer"] for r in info["source_row"]] == info["gt"].to_list()
    assert "025" in info["gt"].to_list()  # a leading zero is part of an AIME answer string


def test_amc23_float_answers_become_integer_strings(shared_data, formatted_real):
    source = read_jsonl(shared_data / "amc23/test.jsonl")
    info = extra(formatted_real["amc23/test.jsonl"][1])
    assert all(isinstance(r["answer"], float) for r in source)
    assert info["gt"].to_list() == [str(int(source[r]["answer"])) for r in info["source_row"]]
    assert all(re.fullmatch(r"-?\d+", gt) for gt in info["gt"])


def test_sample_id_is_stable_across_reruns_and_reorderings(shared_data, tmp_path):
    rows = read_jsonl(shared_data / "gsm8k/test.jsonl")
    forward = write_jsonl(tmp_path / "forward.jsonl", rows)
    backward = write_jsonl(tmp_path / "backward.jsonl", rows[::-1])
    _, first, _ = run_format(forward, tmp_path / "a", name="gsm8k")
    _, again, _ = run_format(forward, tmp_path / "b", name="gsm8k")
    _, reordered, _ = run_format(backward, tmp_path / "c", name="gsm8k")

    plt.assert_frame_equal(first.select(CORE_COLUMNS), again.select(CORE_COLUMNS))
    by_id = CORE_COLUMNS
    plt.assert_frame_equal(first.select(by_id).sort("sample_id"), reordered.select(by_id).sort("sample_id"))
    # The id follows the question, not the row position.
    assert first["sample_id"][0] == reordered["sample_id"][-1]


def test_sample_id_ignores_whitespace_and_case_only(tmp_path):
    base = "What is 6 times 7?"
    variants = [base, f"  {base}\n", base.upper(), base.replace(" ", "\t "), "What is 6 times 8?"]
    rows = [{"question": q, "answer": "42"} for q in variants]
    _, train, rejects = run_format(write_jsonl(tmp_path / "q.jsonl", rows), tmp_path / "out")
    assert train.height == 2
    assert rejects["reason"].to_list() == ["duplicate"] * 3
    assert train["sample_id"][0] != train["sample_id"][1]


# ---------------------------------------------------------------------------------------------
# duplicates


def test_duplicates_go_to_rejects_and_the_first_row_is_kept(tmp_path):
    rows = [
        {"question": "Tom has 3 apples and eats one. How many are left?", "answer": "2"},
        {"question": "Sue has 5 pens.  How many pens?", "answer": "5"},
        {"question": "Tom has 3 apples and eats one. How many are left?", "answer": "2"},  # exact
        {"question": "  tom HAS 3 apples and eats one.\nHow many are left?  ", "answer": "2"},  # space and case
        {"question": "Ｓｕｅ has 5 pens. How many pens?", "answer": "5"},  # full-width letters (NFKC)
    ]
    manifest, train, rejects = run_format(write_jsonl(tmp_path / "dups.jsonl", rows), tmp_path / "out")
    assert extra(train)["source_row"].to_list() == [0, 1]
    assert rejects.select("source_row", "reason").to_dicts() == [
        {"source_row": 2, "reason": "duplicate"},
        {"source_row": 3, "reason": "duplicate"},
        {"source_row": 4, "reason": "duplicate"},
    ]
    assert "same question as row 0" in rejects["message"][0]
    assert "same question as row 1" in rejects["message"][2]
    assert manifest["counts"]["rejects_by_reason"] == {"duplicate": 3}


def test_duplicates_across_files_of_a_directory(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"question": "What is 1+1?", "answer": "2"}])
    write_jsonl(folder / "b.jsonl", [{"question": "what is 1+1?", "answer": "2"}, {"question": "1+2?", "answer": "3"}])
    manifest, train, rejects = run_format(folder, tmp_path / "out")
    assert manifest["counts"]["rows_out"] == 2
    assert rejects.select("source_file", "source_row", "reason").to_dicts() == [
        {"source_file": "b.jsonl", "source_row": 0, "reason": "duplicate"}  # relative to the source folder
    ]


# ---------------------------------------------------------------------------------------------
# layouts, from small synthetic files


def test_math_style_triple(tmp_path):
    rows = [
        {"problem": "Compute $1+1$.", "solution": "Add: $\\boxed{2}$.", "answer": "2", "level": "Level 1"},
        {"problem": "Compute $2+2$.", "solution": "Add: $\\boxed{4}$.", "answer": "4", "level": "Level 2"},
    ]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "math.jsonl", rows), tmp_path / "out")
    layout = {k: v for k, v in only_layout(manifest).items() if v is not None}
    assert layout == {"layout": "qa", "question": "problem", "solution": "solution", "answer": "answer"}
    info = extra(train)
    assert info.select("question", "solution", "gt").rows() == [
        ("Compute $1+1$.", "Add: $\\boxed{2}$.", "2"),
        ("Compute $2+2$.", "Add: $\\boxed{4}$.", "4"),
    ]
    assert json.loads(info["source_meta"][1]) == {"level": "Level 2"}


def test_gsm8k_marker(tmp_path):
    rows = [
        {"question": "Ann has 2 bags of 600 marbles.", "answer": "2*600 = <<2*600=1200>>1200\n#### 1,200"},
        {"question": "Bob owes $3.", "answer": "He owes 3.\n#### -3"},
    ]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "gsm.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["layout"] == "marker"
    assert extra(train).select("solution", "gt").rows() == [("2*600 = 1200", "1200"), ("He owes 3.", "-3")]


def test_solution_with_boxed_only(tmp_path):
    rows = [
        {"problem": "Half of one?", "solution": "It is $\\boxed{\\frac{1}{2}}$."},
        {"problem": "Two answers?", "solution": "First \\boxed{1}, finally \\boxed{ {2} }"},
    ]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "boxed.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["layout"] == "boxed"
    assert extra(train)["gt"].to_list() == ["\\frac{1}{2}", "{2}"]


def test_boxed_layout_rejects_rows_without_a_box(tmp_path):
    rows = [{"problem": "One?", "solution": "\\boxed{1}"}, {"problem": "Two?", "solution": "no box here"}]
    _, train, rejects = run_format(write_jsonl(tmp_path / "boxed.jsonl", rows), tmp_path / "out")
    assert train.height == 1
    assert rejects.select("source_row", "reason").rows() == [(1, "missing_answer")]


def test_multiple_choice_with_letter_answer(tmp_path):
    rows = [
        {"question": "Which is prime?", "options": ["4", "6", "7"], "answer": "C", "rationale": "7 is prime."},
        {"question": "Which is even?", "options": ["3", "8"], "answer": "(a)"},
    ]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "mcq.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["layout"] == "mcq"
    assert extra(train).select("question", "gt", "solution").rows() == [
        ("Which is prime?\n\nA. 4\nB. 6\nC. 7", "C", "7 is prime."),
        ("Which is even?\n\nA. 3\nB. 8", "A", None),
    ]


def test_multiple_choice_with_index_answer(tmp_path):
    rows = [
        {"question": "2+2?", "choices": ["3", "4", "5", "6"], "answer": 1},
        {"question": "3+3?", "choices": ["6", "7"], "answer": 0},
        {"question": "4+4?", "choices": ["8", "9"], "answer": 5},
    ]
    manifest, train, rejects = run_format(write_jsonl(tmp_path / "mmlu.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["options"] == "choices"
    assert extra(train)["gt"].to_list() == ["B", "A"]
    assert rejects.select("source_row", "reason").rows() == [(2, "bad_type")]


def test_body_and_question_split(tmp_path):
    rows = [{"Body": "Jack had 8 pens and gave 3 away.", "Question": "How many pens does he have?", "Answer": 5.0}]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "svamp.jsonl", rows), tmp_path / "out")
    layout = {k: v for k, v in only_layout(manifest).items() if v is not None}
    assert layout == {"layout": "body_question", "question": "Question", "answer": "Answer", "body": "Body"}
    assert extra(train).select("question", "gt").rows() == [
        ("Jack had 8 pens and gave 3 away. How many pens does he have?", "5")
    ]


def test_chat_messages_with_the_answer_in_the_reply(tmp_path):
    rows = [
        {
            "messages": [
                {"role": "system", "content": "You are a helpful tutor."},
                {
                    "role": "user",
                    "content": "Please reason step by step, and put your final answer within \\boxed{}.\n\n"
                    "What is 3*4?",
                },
                {"role": "assistant", "content": "3*4 = 12, so \\boxed{12}."},
            ]
        },
    ]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "chat.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["layout"] == "chat"
    assert extra(train).select("question", "solution", "gt").rows() == [
        ("What is 3*4?", "3*4 = 12, so \\boxed{12}.", "12")
    ]
    assert train["prompt"].to_list() == [[{"role": "user", "content": REFERENCE_PROMPT.format("What is 3*4?")}]]


def test_chat_messages_with_an_answer_column(tmp_path):
    rows = [{"conversations": [{"role": "human", "content": "Question: 5-2?"}], "final_answer": "3"}]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "chat.jsonl", rows), tmp_path / "out")
    assert only_layout(manifest)["messages"] == "conversations"
    assert extra(train).select("question", "gt").rows() == [("5-2?", "3")]


def test_verl_schema_passes_through(tmp_path):
    prompt = [{"role": "user", "content": "Solve: 9-4. Put the answer in \\boxed{}."}]
    rows = [
        {
            "data_source": "my_set",
            "prompt": prompt,
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "5"},
            "extra_info": {"index": 7},
        },
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "verl.parquet")
    manifest, train, _ = run_format(tmp_path / "verl.parquet", tmp_path / "out")
    assert only_layout(manifest)["layout"] == "verl"
    assert train["prompt"].to_list() == [prompt]
    assert train["data_source"].to_list() == ["my_set"]
    assert extra(train)["gt"].to_list() == ["5"]


def test_our_own_output_passes_through_unchanged(shared_data, tmp_path):
    _, first, _ = run_format(shared_data / "math500/test.jsonl", tmp_path / "a")
    manifest, again, rejects = run_format(tmp_path / "a" / "formatted" / "train.parquet", tmp_path / "b")
    assert only_layout(manifest)["layout"] == "verl"
    assert rejects.height == 0
    plt.assert_frame_equal(first.select(CORE_COLUMNS), again.select(CORE_COLUMNS))
    kept = ["index", "sample_id", "question", "solution", "answer"]
    plt.assert_frame_equal(extra(first).select(kept), extra(again).select(kept))


@pytest.mark.parametrize(
    "spelling",
    [("Problem", "Solution", "Answer"), ("PROBLEM", "SOLUTION", "ANSWER"), ("problem", "SoLuTiOn", "Answer ")],
)
def test_column_names_in_any_capitalisation(tmp_path, spelling):
    q, s, a = spelling
    rows = [{q: "What is 10/2?", s: "Divide: \\boxed{5}", a: "5"}, {q: "What is 10/5?", s: "\\boxed{2}", a: "2"}]
    manifest, train, _ = run_format(write_jsonl(tmp_path / "caps.jsonl", rows), tmp_path / "out")
    layout = only_layout(manifest)
    assert (layout["layout"], layout["question"], layout["solution"], layout["answer"]) == ("qa", q, s, a)
    assert extra(train).select("question", "solution", "gt").rows() == [
        ("What is 10/2?", "Divide: \\boxed{5}", "5"),
        ("What is 10/5?", "\\boxed{2}", "2"),
    ]


# ---------------------------------------------------------------------------------------------
# file formats and directories

FORMAT_ROWS = [
    {"problem": "What is 7+8?", "solution": "7+8=15", "answer": "15"},
    {"problem": "What is 9*9?", "solution": "81", "answer": "81"},
    {"problem": "Ünïcødé: what is ∑{1,2}?", "solution": "1+2=3", "answer": "3"},
]


def write_as(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".jsonl":
        return write_jsonl(path, rows)
    if path.suffix == ".json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_every_file_format_gives_the_same_rows(tmp_path, suffix):
    reference = run_format(write_as(tmp_path / "ref.jsonl", FORMAT_ROWS), tmp_path / "ref", name="set")[1]
    manifest, train, rejects = run_format(write_as(tmp_path / f"rows{suffix}", FORMAT_ROWS), tmp_path / "o", name="set")
    assert manifest["counts"]["rows_out"] == 3 and rejects.height == 0
    plt.assert_frame_equal(train.select(CORE_COLUMNS), reference.select(CORE_COLUMNS))
    assert extra(train).select("question", "solution", "gt", "source_row").rows() == [
        (r["problem"], r["solution"], r["answer"], i) for i, r in enumerate(FORMAT_ROWS)
    ]


def test_json_object_holding_one_list(tmp_path):
    (tmp_path / "wrapped.json").write_text(json.dumps({"version": 2, "data": FORMAT_ROWS}))
    manifest, train, _ = run_format(tmp_path / "wrapped.json", tmp_path / "out")
    assert train.height == 3


def test_directory_of_mixed_files(tmp_path):
    folder = tmp_path / "data"
    (folder / "nested").mkdir(parents=True)
    write_as(folder / "a.jsonl", FORMAT_ROWS[:1])
    write_as(folder / "b.csv", FORMAT_ROWS[1:2])
    write_as(folder / "nested" / "c.parquet", FORMAT_ROWS[2:])
    write_as(folder / "d.json", [{"question": "1+1?", "answer": "#### 2"}])  # its own layout
    (folder / "README.md").write_text("not data")
    (folder / ".partial.tmp.jsonl").write_text('{"question": "half-written", "answer": "1"}\n')

    manifest, train, _ = run_format(folder, tmp_path / "out", name="mix")
    detected = manifest["extra"]["detected"]
    assert sorted(Path(f).name for f in detected) == ["a.jsonl", "b.csv", "c.parquet", "d.json"]
    assert detected[str(folder / "d.json")]["layout"] == "marker"
    info = extra(train)
    # Files are read in sorted path order: a.jsonl, b.csv, d.json, nested/c.parquet.
    assert info["gt"].to_list() == ["15", "81", "2", "3"]
    assert [Path(f).name for f in info["source_file"]] == ["a.jsonl", "b.csv", "d.json", "c.parquet"]
    assert "half-written" not in info["question"].to_list()


def test_memory_uri_in_and_out(tmp_path):
    src = "memory://ads-format-test/in/rows.jsonl"
    out = "memory://ads-format-test/out"
    storage.write_bytes(src, "".join(json.dumps(r) + "\n" for r in FORMAT_ROWS).encode())
    manifest = format_dataset(src, out, FormatConfig())
    assert manifest.counts["rows_out"] == 3
    assert storage.read_parquet(storage.join(out, "formatted", "train.parquet")).num_rows == 3
    assert storage.read_json(storage.join(out, "formatted", "manifest.json"))["counts"]["rows_in"] == 3
    # the digest of what was read: the one file's name and content hash, as the stage key hashes the source now
    digest = combine([("rows.jsonl", storage.content_hash(src))])
    assert manifest.inputs["source"]["sha256"] == source_digest(src) == digest


# ---------------------------------------------------------------------------------------------
# manifest of the stage


def test_stage_manifest_records_inputs_outputs_and_config(tmp_path):
    from ads_core.storage import manifest as mf

    src = write_jsonl(tmp_path / "rows.jsonl", FORMAT_ROWS + [{"problem": "x", "answer": None}])
    out = tmp_path / "out"
    manifest, _, _ = run_format(src, out, template="plain")
    assert manifest["stage"] == "format"
    assert manifest["inputs"]["source"] == {
        "uri": str(src),
        "sha256": source_digest(str(src)),
        "bytes": src.stat().st_size,
    }
    assert manifest["counts"] == {
        "rows_in": 4,
        "rows_out": 3,
        "rows_rejected": 1,
        "rejects_by_reason": {"missing_answer": 1},
    }
    assert manifest["config"]["template_string"] == "{question}"
    assert mf.verify(str(out / "formatted")) is not None
    (out / "formatted" / "rejects.parquet").unlink()
    assert mf.verify(str(out / "formatted")) is None
