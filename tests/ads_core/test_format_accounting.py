"""Nothing is lost: every physical record a reader meets is kept or rejected with its reason, and the manifest says so.

The attacks: a CSV quote that never closes (it used to swallow every later line into one field and report the file
as 4 rows), a quote closed by another field's opening quote, a field that runs past the line limit, the same in a
.csv.gz and in a directory next to other formats; and sources that change while they are read (appended, or
rewritten), which must never be described by a digest of bytes that were not the ones read.
"""

from __future__ import annotations

import gzip
import json
import logging
import tempfile
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
from ads_core.ingest.sources import source_digest

HEADER = "question,answer"


def good_lines(n: int, start: int = 0) -> list[str]:
    return [f"What is {i} plus {i}?,{2 * i}" for i in range(start, start + n)]


def outcome(out: Path) -> tuple[list[int], list[tuple[int, str]], dict[str, Any]]:
    """(kept source rows, (source row, reason) of each reject, manifest counts) of a formatted OUT."""
    train = pl.read_parquet(out / "formatted" / "train.parquet")
    rejects = pl.read_parquet(out / "formatted" / "rejects.parquet")
    counts = json.loads((out / "formatted" / "manifest.json").read_text())["counts"]
    assert train.height == counts["rows_out"] and rejects.height == counts["rows_rejected"]
    assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"]
    return (
        train["extra_info"].struct["source_row"].to_list(),
        rejects.select("source_row", "reason").rows(),
        counts,
    )


def test_a_runaway_quote_costs_one_rejected_line_and_the_rows_after_it_are_read(tmp_path):
    """The issue's file: a header, 3 rows, one line with an unclosed quote, then 1000 rows."""
    lines = [HEADER, *good_lines(3), '"What is the runaway one?,7', *good_lines(1000, start=3)]
    (tmp_path / "runaway.csv").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["format", str(tmp_path / "runaway.csv"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    kept, rejected, counts = outcome(tmp_path / "out")
    assert counts["rows_in"] == 1004 and counts["rows_out"] == 1003
    assert rejected == [(3, "bad_quote")]
    assert kept == [0, 1, 2, *range(4, 1004)]
    message = pl.read_parquet(tmp_path / "out" / "formatted" / "rejects.parquet")["message"][0]
    assert message.startswith("line 5: ")  # the physical line (the header is line 1)
    assert "rejected: bad_quote" in result.stderr and "1003" in result.stderr


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ('"What is the runaway one?,7', "quote open until the file ends"),
        ('"What is x,7\nWhat is y,8\n"What is z?",9', "closed by the quote that opens a later field"),
    ],
)
def test_a_runaway_quote_anywhere_is_one_bad_quote(tmp_path, bad, why):
    body = [HEADER, *good_lines(2), *bad.split("\n"), *good_lines(2, start=10)]
    (tmp_path / "rows.csv").write_text("\n".join(body) + "\n")
    format_dataset(str(tmp_path / "rows.csv"), str(tmp_path / "out"), FormatConfig(min_kept=0))
    kept, rejected, counts = outcome(tmp_path / "out")
    assert [r for r in rejected if r[1] == "bad_quote"] == [(2, "bad_quote")], why
    assert counts["rows_in"] == len(body) - 1  # every physical line after the header is one record


def test_a_field_running_past_the_line_limit_is_a_runaway_quote(tmp_path):
    """A runaway quote that happens to close cleanly many lines later: the line limit catches it."""
    body = [HEADER, *good_lines(2), '"What is the runaway one?,7', *good_lines(30, start=2), 'end of it",1']
    (tmp_path / "rows.csv").write_text("\n".join(body) + "\n")
    cfg = FormatConfig(csv_max_record_lines=10, min_kept=0)
    format_dataset(str(tmp_path / "rows.csv"), str(tmp_path / "out"), cfg)
    kept, rejected, counts = outcome(tmp_path / "out")
    assert (2, "bad_quote") in rejected and counts["rows_in"] == len(body) - 1
    assert set(range(3, 33)) <= set(kept)  # the 30 rows it would have swallowed


def test_a_legitimate_multi_line_field_stays_one_row(tmp_path):
    body = 'question,solution,answer\n"What is 2+2?","Step 1: 2+2.\nStep 2: so, 4.",4\nWhat is 3+3?,6,6\n'
    (tmp_path / "rows.csv").write_text(body)
    format_dataset(str(tmp_path / "rows.csv"), str(tmp_path / "out"), FormatConfig())
    kept, rejected, counts = outcome(tmp_path / "out")
    assert kept == [0, 1] and rejected == [] and counts["rows_in"] == 2
    solution = pl.read_parquet(tmp_path / "out" / "formatted" / "train.parquet")["extra_info"].struct["solution"][0]
    assert solution == "Step 1: 2+2.\nStep 2: so, 4."


def test_a_multi_line_record_of_the_wrong_width_that_swallowed_rows_is_a_runaway_quote(tmp_path):
    body = [HEADER, *good_lines(2), '"What is x,7', *good_lines(3, start=5), 'closes" here,3,extra']
    (tmp_path / "rows.csv").write_text("\n".join(body) + "\n")
    format_dataset(str(tmp_path / "rows.csv"), str(tmp_path / "out"), FormatConfig(min_kept=0))
    kept, rejected, counts = outcome(tmp_path / "out")
    assert (2, "bad_quote") in rejected and {3, 4, 5} <= set(kept) and counts["rows_in"] == len(body) - 1


