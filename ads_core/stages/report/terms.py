"""What each cluster is about: its top terms by class-based TF-IDF over the question text.

c-TF-IDF as in BERTopic: the questions of a cluster are one document; a term's weight in cluster c is
its L1-normalised frequency in c times log(1 + A / f_t), with A the average number of words per cluster
and f_t the term's frequency over all clusters. Text is lower-cased; numbers, [asy] drawings, LaTeX
environments and commands go (the few that name a topic, such as \\sin, \\sqrt or \\binom, stay as words).
Math mode holds variables, so only its topic commands and \\text{...} words count; a `$` before an amount is
money. English and math/filler stop words go, and numbers spelled out. What else makes a term worth reading:

- no proper nouns: a word capitalised in the middle of sentences more often than it is written in lower case
  (Tim, James, Monday), or capitalised every time it occurs, is a name, not a topic;
- distinctive: a term counts for a cluster only where the share of the cluster's questions using it is at least
  `min_lift` times its share over the whole set, so words common to most clusters ("cost", "money" in GSM8K)
  name none of them, while a cluster that holds most of their questions keeps them;
- bigrams where they help: two adjacent content words (nothing between them but a space) that recur are a term
  ("unit price", "right triangle"), and replace a unigram of theirs they account for most of the time.

Tokenising is vectorised in polars, so it stays fast on millions of questions.
"""

from __future__ import annotations

import io
import math
from functools import cache
from typing import Any

import polars as pl

# LaTeX commands that name a topic: kept as the word (\sin -> sin). Every other command is dropped.
TOPIC_COMMANDS = (
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "arcsin",
    "arccos",
    "arctan",
    "log",
    "ln",
    "sqrt",
    "binom",
    "pi",
    "angle",
    "triangle",
    "int",
    "lim",
    "det",
    "gcd",
    "lcm",
    "pmod",
    "infty",
)

# Words of the question templates and of LaTeX, not of a topic; numbers spelled out.
MATH_STOP_WORDS = frozenset(
    """
    find compute value values determine calculate evaluate express expressed answer answers simplify simplified
    solve solution solutions given let suppose assume number numbers many much total result equal equals
    following form write written enter example exactly possible real positive negative integer integers
    nonnegative greatest least smallest largest sum product what which how whose where there true holds
    frac dfrac tfrac boxed text textbf textit mathrm mathbf mathbb mathcal operatorname displaystyle left right
    cdot cdots ldots dots times div pm mp le leq ge geq ne neq lt gt approx equiv begin end align aligned array
    cases pmatrix bmatrix matrix quad qquad hline circ prime overline underline hat vec tilde bar limits
    tabular enumerate itemize center multicolumn multirow newline
    asy unitsize draw label dot pair dir linewidth
    use using used need needs show shown does did make makes made get gets got like just also each every
    would could should might must shall will can cannot may one two three four five six seven eight nine ten
    eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty
    seventy eighty ninety hundred hundreds thousand thousands million millions billion
    first second third half twice per ll ve re don doesn isn aren wasn weren didn th rd nd st
    denote denotes denoted define defines defined obtain obtained obtains give gives consider considered placed
    represent represents represented representation respectively following satisfy satisfies satisfying
""".split()
)


