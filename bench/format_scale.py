"""Scale benchmark for the format stage: a generated 1M-row GSM8K-like JSONL, formatted in this process.

    .venv/bin/python bench/format_scale.py [--rows 1000000] [--keep DIR] [--smoke]

Prints the input size, rows/s and peak RSS (ru_maxrss of this process, which also covers generating
the input; that part streams to disk and stays small). The last line is peak RSS / the 2 GB target
from issue 2; a ratio above 1 means the stage no longer streams.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ads_core.config.build import FormatConfig
from ads_core.ingest.convert import format_dataset

TARGET_BYTES = 2 * 1024**3
NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Ken", "Alexis", "Tina", "Randy")
ITEMS = ("clips", "apples", "stamps", "marbles", "books", "pencils", "cookies", "shells")


def gsm8k_like(i: int, rng: random.Random) -> dict[str, str]:
    name, item = NAMES[i % len(NAMES)], ITEMS[(i // len(NAMES)) % len(ITEMS)]
    a, b = rng.randint(2, 999), rng.randint(2, 99)
    total = a * b
    question = (
        f"{name} (case {i}) sold {a} {item} to each of {b} friends in April. "
        f"How many {item} did {name} sell altogether in April?"
    )
    answer = f"{name} sold {a} * {b} = <<{a}*{b}={total}>>{total} {item}.\n#### {total:,}"
    return {"question": question, "answer": answer}


def generate(path: Path, rows: int, seed: int = 0) -> dict[str, int]:
    """Write `rows` lines: ~1% exact duplicates, ~0.5% case/space duplicates, ~0.1% bad JSON, ~0.1% no answer."""
    rng = random.Random(seed)
    planted = {"duplicate": 0, "bad_json": 0, "missing_answer": 0}
    recent: list[dict[str, str]] = []
    with path.open("w", encoding="utf-8") as fh:
        for i in range(rows):
            roll = rng.random()
            if roll < 0.01 and recent:
                line = json.dumps(rng.choice(recent))
                planted["duplicate"] += 1
            elif roll < 0.015 and recent:
                row = dict(rng.choice(recent))
                row["question"] = "  " + row["question"].upper().replace(" ", "   ")
                line = json.dumps(row)
                planted["duplicate"] += 1
            elif roll < 0.016:
                line = json.dumps(gsm8k_like(i, rng))[: rng.randint(1, 40)]
                planted["bad_json"] += 1
            elif roll < 0.017:
                line = json.dumps({"question": gsm8k_like(i, rng)["question"], "answer": None})
                planted["missing_answer"] += 1
            else:
                row = gsm8k_like(i, rng)
                line = json.dumps(row)
                recent.append(row)
                if len(recent) > 1000:
                    recent.pop(rng.randrange(len(recent)))
            fh.write(line + "\n")
    return planted


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=FormatConfig.model_fields["batch_rows"].default)
    parser.add_argument("--keep", help="generate into this directory and keep it (default: a temp dir, removed)")
    parser.add_argument("--smoke", action="store_true", help="seconds: 3000 rows in batches of 500 (checks it runs)")
    args = parser.parse_args()
    if args.smoke:  # the test suite runs this, so a refactor that breaks the bench fails CI
        args.rows, args.batch_rows = 3000, 500

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ads-format-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        source = workdir / "gsm8k_like.jsonl"
        t0 = time.perf_counter()
        planted = generate(source, args.rows)
        gen_s = time.perf_counter() - t0
        rss_after_generate = peak_rss_bytes()

        t0, cpu0 = time.perf_counter(), cpu_seconds()
        manifest = format_dataset(str(source), str(workdir / "out"), FormatConfig(batch_rows=args.batch_rows))
        format_s, format_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        peak = peak_rss_bytes()

        counts = manifest.counts
        assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"], counts
        out_bytes = (workdir / "out" / "formatted" / "train.parquet").stat().st_size
        print(
            f"input: {args.rows:,} rows, {source.stat().st_size / 1e6:.1f} MB JSONL "
            f"(planted {planted}; generated in {gen_s:.1f} s)"
        )
        print(
            f"counts: rows_in={counts['rows_in']:,} rows_out={counts['rows_out']:,} "
            f"rows_rejected={counts['rows_rejected']:,} by reason {counts['rejects_by_reason']}"
        )
        print(f"output: train.parquet {out_bytes / 1e6:.1f} MB")
        print(
            f"format: {format_s:.1f} s, {counts['rows_in'] / format_s:,.0f} rows/s "
            f"({format_cpu:.1f} CPU s, {counts['rows_in'] / format_cpu:,.0f} rows per CPU second; "
            f"batch_rows={args.batch_rows})"
        )
        print(f"peak RSS: {peak / 1e6:.0f} MB (after generating the input: {rss_after_generate / 1e6:.0f} MB)")
        print(f"peak RSS / 2 GB target: {peak / TARGET_BYTES:.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
