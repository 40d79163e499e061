"""CSV records that cannot swallow the rest of a file: a runaway quote costs one rejected line, not the rows after it.

A field that opens a quote and never closes it makes a CSV parser read every later line into that one field, and
the file silently shrinks to the rows before it. Records are therefore parsed strictly and watched:

- a quote still open at the end of the file, or closed in the middle of a field (the `"` that opens a later
  field closes the runaway one, so a character other than a delimiter follows it): the csv module's own error;
- a record spanning more than `max_record_lines` physical lines;
- a record spanning several lines whose field count differs from the header's while the lines it swallowed
  read as rows of their own.

Each is rejected as `bad_quote` with the line where the quote opened, and reading resumes on the next physical
line, so the rows after it are read (and each kept or rejected on its own): records in = kept + rejected.
A single line with a stray quote is read leniently as before (`"a"b` is the field `ab`).
"""

from __future__ import annotations

import csv
import io
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO

from ads_core.common.errors import InputError
from ads_core.ingest.records import RawRow


class _TooManyLines(Exception):
    """The record being read has passed the line limit."""


class _Lines:
    """Physical lines of a text stream, numbered from 1, with push-back so a record can be re-read."""

    def __init__(self, text: IO[str], max_record_lines: int) -> None:
        self._text = iter(text)
        self._back: deque[tuple[int, str]] = deque()
        self._next_no = 1
        self.max_record_lines = max_record_lines
        self.taken: list[tuple[int, str]] = []  # the lines of the record being read

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self._back:
            no, line = self._back.popleft()
        else:
            line = next(self._text)
            no, self._next_no = self._next_no, self._next_no + 1
        self.taken.append((no, line))
        if len(self.taken) > self.max_record_lines:
            raise _TooManyLines
        return line

    def reread_after_first(self) -> None:
        """Push every line of the current record but its first back, to be read again."""
        self._back.extendleft(reversed(self.taken[1:]))


def _header(uri: str, lines: _Lines) -> list[str] | None:
    try:
        header = next(csv.reader(lines, strict=True))
    except StopIteration:
        return None
    except (csv.Error, _TooManyLines) as exc:
        why = f"it spans more than {lines.max_record_lines} lines" if isinstance(exc, _TooManyLines) else exc
        raise InputError(f"{uri}: cannot read the CSV header: an unclosed or stray quote ({why})") from None
    header = [h.strip() for h in header]
    dups = sorted({h for h in header if header.count(h) > 1})
    if dups:
        raise InputError(
            f"{uri}: duplicate column names in the CSV header: {', '.join(map(repr, dups))}; "
            "rename them so each column has one name"
        )
    return header


def _swallowed_rows(lines: list[tuple[int, str]], width: int) -> bool:
    """True when most lines after the first read alone as complete rows of the header's width."""
    rest = lines[1:]
    if len(rest) < 2:
        return False
    whole = 0
    for _, line in rest:
        try:
            whole += len(next(csv.reader([line], strict=True), [])) == width
        except csv.Error:
            pass
    return whole * 2 >= len(rest)


def iter_csv(
    uri: str, binary: IO[bytes], batch_rows: int, max_record_lines: int, preview: Callable[[str], str]
) -> Iterator[list[RawRow]]:
    """Batches of rows of one CSV file (BINARY is its open byte stream); `preview(text)` shortens raw text."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape", newline="")
    lines = _Lines(text, max_record_lines)  # the csv module itself ends lines at \r, \n or \r\n
    header = _header(uri, lines)
    if header is None:
        return
    batch: list[RawRow] = []
    reader = csv.reader(lines, strict=True)
    row_no = 0

    def bad_quote(why: str) -> RawRow:
        nonlocal reader
        first_no, first_line = lines.taken[0]
        lines.reread_after_first()
        reader = csv.reader(lines, strict=True)  # a fresh parser state, from the line after the quote
        after = len(lines.taken) - 1
        resumed = f"; the {after} line(s) after it are read again as rows of their own" if after else ""
        return RawRow(uri, row_no, None, "bad_quote", f"line {first_no}: {why}{resumed}", preview(first_line))

    while True:
        lines.taken = []
        try:
            values = next(reader)
        except StopIteration:
            break
        except _TooManyLines:
            row = bad_quote(f"a quoted field opened here runs over more than {max_record_lines} lines")
        except csv.Error as exc:
            if len(lines.taken) > 1 or "end of data" in str(exc):
                row = bad_quote(f"a quoted field opened here is never closed properly ({exc})")
            else:  # one line with a stray quote: read it leniently, as a CSV reader that is not strict would
                values = next(csv.reader([lines.taken[0][1]], strict=False), [])
                row = _row(uri, row_no, values, header, lines, preview)
        else:
            if len(lines.taken) > 1 and len(values) != len(header) and _swallowed_rows(lines.taken, len(header)):
                row = bad_quote(f"a quoted field opened here swallows {len(lines.taken) - 1} line(s) that read as rows")
            else:
                row = _row(uri, row_no, values, header, lines, preview)
        row_no += 1
        if row is None:
            continue
        batch.append(row)
        if len(batch) >= batch_rows:
            yield batch
            batch = []
    if batch:
        yield batch


def _row(
    uri: str, row_no: int, values: list[str], header: list[str], lines: _Lines, preview: Callable[[str], str]
) -> RawRow | None:
    """One parsed record as a row, a bad_row reject (wrong field count), or None for a blank record."""
    if not values or all(not v.strip() for v in values):
        return None
    if len(values) != len(header):
        return RawRow(
            uri,
            row_no,
            None,
            "bad_row",
            f"row {row_no} (line {lines.taken[0][0]}) has {len(values)} fields, the header has {len(header)}",
            preview(",".join(values)),
        )
    return RawRow(uri, row_no, dict(zip(header, values, strict=True)))
