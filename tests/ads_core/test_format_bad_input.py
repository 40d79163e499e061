"""Bad input never gives a traceback: each case is a reject with its reason, or exit 2 with one `error:` line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.common.errors import InputError
from ads_core.config.build import FormatConfig
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.schema import REJECT_REASONS

GOOD = {"question": "What is 2+2?", "answer": "4"}


def ads_format(source: Path | str, out: Path, *args: str) -> Any:
    result = CliRunner().invoke(app, ["format", str(source), "--out", str(out), *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def error_lines(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def assert_exit_2(result: Any, *needles: str) -> str:
    """Exit 2 with exactly one `error:` line that holds every needle; return that line."""
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def rejects_of(out: Path) -> list[tuple[int, str]]:
    """(source_row, reason) of every reject, in file order."""
    return pl.read_parquet(out / "formatted" / "rejects.parquet").select("source_row", "reason").rows()


def kept_rows(out: Path) -> list[int]:
    return pl.read_parquet(out / "formatted" / "train.parquet")["extra_info"].struct["source_row"].to_list()


def manifest_counts(out: Path) -> dict[str, Any]:
    return json.loads((out / "formatted" / "manifest.json").read_text())["counts"]


def jsonl_bytes(*rows: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


# ---------------------------------------------------------------------------------------------
# unusable files: exit 2


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.json", "empty.csv", "empty.parquet"])
def test_empty_file(tmp_path, name):
    (tmp_path / name).write_bytes(b"")
    assert_exit_2(ads_format(tmp_path / name, tmp_path / "out"), name)
    assert not (tmp_path / "out" / "formatted" / "train.parquet").exists()


def test_blank_lines_only(tmp_path):
    (tmp_path / "blank.jsonl").write_text("\n  \n\t\n")
    assert_exit_2(ads_format(tmp_path / "blank.jsonl", tmp_path / "out"), "blank.jsonl", "no rows")


def test_csv_with_a_header_and_no_rows(tmp_path):
    (tmp_path / "header.csv").write_text("question,answer\n")
    assert_exit_2(ads_format(tmp_path / "header.csv", tmp_path / "out"), "header.csv", "no rows")


def test_corrupt_parquet(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1" + os.urandom(2000) + b"PAR1")
    assert_exit_2(ads_format(tmp_path / "bad.parquet", tmp_path / "out"), "bad.parquet", "Parquet")


def test_truncated_parquet(tmp_path):
    pq.write_table(pa.Table.from_pylist([GOOD] * 100), tmp_path / "good.parquet")
    data = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    assert_exit_2(ads_format(tmp_path / "cut.parquet", tmp_path / "out"), "cut.parquet", "Parquet")


def test_parquet_with_corrupt_pages(tmp_path):
    rows = [{"question": f"Question number {i}: " + "pad " * 20, "answer": str(i)} for i in range(5000)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "good.parquet", row_group_size=500, compression="snappy")
    data = bytearray((tmp_path / "good.parquet").read_bytes())
    middle = len(data) // 3
    data[middle : middle + 300] = bytes(b ^ 0xFF for b in data[middle : middle + 300])  # footer left intact
    (tmp_path / "pages.parquet").write_bytes(bytes(data))
    result = ads_format(tmp_path / "pages.parquet", tmp_path / "out")
    assert_exit_2(result, "pages.parquet", "corrupt")
    assert not (tmp_path / "out" / "formatted").exists() or not any((tmp_path / "out" / "formatted").iterdir())


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"version": 2, "note": 3}', "must hold a list"),  # an object that is neither a row nor holds rows
        (b'{"train": [{"q": 1}], "test": [{"q": 2}]}', "exactly one list"),
        (b'{"train": [], "test": []}', "exactly one list"),
        (b'"just a string"', "found a str"),
        (b'[{"question": "q", ', "not valid JSON"),
        (b'[{"question": "caf\xe9", "answer": "1"}]', "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "cannot be parsed"),
    ],
)
def test_json_file_that_is_not_a_list_of_rows(tmp_path, content, needle):
    (tmp_path / "rows.json").write_bytes(content)
    assert_exit_2(ads_format(tmp_path / "rows.json", tmp_path / "out"), "rows.json", needle)


def test_nonexistent_path(tmp_path):
    missing = tmp_path / "nowhere" / "rows.jsonl"
    assert_exit_2(ads_format(missing, tmp_path / "out"), str(missing), "no such file")


def test_unknown_suffix(tmp_path):
    (tmp_path / "rows.txt").write_text(json.dumps(GOOD))
    assert_exit_2(ads_format(tmp_path / "rows.txt", tmp_path / "out"), "rows.txt", "unknown file type", ".jsonl")


def test_directory_without_data_files(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.md").write_text("hello")
    assert_exit_2(ads_format(tmp_path / "data", tmp_path / "out"), "data", "holds no")


def test_hugging_face_id_not_in_the_local_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache
    monkeypatch.chdir(tmp_path)
    result = ads_format("no-such-org/no-such-dataset", tmp_path / "out")
    assert_exit_2(result, "no-such-org/no-such-dataset", "Hugging Face", "no network")
    with pytest.raises(InputError, match="from the local cache"):  # the CLI may respell words that are option names
        format_dataset("no-such-org/no-such-dataset", str(tmp_path / "out"), FormatConfig())


def test_column_names_with_rich_markup_are_printed_literally(tmp_path):
    (tmp_path / "odd.csv").write_text("foo,[/bar],[bold]x\n1,2,3\n")
    line = assert_exit_2(ads_format(tmp_path / "odd.csv", tmp_path / "out"), "odd.csv", "--question-col")
    assert "columns found: foo, [/bar], [bold]x" in line


def test_cli_in_a_real_process_prints_no_traceback(tmp_path):
    """The installed entry point, not CliRunner: a corrupt file gives exit 2 and one error line on stderr."""
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    ads = Path(sys.executable).with_name("ads")
    proc = subprocess.run(
        [str(ads), "format", str(tmp_path / "bad.parquet"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert str(tmp_path / "bad.parquet") in line and "not a readable Parquet file" in line
    assert proc.stdout == ""


# ---------------------------------------------------------------------------------------------
# bad rows: rejects with a reason, exit 0


def test_truncated_jsonl_last_line_is_bad_json(tmp_path):
    lines = jsonl_bytes(GOOD, {"question": "What is 3+3?", "answer": "6"}, {"question": "What is 4+4?", "answer": "8"})
    (tmp_path / "cut.jsonl").write_bytes(lines[:-12])  # the last line loses its end
    result = ads_format(tmp_path / "cut.jsonl", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert kept_rows(tmp_path / "out") == [0, 1]
    assert rejects_of(tmp_path / "out") == [(2, "bad_json")]


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ({"question": 42, "answer": "1"}, "bad_type"),
        ({"question": {"text": "What?"}, "answer": "1"}, "bad_type"),
        ({"question": ["What?"], "answer": "1"}, "bad_type"),
        ({"question": "What is 5+5?", "answer": {"value": 10}}, "bad_type"),
        ({"question": "What is 5+5?", "answer": [[10]]}, "bad_type"),
        ({"question": "What is 5+5?", "answer": [{"value": 10}]}, "bad_type"),
        ({"question": "What is 5+5?", "answer": True}, "bad_type"),
        (b'{"question": "What is 0/0?", "answer": NaN}', "bad_type"),
        (b'{"question": "What is 1/0?", "answer": Infinity}', "bad_type"),
        ({"question": None, "answer": "1"}, "missing_question"),
        ({"question": "   ", "answer": "1"}, "missing_question"),
        ({"answer": "1"}, "missing_question"),
        ({"question": "What is 5+5?", "answer": None}, "missing_answer"),
        ({"question": "What is 5+5?", "answer": ""}, "missing_answer"),
        ({"question": "What is 5+5?"}, "missing_answer"),
        ({"question": "x" * 20_000, "answer": "1"}, "too_long"),
        ({"question": "What is 5+5?", "answer": "1" * 2_000}, "too_long"),
        ({"question": "What is 5+5?", "solution": "s" * 70_000, "answer": "10"}, "too_long"),
        (b'{"question": "bad \\ud800 surrogate", "answer": "1"}', "bad_encoding"),
        (b'{"question": "caf\xe9?", "answer": "1"}', "bad_encoding"),
        (b'{"question": "What is 5+5?", "answer": 1' + b"0" * 5000 + b"}", "bad_json"),
        (b"[" * 50_000 + b"]" * 50_000, "bad_json"),
        (b'{"question": "What is 5+5?", "answer": "10"', "bad_json"),
        (b'["What is 5+5?", "10"]', "bad_row"),
        (b"17", "bad_row"),
        (GOOD, "duplicate"),
    ],
)
def test_bad_row_is_rejected_with_its_reason(tmp_path, bad_row, reason):
    rows = [GOOD, {"question": "What is 3+3?", "solution": "3+3=6", "answer": "6"}, bad_row]
    (tmp_path / "rows.jsonl").write_bytes(jsonl_bytes(*rows))
    result = ads_format(tmp_path / "rows.jsonl", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert kept_rows(tmp_path / "out") == [0, 1]
    assert rejects_of(tmp_path / "out") == [(2, reason)]
    assert manifest_counts(tmp_path / "out") == {
        "rows_in": 3,
        "rows_out": 2,
        "rows_rejected": 1,
        "rejects_by_reason": {reason: 1},
    }
    assert f"rejected: {reason}" in result.stderr


def test_reject_messages_and_raw_previews_are_readable(tmp_path):
    rows = [GOOD, {"question": "x" * 20_000, "answer": "1"}, b'{"question": "caf\xe9?", "answer": "1"}']
    (tmp_path / "rows.jsonl").write_bytes(jsonl_bytes(*rows))
    ads_format(tmp_path / "rows.jsonl", tmp_path / "out")
    rejects = pl.read_parquet(tmp_path / "out" / "formatted" / "rejects.parquet")
    assert rejects["message"].to_list() == [
        "row 1: question column 'question' has 20000 characters (limit 16000)",
        "line 3 is not valid UTF-8 (byte 17)",
    ]
    assert all(len(raw) <= 501 for raw in rejects["raw"])
    assert rejects["raw"][1].rstrip("\n") == '{"question": "caf\ufffd?", "answer": "1"}'


def test_lone_surrogates_outside_the_used_columns_are_kept(tmp_path):
    row = b'{"question": "What is 7+7?", "answer": "14", "id": "\\udc80", "note": "\\ud800", "data_source": "s\\udfff"}'
    (tmp_path / "rows.jsonl").write_bytes(jsonl_bytes(row))
    assert ads_format(tmp_path / "rows.jsonl", tmp_path / "out").exit_code == 0
    train = pl.read_parquet(tmp_path / "out" / "formatted" / "train.parquet")
    info = train["extra_info"].struct.unnest()
    assert info["source_id"].to_list() == ["\ufffd"]
    assert "\ufffd" in info["source_meta"][0]
    assert train["data_source"].to_list() == ["s\ufffd"]


def test_csv_with_non_utf8_bytes(tmp_path):
    content = (
        b"question,answer,note\n"
        b"What is 1+1?,2,fine\n"
        b"Caf\xe9 costs 3. Price?,3,fine\n"  # Latin-1 byte in the question
        b"What is 2+2?,4,\xff\xfe\n"  # bad bytes in a column the stage does not use
        b"What is 3+3?,\x80,x\n"  # bad byte as the answer
    )
    (tmp_path / "latin1.csv").write_bytes(content)
    result = ads_format(tmp_path / "latin1.csv", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert kept_rows(tmp_path / "out") == [0, 2]
    assert rejects_of(tmp_path / "out") == [(1, "bad_encoding"), (3, "bad_encoding")]


def test_csv_row_with_the_wrong_number_of_fields(tmp_path):
    (tmp_path / "ragged.csv").write_text("question,answer\nWhat is 1+1?,2\nWhat is 2+2?,4,extra\n")
    assert ads_format(tmp_path / "ragged.csv", tmp_path / "out").exit_code == 0
    assert rejects_of(tmp_path / "out") == [(1, "bad_row")]


def test_marker_layout_row_without_a_marker(tmp_path):
    rows = [
        {"question": "q1", "answer": "work\n#### 1"},
        {"question": "q2", "answer": "work\n#### 2"},
        {"question": "q3", "answer": "no marker here"},
        {"question": "q4", "answer": "work\n####   "},
    ]
    (tmp_path / "gsm.jsonl").write_bytes(jsonl_bytes(*rows))
    assert ads_format(tmp_path / "gsm.jsonl", tmp_path / "out").exit_code == 0
    assert rejects_of(tmp_path / "out") == [(2, "missing_answer"), (3, "missing_answer")]


def test_parquet_with_wrong_types(tmp_path):
    table = pa.table(
        {
            "question": ["What is 1+1?", None, "What is 3+3?", "What is 4+4?"],
            "answer": pa.array([b"2", b"2", None, b"8"], pa.binary()),
        }
    )
    pq.write_table(table, tmp_path / "typed.parquet")
    # Nothing is kept, so the run fails (min_kept), but only after the rejects and the manifest are written.
    line = assert_exit_2(
        ads_format(tmp_path / "typed.parquet", tmp_path / "out"),
        "typed.parquet",
        "0 of 4 rows kept",
        "bad_type x2",
        "--min-kept",
    )
    assert "row 0" in line and "rejects.parquet" in line
    assert manifest_counts(tmp_path / "out")["rows_rejected"] == 4
    assert rejects_of(tmp_path / "out") == [
        (0, "bad_type"),
        (1, "missing_question"),
        (2, "missing_answer"),
        (3, "bad_type"),
    ]


def test_many_problems_in_one_file_are_each_accounted_for(tmp_path):
    rows = [
        GOOD,
        b'{"question": "broken',
        {"question": None, "answer": "1"},
        {"question": "What is 9-1?", "answer": None},
        {"question": "what is 2+2?", "answer": "4"},
        b"\xff\xfe\xfd",
        {"question": "What is 9-2?", "answer": 7},
        *({"question": f"What is {i}*3?", "answer": 3 * i} for i in range(2, 5)),  # enough kept for min_kept
    ]
    (tmp_path / "mixed.jsonl").write_bytes(jsonl_bytes(*rows))
    result = ads_format(tmp_path / "mixed.jsonl", tmp_path / "out")
    assert result.exit_code == 0
    assert kept_rows(tmp_path / "out") == [0, 6, 7, 8, 9]
    assert rejects_of(tmp_path / "out") == [
        (1, "bad_json"),
        (2, "missing_question"),
        (3, "missing_answer"),
        (4, "duplicate"),
        (5, "bad_encoding"),
    ]


# ---------------------------------------------------------------------------------------------
# property: every row is counted once, and the rejects file agrees with the manifest

TEXT = st.text(alphabet=st.sampled_from("ab 1+?#\n\t\u00e9\u2211"), max_size=12)
FIELD = st.one_of(
    TEXT,
    st.sampled_from(["What is 1+1?", "what is 1+1?", "  WHAT IS 1+1? ", "#### 3", "x" * 60]),
    st.none(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=2),
)
ROW = st.fixed_dictionaries({"question": FIELD, "answer": FIELD}, optional={"solution": FIELD, "note": FIELD})
RAW_LINE = st.sampled_from(
    [
        b'{"question": "cut',
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        b"null",
        b'{"question": "lone \\ud800", "answer": "1"}',
        b'{"question": "q", "answer": NaN}',
    ]
)
LINE = st.one_of(ROW.map(lambda r: json.dumps(r).encode()), RAW_LINE)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINE, min_size=1, max_size=25), blank_every=st.integers(0, 5))
def test_random_rows_are_all_accounted_for(lines, blank_every):
    if blank_every:  # blank lines are not rows
        lines = [b"" if i % blank_every == 0 else line for i, line in enumerate(lines)] + [lines[-1]]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "rows.jsonl", Path(tmp) / "out"
        src.write_bytes(b"\n".join(lines) + b"\n")
        cfg = FormatConfig(
            question_col="question", answer_col="answer", max_question_chars=50, max_answer_chars=50, min_kept=0
        )
        counts = format_dataset(str(src), str(out), cfg).counts

        data_lines = [i for i, line in enumerate(lines) if line.strip()]
        train = pl.read_parquet(out / "formatted" / "train.parquet")
        rejects = pl.read_parquet(out / "formatted" / "rejects.parquet")
        assert counts["rows_in"] == len(data_lines)
        assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"]
        assert train.height == counts["rows_out"] and rejects.height == counts["rows_rejected"]
        assert dict(Counter(rejects["reason"])) == counts["rejects_by_reason"]
        assert set(counts["rejects_by_reason"]) <= set(REJECT_REASONS)
        kept = train["extra_info"].struct["source_row"].to_list()
        assert sorted(kept + rejects["source_row"].to_list()) == data_lines
        assert train["sample_id"].is_unique().all()