@cache
def stop_words() -> frozenset[str]:
    """English (scikit-learn's list) and math stop words. A function: importing scikit-learn costs ~2 s, which
    every process that imports the stage list (`ads train`, a deployment's worker) would pay for nothing."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | MATH_STOP_WORDS


# Stop words as unigrams that name a kind of thing inside a bigram ("right triangle", "prime number",
# "total cost", "real numbers"): allowed there.
BIGRAM_WORDS = frozenset(
    """
    right left real positive negative integer integers number numbers total sum product prime whole
    greatest least smallest largest second
    """.split()
)
REPLACES = 0.75  # a chosen bigram replaces a unigram of its own that it accounts for this often

_ASY = r"(?s)\[asy\].*?\[/asy\]|\\(?:begin|end)\{[a-z*]+\}(?:\{[^{}]*\})?"  # drawings; environments
# \$5, or $5 then a space, punctuation or "/unit" (not `$10x^2$`, `$5,$`, `$3.$`): a currency sign
_MONEY = r"\\\$|\$(\d[\d,]*(?:\.\d+)?)(\s|,\s|\.\s|\.$|[;:!?)]|/[a-z]|$)"
_MATH = r"(?s)\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]"
_TOPIC = r"\\(" + "|".join(sorted(TOPIC_COMMANDS, key=len, reverse=True)) + r")\b"
_MATH_WORDS = _TOPIC + r"|\\(?:text|textbf|textit|mbox|mathrm|operatorname)\{[^{}]*\}"
_COMMAND = r"\\[a-z]+|\\."
_DIGITS = r"[a-z]*[0-9][a-z0-9]*"
_BREAK = "|"  # between two words that are not adjacent in the text (punctuation, a number, math)


def _words(text: pl.Expr, breaks: bool = False) -> pl.Expr:
    """The words of a question. Math mode holds variables (`$y = ax + b$`), so only its topic commands and
    \\text{...} words count; a dollar before an amount (`$5 each`, `\\$5`) is money, not a delimiter.

    With `breaks`, a `|` token stands between words that are not adjacent in the text (so bigrams never span
    punctuation, a number or a formula)."""
    text = text.fill_null("").str.to_lowercase().str.replace_all(_ASY, " ").str.replace_all(_MONEY, " ${1} ${2}")
    math_words = text.str.extract_all(_MATH).list.join(" ").str.extract_all(_MATH_WORDS).list.join(" | ")
    text = pl.concat_str([text.str.replace_all(_MATH, " | "), pl.lit("|"), math_words], separator=" ")
    text = text.str.replace_all(_TOPIC, " ${1} ").str.replace_all(_COMMAND, " ").str.replace_all(_DIGITS, " | ")
    if not breaks:
        return text.str.extract_all(r"[a-z]{2,}")
    return text.str.replace_all(r"[^a-z\s]+", " | ").str.extract_all(r"[a-z]{2,}|\|")


def tokens(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (row, cluster_id, term) occurrence of a content word in `frame`'s question column."""
    words = _words(pl.col("question"))
    out = (
        frame.lazy()
        .with_row_index("row")
        .select("row", "cluster_id", words.alias("term"))
        .explode("term")
        .drop_nulls("term")
        .filter(~pl.col("term").is_in(sorted(stop_words())))
        .with_columns(pl.col("term").replace({"pmod": "mod"}))
    )
    return out.collect()


def bigrams(frame: pl.DataFrame, exclude: set[str] = frozenset()) -> pl.DataFrame:  # type: ignore[assignment]
    """One row per (row, cluster_id, term) occurrence of two adjacent content words ("unit price")."""
    seq = (
        frame.lazy()
        .with_row_index("row")
        .select("row", "cluster_id", _words(pl.col("question"), breaks=True).alias("w"))
        .explode("w")
        .drop_nulls("w")
        .with_columns(pl.col("w").shift(-1).over("row").alias("next"))
        .drop_nulls("next")
    )
    banned = sorted((stop_words() - BIGRAM_WORDS) | set(exclude) | {_BREAK})
    both = ~pl.col("w").is_in(banned) & ~pl.col("next").is_in(banned) & (pl.col("w") != pl.col("next"))
    both = both & ~(pl.col("w").is_in(sorted(BIGRAM_WORDS)) & pl.col("next").is_in(sorted(BIGRAM_WORDS)))
    return (
        seq.filter(both)
        .select("row", "cluster_id", pl.concat_str(["w", "next"], separator=" ").alias("term"))
        .collect()
    )


