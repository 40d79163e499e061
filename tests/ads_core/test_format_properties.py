"""Properties of the format stage on generated input: detection and conversion never crash (InputError is
the only exception allowed, with a one-line message), and every row is counted once.

The fuzz part corrupts real-shaped files of every format (bounded and seeded, a few seconds on 2 cores)."""

from __future__ import annotations

import gzip
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads_core.common.errors import InputError
from ads_core.config.build import FormatConfig
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.evidence import SYNONYMS

NAMES = {role: sorted(SYNONYMS[role]) for role in ("question", "solution", "answer", "options")}
ANSWERS = st.one_of(
    st.sampled_from(["42", "$\\frac{1}{2}$", "B", "(c)", "#### 7", "-3", "", "  "]),
    st.integers(-100, 100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.lists(st.sampled_from(["$2$", "3", None, ""]), max_size=3),
    st.lists(st.lists(st.integers(), max_size=2), max_size=2),
)
QUESTIONS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["What is 1+1?", "Compute $2^5$.", "A) 1 B) 2"]),
    st.none(),
    st.integers(),
    st.lists(st.text(max_size=5), max_size=2),
)
SOLUTIONS = st.one_of(
    st.none(),
    st.text(max_size=30),
    st.just("So \\boxed{4}."),
    st.lists(st.text(max_size=10), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers()),
)
OPTIONS = st.one_of(
    st.lists(st.sampled_from(["A)5", "(B) 12", "7", "", "C. x"]), max_size=4),
    st.sampled_from(["A) 1 B) 2", '["1", "2"]', "[[[[", '{"label": ["A"], "text": ["1"]}']),
    st.none(),
    st.integers(),
)


def casing(draw: Any, name: str) -> str:
    style = draw(st.sampled_from(["lower", "upper", "title", "random"]))
    if style == "random":
        return "".join(c.upper() if draw(st.booleans()) else c for c in name)
    return getattr(name, style)()


@st.composite
def datasets(draw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    roles = draw(st.lists(st.sampled_from(list(NAMES)), min_size=1, max_size=4, unique=True))
    columns = {role: casing(draw, draw(st.sampled_from(NAMES[role]))) for role in roles}
    values = {"question": QUESTIONS, "solution": SOLUTIONS, "answer": ANSWERS, "options": OPTIONS}
    rows = []
    for _ in range(draw(st.integers(1, 12))):
        row = {}
        for role, col in columns.items():
            if draw(st.integers(0, 9)) and col not in row:  # now and then the field is missing
                row[col] = draw(values[role])
        rows.append(row)
    return rows, list(columns.values())


def run(path: Path, out: Path) -> dict[str, Any] | None:
    """The counts, or None after an InputError whose message is one line; any other exception fails the test."""
    try:
        counts = format_dataset(str(path), str(out), FormatConfig(min_kept=0)).counts
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).strip(), repr(exc)
        return None
    assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"]
    assert sum(counts["rejects_by_reason"].values()) == counts["rows_rejected"]
    assert pq.read_metadata(out / "formatted" / "train.parquet").num_rows == counts["rows_out"]
    assert pq.read_metadata(out / "formatted" / "rejects.parquet").num_rows == counts["rows_rejected"]
    return counts


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=datasets(), fmt=st.sampled_from(["jsonl", "json", "parquet"]))
def test_generated_layouts_never_crash_and_account_for_every_row(data, fmt):
    rows, _ = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"rows.{fmt}"
        if fmt == "jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        elif fmt == "json":
            path.write_text(json.dumps({"data": rows}))
        else:
            try:
                table = pa.Table.from_pylist(rows)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return  # mixed types Arrow itself cannot store: not a Parquet file anyone has
            pq.write_table(table, path)
        counts = run(path, Path(tmp) / "out")
        if counts is not None and fmt == "jsonl":
            assert counts["rows_in"] == len(rows)


# ---------------------------------------------------------------------------------------------
# seeded fuzz: corrupted files of every format


def _base_files(root: Path) -> list[Path]:
    rows = [
        {
            "question": f"Problem {i}: what is {i} squared?",
            "solution": f"{i}*{i} = \\boxed{{{i * i}}}",
            "answer": str(i * i),
            "options": [f"({c}) {i + k}" for k, c in enumerate("ABC")],
        }
        for i in range(30)
    ]
    files = {
        "a.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
        "b.json": json.dumps({"rows": rows}).encode(),
        "c.csv": ("question,answer\r\n" + "".join(f'"{r["question"]}",{r["answer"]}\r\n' for r in rows)).encode(),
        "d.jsonl.gz": gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()),
    }
    out = []
    for name, data in files.items():
        (root / name).write_bytes(data)
        out.append(root / name)
    pq.write_table(pa.Table.from_pylist(rows), root / "e.parquet")
    out.append(root / "e.parquet")
    return out


def _corrupt(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    op = rng.choice(["flip", "cut", "insert", "bom", "cr", "dup", "zero"])
    if op == "flip" and data:
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif op == "cut":
        data = data[: rng.randrange(len(data) + 1)]
    elif op == "insert":
        at = rng.randrange(len(data) + 1)
        data[at:at] = rng.choice([b"\xff\xfe", b"\x00", b"[" * 3000, b'"', b"\r", b"\\ud800", b"{}"])
    elif op == "bom":
        data[0:0] = b"\xef\xbb\xbf"
    elif op == "cr":
        data = bytearray(bytes(data).replace(b"\n", b"\r"))
    elif op == "dup":
        data += data[: len(data) // 2]
    else:
        data = bytearray(len(data))
    return bytes(data)


def test_seeded_fuzz_of_corrupted_files(tmp_path):
    rng = random.Random(20261201)
    base = _base_files(tmp_path)
    outcomes = {"ok": 0, "input_error": 0}
    for i in range(150):
        src = rng.choice(base)
        bad = tmp_path / f"fuzz{i}{''.join(src.suffixes)}"
        bad.write_bytes(_corrupt(src.read_bytes(), rng))
        counts = run(bad, tmp_path / f"out{i}")
        outcomes["ok" if counts is not None else "input_error"] += 1
    assert outcomes["ok"] and outcomes["input_error"]  # the generator reaches both outcomes
