"""`ads grade FILE`: the rows come back in order with `correct`, `extracted` and `reason` added; bad input is one
`error:` line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.grading.pool import ZYGOTE_ENV

SLOW = "((x+1)^{30}+1)^{30}"  # passes the pre-check, sympy needs minutes: cut at the limit
# (id, completion, answer) -> (correct, extracted, reason)
ROWS: list[tuple[dict[str, Any], tuple[bool, str | None, str]]] = [
    ({"id": 0, "completion": "so \\boxed{5}", "answer": "5"}, (True, "5", "correct")),
    ({"id": 1, "completion": "so \\boxed{6}", "answer": "5"}, (False, "6", "wrong")),
    ({"id": 2, "completion": "\\boxed{50\\%}", "answer": "0.5"}, (True, "50\\%", "correct")),
    ({"id": 3, "completion": "\\boxed{５}", "answer": "5"}, (True, "５", "correct")),
    ({"id": 4, "completion": "\\boxed{7} and then \\boxed{", "answer": "7"}, (True, "7", "correct")),
    ({"id": 5, "completion": "I give up", "answer": "7"}, (False, None, "no_answer")),
    ({"id": 6, "completion": "\\boxed{None}", "answer": None}, (False, "None", "error")),
    ({"id": 7, "completion": "\\boxed{-3}", "answer": '["2", "-3"]'}, (True, "-3", "correct")),
    ({"id": 8, "completion": "\\boxed{\\sqrt{8}}", "answer": "2\\sqrt{2}"}, (True, "\\sqrt{8}", "correct")),
    ({"id": 9, "completion": "\\boxed{9^{9^{9^{9}}}}", "answer": "5"}, (False, "9^{9^{9^{9}}}", "too_complex")),
    (
        {"id": 10, "completion": "\\boxed{2^{1000000000}}", "answer": '["1", "2"]'},
        (False, "2^{1000000000}", "too_complex"),
    ),
    ({"id": 11, "completion": "\\boxed{((5!)!)!}", "answer": "120"}, (False, "((5!)!)!", "too_complex")),
    ({"id": 12, "completion": "\\boxed{10^{-10^{10}}}", "answer": "0"}, (False, "10^{-10^{10}}", "too_complex")),
    ({"id": 13, "completion": f"\\boxed{{{SLOW}}}", "answer": "1"}, (False, SLOW, "timeout")),
]


@pytest.fixture(autouse=True)
def _no_shared_verifier_after(monkeypatch):
    """`ads grade` exports its zygote's address for its children: keep it from leaking into later tests."""
    monkeypatch.delenv(ZYGOTE_ENV, raising=False)


