"""Decontamination on near-duplicates of the shipped eval problems: reworded, renumbered, reformatted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_core.common.text import normalize_question
from ads_core.evaluation.sets import catalog as ev
from ads_core.evaluation.sets import decontam
from ads_core.ingest.schema import TEMPLATES

SETS = ("math500", "aime24", "amc23")


def problems(name: str) -> list[str]:
    path = ev.packaged_data_dir() / ev.EVAL_SETS[name]
    return [json.loads(line)["problem"] for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, questions: list[str]) -> str:
    pq.write_table(pa.table({"extra_info": [{"question": q, "answer": str(i)} for i, q in enumerate(questions)]}), path)
    return str(path)


@pytest.fixture(scope="module")
def eval_uris(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("evals")
    return {name: write(base / f"{name}.parquet", problems(name)) for name in SETS}


def renumber(q: str) -> str:
    """The first number in the problem changes (12 -> 19)."""
    out, n = re.subn(r"\d+", lambda m: str(int(m.group()) + 7), q, count=1)
    assert n == 1, q
    return out


def reword(q: str) -> str:
    for old, new in (("Find", "Determine"), ("What is", "Compute"), ("How many", "Count how many"), ("Let", "Suppose")):
        if old in q:
            return q.replace(old, new, 1)
    return "Please solve: " + q


def reformat(q: str) -> str:
    """LaTeX respaced: \\dfrac, thin spaces around '=', a space after each '$', \\left/\\right parentheses."""
    return q.replace("\\frac", "\\dfrac").replace("=", " \\, = \\, ").replace("$", "$ ").replace("(", "\\left(")


def near_duplicate(q: str) -> str:
    return "Here is one from last year's practice round. " + reword(renumber(reformat(q)))


def picked(name: str, count: int) -> list[tuple[int, str]]:
    """Real problems of 40+ words with a number and some LaTeX, spread over the set."""
    rows = [
        (j, q)
        for j, q in enumerate(problems(name))
        if len(decontam.ngram_words(q)) >= 40 and re.search(r"\d", q) and "$" in q
    ]
    step = max(1, len(rows) // count)
    return rows[::step][:count]


def unrelated() -> list[str]:
    """Other math problems: GSM8K word problems shipped with the package."""
    path = Path(ev.packaged_data_dir()).parent / "gsm8k_sample.jsonl"
    return [json.loads(line)["question"] for line in path.read_text().splitlines()[:200]]


def test_ngram_overlap_finds_reworded_renumbered_reformatted_copies_that_exact_matching_misses(
    tmp_path: Path, eval_uris: dict[str, str]
):
    train, expected = [], {}
    for name in SETS:
        for j, q in picked(name, 6):
            dup = near_duplicate(q)
            assert normalize_question(dup) != normalize_question(q)  # exact matching cannot see it
            expected[len(train)] = (name, j)
            train.append(dup)
    assert len(expected) == 18
    clean = unrelated()
    report = decontam.decontaminate(write(tmp_path / "train.parquet", train + clean), eval_uris)

    assert report.rows == sorted(expected)  # every near-duplicate, and none of the GSM8K problems
    assert report.matches == {name: sum(1 for s, _ in expected.values() if s == name) for name in SETS}
    assert all(m["exact"] == 0 and m["ngram"] == report.matches[k] for k, m in report.methods.items())
    for name, hits in report.hits.items():
        for hit in hits:
            assert (name, hit["eval_row"]) == expected[hit["row"]]  # paired with its own source problem
            # both texts of the pair, cut to TEXT_CHARS for the report
            assert train[hit["row"]].startswith(hit["train_text"].removesuffix("…"))
            assert problems(name)[hit["eval_row"]].startswith(hit["eval_text"].removesuffix("…"))
            assert len(hit["eval_text"]) >= min(len(problems(name)[hit["eval_row"]]), decontam.TEXT_CHARS)
            assert 0.1 <= hit["overlap"] < 1 and hit["method"] == "ngram"
    json.dumps(report.to_dict())  # the report is plain JSON


def test_exact_matches_are_reported_as_exact_and_short_problems_by_their_whole_text(
    tmp_path: Path, eval_uris: dict[str, str]
):
    math = problems("math500")
    short = next(j for j, q in enumerate(math) if 8 <= len(decontam.ngram_words(q)) < 13)
    tiny = next(j for j, q in enumerate(math) if len(decontam.ngram_words(q)) < 8)
    train = [
        "  " + math[0].upper() + "\n",  # case and spacing only: exact
        "Warm-up question. " + math[short],  # a short problem inside a longer row: its one n-gram
        "Warm-up question. " + math[tiny],
    ]  # too short for n-grams, and not exact: not flagged
    report = decontam.decontaminate(write(tmp_path / "t.parquet", train), eval_uris)
    assert report.rows == [0, 1] and report.methods["math500"] == {"exact": 1, "ngram": 1}
    assert [(h["row"], h["eval_row"], h["method"]) for h in report.hits["math500"]] == [
        (0, 0, "exact"),
        (1, short, "ngram"),
    ]


def test_shared_competition_phrasing_is_not_contamination(tmp_path: Path, eval_uris: dict[str, str]):
    """AIME's 'm and n are relatively prime positive integers. Find m+n' tail is 13+ words of boilerplate."""
    boiler = [q for q in problems("aime24") if "relatively prime positive integers" in q]
    assert len(boiler) >= 3
    tail = boiler[0][boiler[0].index("can be written") :] if "can be written" in boiler[0] else boiler[0][-120:]
    fresh = [
        f"A bag holds {k} red and {k + 3} blue marbles. Two are drawn at random without replacement. "
        f"The probability that both are red {tail}"
        for k in range(4, 16)
    ]
    report = decontam.decontaminate(write(tmp_path / "t.parquet", fresh), eval_uris)
    assert report.rows == []
    # the filters are what keep them out: without them the shared tail alone flags rows
    loose = decontam.decontaminate(
        write(tmp_path / "t.parquet", fresh),
        eval_uris,
        min_overlap=0.0,
        boilerplate_eval=10_000,
        boilerplate_train=10_000,
    )
    assert loose.rows