def proper_nouns(questions: pl.Series, sample: int = 200_000) -> set[str]:
    """Lower-cased words the set writes as names: capitalised mid-sentence more often than in lower case, or
    capitalised every time they occur (at least twice). Read from the text outside math and LaTeX, of a seeded
    sample of `sample` questions on large sets (the names a set uses show up long before that)."""
    if len(questions) > sample:
        questions = questions.sample(n=sample, seed=0)
    text = (
        questions.fill_null("")
        .str.replace_all(_ASY, " ")
        .str.replace_all(_MATH, " ")
        .str.replace_all(r"\\[A-Za-z]+", " ")
        .str.replace_all(r"(^\s*|[.!?]\s+|\n\s*)", "${1}\u00a7")  # marks a sentence start
    )
    words = pl.DataFrame({"w": text.str.extract_all(r"\u00a7?[A-Za-z]{2,}")}).explode("w").drop_nulls()
    stats = (
        words.lazy()
        .with_columns(
            pl.col("w").str.starts_with("\u00a7").alias("start"),
            pl.col("w").str.strip_chars_start("\u00a7").alias("w"),
        )
        .with_columns(pl.col("w").str.contains(r"^[A-Z]").alias("cap"), pl.col("w").str.to_lowercase().alias("lower"))
        .group_by("lower")
        .agg(
            (~pl.col("cap")).sum().alias("n_lower"),
            (pl.col("cap") & ~pl.col("start")).sum().alias("n_mid"),
            pl.col("cap").sum().alias("n_cap"),
        )
        .filter((pl.col("n_mid") > pl.col("n_lower")) | ((pl.col("n_lower") == 0) & (pl.col("n_cap") >= 2)))
        .collect()
    )
    return set(stats["lower"].to_list())


def class_tfidf(
    frame: pl.DataFrame, top_n: int = 8, min_rows: int = 2, min_lift: float = 2.0
) -> dict[int, list[dict[str, Any]]]:
    """Top `top_n` terms of each cluster with their c-TF-IDF weights, best first (ties by term).

    `frame` has cluster_id and question. A term must occur in at least `min_rows` questions, so a single
    question's name or typo does not become a cluster's headline, and must be distinctive for the cluster
    (`min_lift`, module docstring). Proper nouns never count; bigrams do where they help. Every cluster gets
    an entry, an empty list when none of its words survive.
    """
    clusters = frame["cluster_id"].unique().sort().to_list()
    names = proper_nouns(frame["question"])
    found = tokens(frame).filter(~pl.col("term").is_in(sorted(names)))
    pairs = bigrams(frame, names)
    top: dict[int, list[dict[str, Any]]] = {int(c): [] for c in clusters}
    occurrences = pl.concat([found, pairs.with_columns(pl.col("row").cast(found["row"].dtype))])
    used = occurrences.unique(["row", "term"])
    common = used.group_by("term").len("rows").filter(pl.col("rows") >= min_rows)
    if common.is_empty():
        return top
    counts = occurrences.join(common.select("term"), on="term").group_by("cluster_id", "term").len("n")
    words_per_cluster = found.join(common.select("term"), on="term").group_by("cluster_id").agg(pl.len().alias("words"))
    average = words_per_cluster["words"].sum() / len(clusters)  # clusters without words count as 0 words
    rows_per_cluster = frame.group_by("cluster_id").agg(pl.len().alias("size"))
    lift = (
        used.join(common.select("term", "rows"), on="term")
        .group_by("cluster_id", "term")
        .agg(pl.len().alias("rows_c"), pl.col("rows").first())
        .join(rows_per_cluster, on="cluster_id")
        .with_columns(((pl.col("rows_c") / pl.col("size")) / (pl.col("rows") / frame.height)).alias("lift"))
        .select("cluster_id", "term", "lift", "rows_c")
    )
    scored = (
        counts.join(words_per_cluster, on="cluster_id", how="left")
        .with_columns(pl.col("words").fill_null(0).clip(lower_bound=1))
        .with_columns(pl.col("n").sum().over("term").alias("f_t"))
        .with_columns((pl.col("n") / pl.col("words") * (1 + average / pl.col("f_t")).log()).alias("score"))
        .join(lift, on=["cluster_id", "term"])
        .filter(pl.col("lift") >= min_lift)
        .sort(["cluster_id", "score", "term"], descending=[False, True, False])
    )
    for cid, group in scored.group_by("cluster_id", maintain_order=True):
        top[int(cid[0])] = _with_bigrams(group.to_dicts(), top_n)
    return top