def ads(*args: str) -> Any:
    result = CliRunner().invoke(app, ["grade", *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_jsonl_file_is_graded_in_order_with_three_columns_added(tmp_path: Path):
    src = write_jsonl(tmp_path / "gen.jsonl", [row for row, _ in ROWS])
    result = ads(str(src), "--completion-col", "completion", "--answer-col", "answer", "--timeout-s", "0.5")
    assert result.exit_code == 0, result.output
    assert "graded 14 rows: 6 correct" in result.stderr
    table = pq.read_table(tmp_path / "gen.graded.parquet")  # the default: beside the input
    assert table.column_names == ["id", "completion", "answer", "correct", "extracted", "reason"]
    got = table.to_pylist()
    assert [r["id"] for r in got] == list(range(14))
    assert [(r["correct"], r["extracted"], r["reason"]) for r in got] == [want for _, want in ROWS]
    assert [r["completion"] for r in got] == [row["completion"] for row, _ in ROWS]  # rows kept as they were


def test_parquet_in_jsonl_out_chat_messages_and_regrading(tmp_path: Path):
    table = pa.table(
        {
            "messages": [[{"role": "assistant", "content": "It is \\boxed{\\frac{1}{2}}"}], [{"content": "no"}]],
            "gt": [["0.5", "1/2"], ["3"]],  # list-valued ground truths: alternatives
        }
    )
    pq.write_table(table, tmp_path / "gen.parquet")
    out = tmp_path / "graded.jsonl"
    result = ads(str(tmp_path / "gen.parquet"), "--completion-col", "messages", "--answer-col", "gt", "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["correct"], r["extracted"], r["reason"]) for r in rows] == [
        (True, "\\frac{1}{2}", "correct"),
        (False, None, "no_answer"),
    ]
    again = ads(str(out), "--completion-col", "messages", "--answer-col", "gt", "--out", str(tmp_path / "2.parquet"))
    assert again.exit_code == 0, again.output
    regraded = pq.read_table(tmp_path / "2.parquet")
    assert regraded.column_names == ["messages", "gt", "correct", "extracted", "reason"]  # replaced, not doubled


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (None, [], "missing.jsonl: no such file"),
        (lambda p: p.with_suffix(".csv").write_text("a,b\n"), [], "not a .parquet or .jsonl file"),
        (lambda p: p.write_text('{"completion": "x"}\n{"completion":\n'), [], "line 2: not JSON"),
        (lambda p: p.write_text('{"completion": "x", "answer": "1"}\n'), ["--answer-col", "gt"], "no column 'gt'"),
        (lambda p: p.write_text('{"completion": "x", "answer": "1"}\n'), ["--timeout-s", "0"], "--timeout-s"),
        (lambda p: p.write_text('{"completion": "x", "answer": "1"}\n'), ["--out", "x.csv"], "must end in .parquet"),
    ],
)
def test_bad_input_is_one_error_line(tmp_path: Path, make, args: list[str], message: str):
    path = tmp_path / "missing.jsonl"
    if make is not None:
        make(path)
        if not path.exists():  # the csv case wrote beside it
            path = path.with_suffix(".csv")
    result = ads(str(path), *args)
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert message in line
    if "--answer-col" in args:
        assert line.endswith("name one with --answer-col")


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("file.txt/graded.parquet", "is not a folder"),
        ("folder", "is a folder; name the output file"),
        ("graded.csv", "must end in .parquet or .jsonl"),
    ],
)
def test_a_bad_out_is_refused_before_any_row_is_graded(tmp_path: Path, monkeypatch, out: str, message: str):
    import ads_core.grading.files as files

    graded = []
    monkeypatch.setattr(files, "grade_many", lambda *a, **k: graded.append(a) or [])
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    src = write_jsonl(tmp_path / "gen.jsonl", [row for row, _ in ROWS[:3]])
    result = ads(str(src), "--out", str(tmp_path / out))
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert message in line and str(tmp_path / out) in line
    assert graded == []


MIXED = [  # answers as JSONL allows them: strings, numbers, lists, null
    ({"completion": "\\boxed{5}", "answer": "5"}, (True, "correct"), "5"),
    ({"completion": "\\boxed{5}", "answer": 5}, (True, "correct"), "5"),
    ({"completion": "\\boxed{1e-3}", "answer": 0.001}, (True, "correct"), "0.001"),
    ({"completion": "\\boxed{-3}", "answer": ["2", -3]}, (True, "correct"), '["2", -3]'),
    ({"completion": "\\boxed{4}", "answer": None}, (False, "error"), None),
    ({"completion": "\\boxed{4}", "answer": "nan"}, (False, "error"), "nan"),
]


def test_answers_may_mix_strings_numbers_and_lists(tmp_path: Path):
    src = write_jsonl(tmp_path / "mixed.jsonl", [row for row, _, _ in MIXED])
    result = ads(str(src))
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "mixed.graded.parquet")
    assert [(r["correct"], r["reason"]) for r in table.to_pylist()] == [want for _, want, _ in MIXED]
    assert table.column("answer").to_pylist() == [text for _, _, text in MIXED]  # mixed types: as text
    out = tmp_path / "mixed.graded.jsonl"
    assert ads(str(src), "--out", str(out)).exit_code == 0
    assert [json.loads(line)["answer"] for line in out.read_text().splitlines()] == [r["answer"] for r, _, _ in MIXED]