def test_questions_come_from_prompts_without_their_template(tmp_path: Path, eval_uris: dict[str, str]):
    ((j, q),) = picked("amc23", 1)
    template = TEMPLATES["ads_think"]
    prompts = [
        [{"role": "user", "content": template.replace("{question}", text)}]
        for text in (near_duplicate(q), *unrelated()[:20])
    ]
    path = tmp_path / "prompts.parquet"
    pq.write_table(pa.table({"prompt": prompts}), path)
    report = decontam.decontaminate(str(path), eval_uris)
    assert report.rows == [0] and report.hits["amc23"][0]["eval_row"] == j


def test_drop_writes_the_clean_set_and_the_dropped_rows_with_their_reason(tmp_path: Path, eval_uris: dict[str, str]):
    ((j, q),) = picked("aime24", 1)
    questions = [unrelated()[0], near_duplicate(q), unrelated()[1]]
    train = write(tmp_path / "train.parquet", questions)
    report = decontam.decontaminate(train, eval_uris, drop_to=str(tmp_path / "clean.parquet"))
    kept = pq.read_table(report.output_uri)
    rejects = pq.read_table(report.rejects_uri).to_pylist()
    assert report.rejects_uri == str(tmp_path / "clean.rejects.parquet")
    assert kept.num_rows + len(rejects) == len(questions)  # nothing silently lost
    assert [r["extra_info"]["question"] for r in kept.to_pylist()] == [questions[0], questions[2]]
    (reject,) = rejects
    assert reject["reason"] == decontam.REASON == "contaminated" and reject["source_row"] == 1
    assert reject["source_file"] == train and f"aime24 row {j}" in reject["message"]
    assert json.loads(reject["raw"])["extra_info"]["question"] == questions[1]


def test_a_table_without_questions_names_the_eval_set(tmp_path: Path, eval_uris: dict[str, str]):
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"x": [1]}), bad)
    train = write(tmp_path / "t.parquet", ["q"])
    with pytest.raises(decontam.InputError, match="eval set oops .*no extra_info.question"):
        decontam.decontaminate(train, {**eval_uris, "oops": str(bad)})


def test_a_training_set_that_is_an_eval_set_is_named_as_such(tmp_path: Path, eval_uris: dict[str, str]):
    """Regression (issue 53): a build of MATH-500 said "500 rows match an eval question" and never that its training
    set is the math500 eval set; `ads train` on it said nothing."""
    from types import SimpleNamespace

    from ads_core.train.plan import eval_set_notes

    amc = write(tmp_path / "amc.parquet", problems("amc23"))
    report = decontam.decontaminate(amc, eval_uris).to_dict()
    assert report["eval_rows"] == {"math500": 500, "aime24": 30, "amc23": 40}
    assert decontam.same_as_eval(report) == ["the training set is the amc23 eval set (40 of its 40 questions)"]
    part = write(tmp_path / "part.parquet", problems("math500")[:30] + unrelated()[:2])
    assert decontam.same_as_eval(decontam.decontaminate(part, eval_uris).to_dict()) == [
        "the training set is drawn from the math500 eval set (30 of its 500 questions)"
    ]
    mixed = write(tmp_path / "mixed.parquet", problems("amc23")[:10] + unrelated()[:30])
    assert decontam.same_as_eval(decontam.decontaminate(mixed, eval_uris).to_dict()) == []  # contaminated, not it

    out = tmp_path / "OUT"  # ads train reads the build's own check beside OUT/final
    (out / "report").mkdir(parents=True)
    (out / "report" / "decontamination.json").write_text(json.dumps({k: v for k, v in report.items() if k != "rows"}))
    notes = eval_set_notes(SimpleNamespace(out_root=str(out)), None)
    assert notes == [
        "the training set is the amc23 eval set (40 of its 40 questions) (the build's and this run's decontamination "
        "checks): validation on it measures recall of the training problems, not learning; validate on another set "
        "(eval_sets)"
    ]
    assert eval_set_notes(SimpleNamespace(out_root=None), report) == notes  # this run's own check says the same