def _with_bigrams(ranked: list[dict[str, Any]], top_n: int) -> list[dict[str, Any]]:
    """The best `top_n` terms, a chosen bigram standing in for a unigram of its own that it accounts for in at least
    `REPLACES` of this cluster's questions using it: "right triangle" rather than "triangle" and "right triangle"."""
    rows = {r["term"]: r["rows_c"] for r in ranked}
    chosen: list[dict[str, Any]] = []
    replaced: set[str] = set()
    for r in ranked:
        term = r["term"]
        if term in replaced:
            continue
        if " " in term:
            mine = {w for w in term.split(" ") if w in rows and r["rows_c"] >= REPLACES * rows[w]}
            replaced |= mine
            chosen = [c for c in chosen if c["term"] not in mine]
        chosen.append({"term": term, "score": round(float(r["score"]), 6)})
        if len(chosen) == top_n:
            break
    return chosen


def render_terms_grid(
    terms: dict[int, list[dict[str, Any]]],
    sizes: dict[int, int],
    medians: dict[int, float],
    colors: dict[int, Any],
    title: str,
    max_clusters: int,
) -> bytes:
    """PNG: one cell per cluster (the largest `max_clusters`), its top terms as bars scaled to its best term."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = sorted(sorted(terms, key=lambda c: (-sizes.get(c, 0), c))[:max_clusters])
    n = max(len(shown), 1)
    per_cell = max((len(t) for t in terms.values()), default=1) or 1
    ncols = min(n, max(4, math.ceil(math.sqrt(n))))
    nrows = math.ceil(n / ncols)
    cell_h = 0.32 + 0.2 * per_cell  # inches: a title line, then one line per term
    fig = plt.figure(figsize=(2.4 * ncols, cell_h * nrows + 0.5), dpi=90)
    try:
        ax = fig.add_axes((0.005, 0.005, 0.99, 1 - 0.5 / (cell_h * nrows + 0.5)))
        ax.set_xlim(0, ncols)
        ax.set_ylim(nrows, 0)
        ax.axis("off")
        title_h, line_h = 0.32 / cell_h, 0.2 / cell_h
        for i, cid in enumerate(shown):
            left, top = i % ncols + 0.04, i // ncols
            ax.text(
                left,
                top + title_h * 0.55,
                f"cluster {cid} · {sizes.get(cid, 0)} rows · median {medians.get(cid, float('nan')):.2f}",
                fontsize=8,
                fontweight="bold",
                va="center",
            )
            words = terms[cid]
            if not words:
                ax.text(
                    left + 0.02, top + title_h + line_h * 0.5, "(no terms)", fontsize=8, va="center", color="#777777"
                )
            best = max((w["score"] for w in words), default=1.0) or 1.0
            ys = [top + title_h + line_h * (j + 0.5) for j in range(len(words))]
            ax.barh(
                ys,
                [0.9 * w["score"] / best for w in words],
                left=left,
                height=line_h * 0.8,
                color=colors.get(cid, "#3b6ea8"),
                alpha=0.6,
                linewidth=0,
            )
            for y, w in zip(ys, words, strict=True):
                ax.text(left + 0.02, y, w["term"], fontsize=8, va="center")
        fig.suptitle(title, fontsize=11)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})  # no version stamp: same bytes every run
        return buf.getvalue()
    finally:
        plt.close(fig)