def test_the_file_is_streamed_in_batches_not_held_whole(tmp_path: Path, monkeypatch):
    """Memory stays near one batch: the rows are graded and written batch by batch (one row group each)."""
    import ads_core.grading.files as files

    monkeypatch.setattr(files, "BATCH_ROWS", 3)
    sizes = []
    real = files.grade_many
    monkeypatch.setattr(files, "grade_many", lambda c, t, **k: sizes.append(len(c)) or real(c, t, **k))
    rows = [{"completion": f"\\boxed{{{n}}}", "answer": str(n if n % 2 else n + 1)} for n in range(7)]
    src = write_jsonl(tmp_path / "seven.jsonl", rows)
    result = ads(str(src), "--out", str(tmp_path / "seven.parquet"))
    assert result.exit_code == 0, result.output
    assert sizes == [3, 3, 1]
    graded = pq.ParquetFile(tmp_path / "seven.parquet")
    assert graded.num_row_groups == 3
    assert graded.read().column("correct").to_pylist() == [False, True, False, True, False, True, False]
    assert "graded 7 rows: 3 correct" in result.stderr


ISSUE_51 = [  # superscripts were `error`, an object ground truth was read as its keys (`\boxed{a}` correct)
    ({"completion": "\\boxed{3²}", "answer": "9"}, (True, "correct")),
    ({"completion": "\\boxed{x²}", "answer": "x^2"}, (True, "correct")),
    ({"completion": "\\boxed{2x²+1}", "answer": "2x^2+1"}, (True, "correct")),
    ({"completion": "\\boxed{(x+1)²}", "answer": "(x+1)^2"}, (True, "correct")),
    ({"completion": "\\boxed{\\pi r²}", "answer": "\\pi r^2"}, (True, "correct")),
    ({"completion": "\\boxed{x⁻¹}", "answer": "1/x"}, (True, "correct")),
    ({"completion": "\\boxed{3²}", "answer": "6"}, (False, "wrong")),
    ({"completion": "\\boxed{a}", "answer": {"a": 1}}, (False, "error")),
    ({"completion": "\\boxed{1}", "answer": [["1"]]}, (False, "error")),
]


def test_superscripts_and_object_ground_truths_get_their_verdicts(tmp_path: Path):
    src = write_jsonl(tmp_path / "issue51.jsonl", [row for row, _ in ISSUE_51])
    out = tmp_path / "issue51.graded.jsonl"
    result = ads(str(src), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "graded 9 rows: 6 correct" in result.stderr
    assert "correct 6, error 2, wrong 1" in result.stderr
    note = "note: 2 rows with reason error, the first: row 7: ground truth is a dict ({'a': 1}), not a string"
    assert note in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["correct"], r["reason"]) for r in rows] == [want for _, want in ISSUE_51]


def test_a_read_only_out_folder_gets_the_words_ads_format_uses(tmp_path: Path, monkeypatch):
    """A read-only mount (EROFS, simulated where the kernel reports it: creating a file there) is one line, in the
    same words from `ads grade` as from `ads format`, before any row is graded."""
    import errno
    import os

    real_open = os.open
    read_only = tmp_path / "mnt"
    read_only.mkdir()

    def open_(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(str(read_only)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    src = write_jsonl(tmp_path / "gen.jsonl", [row for row, _ in ROWS[:2]])
    graded = ads(str(src), "--out", str(read_only / "graded.parquet"))
    formatted = CliRunner().invoke(app, ["format", str(src), "--out", str(read_only / "out")])
    lines = []
    for result in (graded, formatted):
        assert result.exit_code == 2, result.output
        [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        lines.append(line)
    words = "the filesystem is read-only; write to a writable location (--out)"
    assert lines == [
        f"error: {read_only / 'graded.parquet'}: cannot write in {read_only}: {words}",
        f"error: storage error at {read_only / 'out'}: {words}",
    ]