def test_a_header_with_a_runaway_quote_is_an_unusable_file(tmp_path):
    (tmp_path / "rows.csv").write_text('"question,answer\n' + "\n".join(good_lines(5)) + "\n")
    result = CliRunner().invoke(app, ["format", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert "rows.csv" in line and "header" in line and "quote" in line


def test_every_reader_accounts_for_every_record_in_a_directory(tmp_path, caplog):
    """A .csv.gz with a runaway quote, JSONL with a broken line, a JSON list with a non-object, a Parquet file,
    and a file in a format that is not read, which the manifest and a warning name."""
    src = tmp_path / "src"
    src.mkdir()
    csv_lines = [HEADER, *good_lines(2), '"runaway,1', *good_lines(4, start=100)]
    (src / "a.csv.gz").write_bytes(gzip.compress(("\n".join(csv_lines) + "\n").encode()))
    jsonl = [json.dumps({"question": f"JSONL question {i}?", "answer": str(i)}) for i in range(3)]
    (src / "b.jsonl").write_text("\n".join([jsonl[0], '{"question": "cut', *jsonl[1:]]) + "\n")
    (src / "c.json").write_text(json.dumps([{"question": "JSON question?", "answer": "1"}, ["not", "a row"]]))
    pq.write_table(
        pa.Table.from_pylist([{"question": f"Parquet q{i}?", "answer": str(i)} for i in range(4)]), src / "d.parquet"
    )
    (src / "e.tsv").write_text("question\tanswer\nnot read\t1\n")
    with caplog.at_level(logging.WARNING, logger="ads.format"):
        manifest = format_dataset(str(src), str(tmp_path / "out"), FormatConfig(min_kept=0))
    kept, rejected, counts = outcome(tmp_path / "out")
    assert counts["rows_in"] == 7 + 4 + 2 + 4  # physical records: CSV lines after the header, JSONL lines, items
    assert sorted(r for _, r in rejected) == ["bad_json", "bad_quote", "bad_row"]
    assert manifest.extra["files_skipped"] == {"count": 1, "names": ["e.tsv"]}
    assert "e.tsv" in caplog.text and "not read" in caplog.text
    result = CliRunner().invoke(app, ["format", str(src), "--out", str(tmp_path / "cli"), "--min-kept", "0"])
    assert result.exit_code == 0 and "1 file(s) not read" in result.stderr and "e.tsv" in result.stderr


# ---------------------------------------------------------------------------------------------
# property: stray quotes anywhere in a CSV never lose a line

PLAIN = st.text(alphabet=st.sampled_from("abc xyz,?+0123456789"), min_size=1, max_size=12).filter(
    lambda t: t.count(",") == 0 and t.strip()
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(PLAIN, st.integers(0, 99), st.booleans()), min_size=1, max_size=30))
def test_random_stray_quotes_never_lose_a_line(rows):
    """Each data line is a record; the ones starting with an unclosed quote are exactly the bad_quote rejects."""
    lines = [f'"{q},{a}' if stray else f"{q},{a}" for q, a, stray in rows]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "rows.csv", Path(tmp) / "out"
        src.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
        cfg = FormatConfig(question_col="question", answer_col="answer", min_kept=0)
        format_dataset(str(src), str(out), cfg)
        kept, rejected, counts = outcome(out)
    assert counts["rows_in"] == len(rows)
    assert sorted(kept + [r for r, _ in rejected]) == list(range(len(rows)))
    assert [r for r, reason in rejected if reason == "bad_quote"] == [i for i, row in enumerate(rows) if row[2]]


# ---------------------------------------------------------------------------------------------
# a source that changes while it is read


def appending_progress(path: Path, extra: str, times: int) -> Any:
    """A progress callback that appends EXTRA to PATH after each of the first TIMES batches (another job writing)."""
    calls = {"n": 0}

    def advance(_: int) -> None:
        if calls["n"] < times:
            calls["n"] += 1
            with path.open("a") as fh:
                fh.write(extra)

    return advance


def test_a_file_appended_while_it_is_read_is_read_again_and_keyed_by_what_was_read(tmp_path, caplog):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"question": f"Question {i}?", "answer": str(i)}) + "\n" for i in range(6)))
    late = json.dumps({"question": "Appended while reading?", "answer": "7"}) + "\n"
    with caplog.at_level(logging.WARNING, logger="ads.format"):
        manifest = format_dataset(
            str(src), str(tmp_path / "out"), FormatConfig(batch_rows=2), progress=appending_progress(src, late, 1)
        )
    assert "changed while it was read" in caplog.text
    assert manifest.counts["rows_in"] == 7  # the second read saw the whole, settled file
    assert manifest.inputs["source"]["sha256"] == source_digest(str(src))  # and is described by exactly it


def test_a_file_that_never_settles_fails_with_one_line(tmp_path):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"question": f"Question {i}?", "answer": str(i)}) + "\n" for i in range(6)))
    late = json.dumps({"question": "Another one?", "answer": "1"}) + "\n"
    with pytest.raises(InputError, match=r"changed while it was read .* on each of 3 reads") as info:
        format_dataset(
            str(src), str(tmp_path / "out"), FormatConfig(batch_rows=2), progress=appending_progress(src, late, 99)
        )
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out" / "formatted" / "manifest.json").exists()  # nothing published


def test_a_parquet_file_rewritten_while_it_is_read_is_read_again(tmp_path):
    src = tmp_path / "rows.parquet"
    first = [{"question": f"Question {i}?", "answer": str(i)} for i in range(6)]
    pq.write_table(pa.Table.from_pylist(first), src, row_group_size=2)
    calls = {"n": 0}

    def rewrite(_: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # a job replacing the file in place, mid-read
            pq.write_table(pa.Table.from_pylist([*first, {"question": "New?", "answer": "9"}]), src)

    manifest = format_dataset(str(src), str(tmp_path / "out"), FormatConfig(batch_rows=2), progress=rewrite)
    assert manifest.counts["rows_in"] == 7 and manifest.inputs["source"]["sha256"] == source_digest(str(src))
