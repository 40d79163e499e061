"""Training-vs-eval contamination: exact normalised matches plus word 13-gram overlap.

A training row is contaminated by an eval question when
- ``exact``: its normalised question (``text.normalize_question``) equals the eval question, or
- ``ngram``: it shares word 13-grams with the eval question, covering at least ``min_overlap`` (10%) of that
  question's 13-grams. Text is normalised for n-grams first (NFKC, casefolded, LaTeX layout commands such
  as ``\\left``, ``\\,`` or ``\\dfrac`` reduced, each run of letters or digits a word, all else a separator).
  A reworded, renumbered or reformatted copy of a long problem keeps most of its 13-grams; an unrelated
  problem shares none.

Boilerplate is not evidence (as in GPT-3's 13-gram test): a 13-gram found in ``boilerplate_eval`` (3) or
more eval questions, or in more than ``boilerplate_train`` (10) training rows, is ignored. Competition
phrasing such as "where $m$ and $n$ are relatively prime positive integers. Find $m+n$" is 13 words
long and would otherwise tie unrelated AIME problems together.

Eval questions of ``MIN_WORDS`` to 12 words count as one n-gram of their own length (so a short problem
with a prefix sentence is still found); shorter ones (``Compute $\\dbinom{8}{4}$.``) are checked by exact
match only, since a few words match unrelated text.

The n-gram sets are small (the three shipped sets hold about 17k 13-grams): the eval side is indexed in
memory and training rows are streamed past it, so no MinHash sketch is needed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ads_core import storage
from ads_core.common.contract import REJECTS_SCHEMA
from ads_core.common.errors import InputError
from ads_core.common.text import clean_instruction, normalize_question

NGRAM = 13
MIN_WORDS = 8
MIN_OVERLAP = 0.1
BOILERPLATE_EVAL = 3  # a 13-gram in this many eval questions is shared phrasing, not one problem's text
BOILERPLATE_TRAIN = 10  # ... and so is one in more than this many training rows (GPT-3's rule)
REASON = "contaminated"
SAME_SET_SHARE = 0.9  # a training set whose rows match one eval set's questions this often is that eval set
TEXT_CHARS = 600  # texts in the report are cut to this length

_LAYOUT = re.compile(r"\\(?:left|right|displaystyle|textstyle|mathrm|text|textbf|mbox|quad|qquad)(?![a-zA-Z])")
_WORD = re.compile(r"[^\W\d_]+|\d+")


def ngram_words(text: str) -> list[str]:
    """The words n-grams are taken over: layout-free, casefolded, letters and digits split apart."""
    s = unicodedata.normalize("NFKC", text or "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _WORD.findall(_LAYOUT.sub(" ", s).casefold())


def ngrams(words: list[str], n: int = NGRAM) -> set[str]:
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def questions(table: pa.Table) -> list[str]:
    """The question of each row: ``extra_info.question``, else the last user message without its template."""
    if "extra_info" in table.column_names:
        info = table.column("extra_info").combine_chunks()
        if pa.types.is_struct(info.type) and info.type.get_field_index("question") >= 0:
            return [q or "" for q in info.field("question").to_pylist()]
    if "prompt" in table.column_names:
        out = []
        for messages in table.column("prompt").to_pylist():
            users = [m.get("content") or "" for m in messages or [] if m.get("role") == "user"]
            out.append(clean_instruction(users[-1]) if users else "")
        return out
    raise InputError("cannot find questions: no extra_info.question and no prompt column")


@dataclass
class _Eval:
    """One eval question: where it is and how many n-grams it has."""

    name: str
    row: int
    text: str
    grams: int


def _index(
    evals: Mapping[str, list[str]], boilerplate_eval: int
) -> tuple[dict[str, dict[str, _Eval]], dict[str, list[_Eval]], set[int]]:
    """Exact questions per set, n-gram -> eval questions (boilerplate removed), and the short n-gram lengths."""
    exact: dict[str, dict[str, _Eval]] = {}
    grams: defaultdict[str, list[_Eval]] = defaultdict(list)
    lengths = {NGRAM}
    for name, texts in evals.items():
        exact[name] = {}
        for j, text in enumerate(texts):
            words = ngram_words(text)
            if len(words) >= NGRAM:
                mine = ngrams(words)
            elif len(words) >= MIN_WORDS:
                mine = {" ".join(words)}
                lengths.add(len(words))
            else:
                mine = set()
            ev = _Eval(name, j, text, len(mine))
            norm = normalize_question(text)
            if norm:
                exact[name].setdefault(norm, ev)
            for g in mine:
                grams[g].append(ev)
    return exact, {g: evs for g, evs in grams.items() if len(evs) < boilerplate_eval}, lengths


@dataclass
class Decontamination:
    train_uri: str
    train_rows: int
    matches: dict[str, int]  # eval set -> training rows matching one of its questions
    rows: list[int]  # row positions of contaminated training rows (sorted, unique)
    examples: list[dict[str, Any]]  # a few (row, eval set, question) for a short summary
    output_uri: str | None = None  # where the cleaned copy was written (drop only)
    methods: dict[str, dict[str, int]] = field(default_factory=dict)  # eval set -> {"exact": n, "ngram": n}
    hits: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # eval set -> hits with both texts
    rejects_uri: str | None = None  # the dropped rows, reason "contaminated" (drop only)
    ngram: int = NGRAM
    eval_rows: dict[str, int] = field(default_factory=dict)  # eval set -> its questions

    @property
    def contaminated(self) -> int:
        return len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "contaminated": self.contaminated}


def same_as_eval(report: Mapping[str, Any]) -> list[str]:
    """A sentence for each eval set the training set is (nearly every training row matches one of its questions),
    from a decontamination report (``Decontamination.to_dict()`` or its JSON): a train set that is an eval set is
    named as such, by the build and by ``ads train``."""
    rows = int(report.get("train_rows") or 0)
    sizes = report.get("eval_rows") or {}
    found = []
    for name, matched in (report.get("matches") or {}).items():
        if not rows or matched < SAME_SET_SHARE * rows:
            continue
        size = sizes.get(name)
        whole = size is not None and matched >= SAME_SET_SHARE * size
        of = f" ({matched} of its {size} questions)" if size else f" ({matched} of {rows} rows match it)"
        found.append(f"the training set is {'the' if whole else 'drawn from the'} {name} eval set{of}")
    return found


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"


def _best(
    shared: Counter[tuple[str, int]], by_id: dict[tuple[str, int], _Eval], min_overlap: float
) -> tuple[_Eval, int] | None:
    """The eval question a training row overlaps most (by share of its n-grams), if enough."""
    enough = [(by_id[k], c) for k, c in shared.items() if c / max(1, by_id[k].grams) >= min_overlap]
    if not enough:
        return None
    return max(enough, key=lambda ec: (ec[1] / max(1, ec[0].grams), ec[1], -ec[0].row))


def decontaminate(
    train_uri: str,
    eval_uris: Mapping[str, str],
    drop_to: str | None = None,
    max_examples: int = 10,
    *,
    max_hits: int = 100,
    min_overlap: float = MIN_OVERLAP,
    boilerplate_eval: int = BOILERPLATE_EVAL,
    boilerplate_train: int = BOILERPLATE_TRAIN,
    rejects_to: str | None = None,
) -> Decontamination:
    """Training rows that match an eval set exactly or by 13-gram overlap; each set's hits list both texts.

    With ``drop_to``, also write the training set without those rows there (same schema), and the
    dropped rows to ``rejects_to`` (default: beside it, ``*.rejects.parquet``) with reason ``contaminated``.
    """
    train = storage.read_parquet(train_uri)
    train_q = questions(train)
    evals: dict[str, list[str]] = {}
    for name, uri in eval_uris.items():
        try:
            evals[name] = questions(storage.read_parquet(uri))
        except InputError as exc:
            raise InputError(f"eval set {name} ({uri}): {exc}") from None
    exact, grams, lengths = _index(evals, boilerplate_eval)
    # pass 1: exact matches, and the eval n-grams each other row contains (with their training frequency)
    found: dict[int, dict[str, tuple[str, _Eval, int]]] = defaultdict(dict)
    candidates: dict[int, set[str]] = {}
    train_df: Counter[str] = Counter()
    for i, text in enumerate(train_q):
        norm = normalize_question(text)
        for name in evals:
            ev = exact[name].get(norm) if norm else None
            if ev is not None:
                found[i][name] = ("exact", ev, ev.grams)
        words = ngram_words(text)
        hit = {g for n in lengths if n <= len(words) for g in ngrams(words, n) if g in grams}
        if hit:
            candidates[i] = hit
            train_df.update(hit)
    # pass 2: n-gram matches on the grams that are not boilerplate
    for i, hit in candidates.items():
        per_set: dict[str, Counter[tuple[str, int]]] = defaultdict(Counter)
        by_id: dict[tuple[str, int], _Eval] = {}
        for g in hit:
            if train_df[g] > boilerplate_train:
                continue
            for ev in grams[g]:
                if ev.name not in found[i]:
                    per_set[ev.name][ev.name, ev.row] += 1
                    by_id[ev.name, ev.row] = ev
        for name, shared in per_set.items():
            best = _best(shared, by_id, min_overlap)
            if best is not None:
                found[i][name] = ("ngram", best[0], best[1])
    return _report(train, train_uri, train_q, evals, found, drop_to, rejects_to, max_examples, max_hits)


def _report(
    train: pa.Table,
    train_uri: str,
    train_q: list[str],
    evals: Mapping[str, list[str]],
    found: dict[int, dict[str, tuple[str, _Eval, int]]],
    drop_to: str | None,
    rejects_to: str | None,
    max_examples: int,
    max_hits: int,
) -> Decontamination:
    report = Decontamination(
        train_uri=train_uri,
        train_rows=train.num_rows,
        matches=dict.fromkeys(evals, 0),
        rows=sorted(i for i, f in found.items() if f),
        examples=[],
        methods={k: {"exact": 0, "ngram": 0} for k in evals},
        hits={k: [] for k in evals},
        eval_rows={k: len(v) for k, v in evals.items()},
    )
    reasons: dict[int, str] = {}
    for i in report.rows:
        for name in evals:
            if name not in found[i]:
                continue
            method, ev, shared = found[i][name]
            report.matches[name] += 1
            report.methods[name][method] += 1
            how = "exactly" if method == "exact" else f"by {shared} of its {ev.grams} word {NGRAM}-grams"
            reasons.setdefault(i, f"row {i}: matches {name} row {ev.row} {how}")
            if len(report.hits[name]) < max_hits:
                report.hits[name].append(
                    {
                        "row": i,
                        "eval_row": ev.row,
                        "method": method,
                        "shared_ngrams": shared,
                        "overlap": round(shared / max(1, ev.grams), 3),
                        "train_text": _cut(train_q[i]),
                        "eval_text": _cut(ev.text),
                    }
                )
            if len(report.examples) < max_examples:
                report.examples.append(
                    {"row": i, "eval_set": name, "method": method, "question": normalize_question(train_q[i])[:200]}
                )
    if drop_to is not None:
        mask = pa.array([i not in reasons for i in range(train.num_rows)])
        storage.write_parquet(drop_to, pc.filter(train, mask) if reasons else train)
        report.output_uri = drop_to
        report.rejects_uri = rejects_to or drop_to.removesuffix(".parquet") + ".rejects.parquet"
        storage.write_parquet(report.rejects_uri, _rejects(train, train_uri, reasons))
    return report


def _rejects(train: pa.Table, train_uri: str, reasons: dict[int, str]) -> pa.Table:
    """The dropped rows in the format stage's rejects schema; ``raw`` holds the whole row as JSON."""
    rows = sorted(reasons)
    taken = train.take(pa.array(rows, pa.int64())).to_pylist() if rows else []
    return pa.Table.from_pylist(
        [
            {
                "source_file": train_uri,
                "source_row": i,
                "reason": REASON,
                "message": reasons[i],
                "raw": json.dumps(row, ensure_ascii=False, default=str),
            }
            for i, row in zip(rows, taken, strict=True)
        ],
        schema=REJECTS_SCHEMA,
    )
