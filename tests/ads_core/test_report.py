"""The report stage: c-TF-IDF cluster terms (no names, no words common to most clusters, bigrams), the problems
nearest each centroid, agreement with the source's own labels (NMI), the t-SNE map, deterministic PNGs, and
what write_report lists."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from ads_core import storage
from ads_core.config.build import BuildConfig, ReportConfig
from ads_core.stages.report import stage as report
from ads_core.stages.report.terms import bigrams, class_tfidf, proper_nouns, stop_words, tokens
from ads_core.storage import manifest as mf

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOPICS = {  # cluster_id -> its two topic words, in templates that are otherwise alike
    0: ("triangle", "angle"),
    1: ("apples", "dollars"),
    2: ("train", "speed"),
}
FILLER = [
    r"Find the value of $x$ if the {a} has {n} and \frac{{{n}}}{{2}} garden {b} garden.",
    r"Compute \boxed{{{n}}}: what is the {a} of the {b} in the garden? Let $y = {n}$, garden.",
    r"Given {n} {a}s, determine how many {b} the garden has. Express \left( {n} \right) garden.",
]
LATEX_WORDS = {"frac", "boxed", "left", "right", "find", "compute", "value", "given", "determine", "express"}


def questions(rows_per_cluster: int, seed: int = 0) -> list[tuple[int, str]]:
    """Synthetic questions: every cluster uses the same filler, LaTeX, numbers and 'garden' (twice per question,
    more often than any topic word), and only its own topic words."""
    rng = np.random.default_rng(seed)
    out = []
    for cid, (a, b) in TOPICS.items():
        for _ in range(rows_per_cluster):
            template = FILLER[int(rng.integers(len(FILLER)))]
            out.append((cid, template.format(a=a, b=b, n=int(rng.integers(1, 500)))))
    return out


def frame(rows: list[tuple[int, str]]) -> Any:
    import polars as pl

    return pl.DataFrame({"cluster_id": [c for c, _ in rows], "question": [q for _, q in rows]})


def test_class_tfidf_ranks_each_clusters_own_words_first():
    top = class_tfidf(frame(questions(20)), top_n=8)
    assert sorted(top) == sorted(TOPICS)
    for cid, words in TOPICS.items():
        ranked = [t["term"] for t in top[cid]]
        # "garden" is twice as frequent in every cluster as a topic word: plain TF would put it first
        assert set(ranked[:2]) == set(words), (cid, ranked)
        assert all(w not in ranked for other, ws in TOPICS.items() if other != cid for w in ws)
        scores = [t["score"] for t in top[cid]]
        assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert all(t["term"] != "garden" or t["score"] < top[c][1]["score"] for c in top for t in top[c])


def test_stop_words_latex_and_numbers_never_become_terms():
    top = class_tfidf(frame(questions(15)), top_n=30, min_rows=1)
    terms = {t["term"] for words in top.values() for t in words}
    assert terms, "some content words must survive"
    assert all(re.fullmatch(r"[a-z]{2,}( [a-z]{2,})?", t) for t in terms), terms  # a word, or two (a bigram)
    words = {w for t in terms if " " not in t for w in t.split()}
    stops = stop_words()
    assert not words & stops and not words & LATEX_WORDS, words & (stops | LATEX_WORDS)
    # a topic-naming command stays as a word; other commands, delimiters, [asy] code and numbers go
    found = tokens(
        frame(
            [
                (
                    0,
                    r"Let $\sin x = \frac{3}{4}$ and \binom{5}{2}; 12th x2 "
                    r"[asy] draw((0,0)--(1,1)); label(\"walrus\"); [/asy] hexagon",
                )
            ]
        )
    )
    assert sorted(found["term"].to_list()) == ["binom", "hexagon", "sin"]


def test_math_mode_holds_variables_but_dollars_without_latex_are_money():
    latex = r"If $ax^2 + bx = 0$ in $\triangle ABC$ with area $5\text{ acres}$, the farm costs \$5 for goats."
    money = "Janet sells eggs for $2 each, ducks for $5.50, and $1,000 of goods at $18/hour at the market."
    latex += r" If $10x^2-x-24$ is $(Ax-8)(Bx+3),$ then $5,$ and $3.$ hold."
    found = tokens(frame([(0, latex), (1, money)]))
    terms = {cid: sorted(found.filter(found["cluster_id"] == cid)["term"].to_list()) for cid in (0, 1)}
    assert terms == {
        0: ["acres", "area", "costs", "farm", "goats", "hold", "triangle"],
        1: ["ducks", "eggs", "goods", "hour", "janet", "market", "sells"],
    }


def test_a_term_must_be_used_by_min_rows_questions():
    rows = questions(5) + [(0, "Quokka; triangle angle")]  # "quokka" occurs in one question only
    assert "quokka" in [t["term"] for t in class_tfidf(frame(rows), top_n=30, min_rows=1)[0]]
    assert "quokka" not in [t["term"] for t in class_tfidf(frame(rows), top_n=30, min_rows=2)[0]]


def test_names_are_not_topics_and_neither_are_words_every_cluster_uses():
    """GSM8K-like questions: every cluster has the same people and money words; only its own things differ."""
    people = ["Tim", "James", "Natalia", "Weng"]
    things = {0: ("cookies", "oven"), 1: ("marbles", "jar"), 2: ("miles", "bike")}
    rows = []
    for cid, (a, b) in things.items():
        for i in range(24):
            name = people[i % 4]
            rows.append(
                (cid, f"{name} buys {a} at the store. The {a} cost money. How much money does {name} spend on {b}s?")
            )
            rows.append((cid, f"At noon {name} has {i + 3} {a} and a {b}. How many {a} will {name} have in a week?"))
    assert {"tim", "james", "natalia", "weng"} <= proper_nouns(frame(rows)["question"])
    assert not {"cookies", "money", "store", "week"} & proper_nouns(frame(rows)["question"])
    top = class_tfidf(frame(rows), top_n=8)
    for cid, (a, b) in things.items():
        ranked = [t["term"] for t in top[cid]]
        assert a in ranked and f"{b}s" in ranked, (cid, ranked)  # its own things
        assert not {"tim", "james", "natalia", "weng"} & set(ranked), ranked  # no names
        assert not {"money", "store", "cost", "spend", "week", "noon"} & set(ranked), ranked  # in every cluster


def test_bigrams_name_a_cluster_where_they_help():
    rows = []
    for i in range(20):
        rows.append((0, f"The unit price of tea is ${i + 2}. A box holds {i} bags; find the unit price of a bag."))
        rows.append(
            (1, f"A right triangle has legs {i} and {i + 1}. Is the right triangle isosceles? Each leg, a side.")
        )
        rows.append((2, f"A square has side {i}. Its triangle, price, and unit. What is the area of the square?"))
    top = class_tfidf(frame(rows), top_n=4)
    assert "unit price" in [t["term"] for t in top[0]], top[0]
    assert "right triangle" in [t["term"] for t in top[1]], top[1]
    # the bigram stands in for the unigram it accounts for ("triangle" is always "right triangle" in cluster 1)
    assert "triangle" not in [t["term"] for t in top[1]]
    # no bigram across punctuation, a number or a formula: "bags; find", "$5. A" are not pairs
    pairs = set(bigrams(frame(rows))["term"].to_list())
    assert "unit price" in pairs and not any(p.startswith(("bags ", "tea box")) for p in pairs), pairs


def write_inputs(
    base: Path, rows_per_cluster: int = 100, hidden: int = 24, with_manifest: bool = True, subjects: bool = False
) -> dict[str, str]:
    """A final artifact, assignments and scores like the build's, with embeddings that separate the clusters."""
    import polars as pl

    rng = np.random.default_rng(1)
    rows = questions(rows_per_cluster, seed=2)
    n = len(rows)
    ids = rng.permutation(np.arange(1000, 1000 + n))  # sample_ids not in row order
    clusters = np.array([c for c, _ in rows])
    centres = rng.normal(size=(len(TOPICS), hidden)) * 4
    emb = (centres[clusters] + rng.normal(size=(n, hidden))).astype(np.float32)
    difficulty = rng.gamma(2.0, 0.5, n) + clusters
    ranks = (
        pl.DataFrame({"i": range(n), "c": clusters, "d": difficulty})
        .with_columns(pl.col("d").rank("ordinal").over("c").cast(pl.Int64).alias("r") - 1)["r"]
        .to_numpy()
    )
    info = [{"question": q, "index": i} for i, (_, q) in enumerate(rows)]
    if subjects:  # the source's own labels: cluster c is subject c, except every 5th row of it
        for i, row in enumerate(info):
            subject = ["Geometry", "Prealgebra", "Algebra"][(clusters[i] + (i % 5 == 0)) % 3]
            row["source_meta"] = json.dumps({"subject": subject, "level": int(i % 5) + 1})
    final = pa.table(
        {
            "sample_id": pa.array(ids, pa.int64()),
            "cluster_id": pa.array(clusters, pa.int32()),
            "rank_in_cluster": pa.array(ranks, pa.int64()),
            "difficulty": difficulty,
            "extra_info": pa.array(info),
        }
    )
    uris = {
        "final": str(base / "final" / "train.parquet"),
        "assignments": str(base / "clusters" / "assignments.parquet"),
        "scores": str(base / "scores" / "scores.parquet"),
    }
    storage.write_parquet(uris["final"], final)
    distance = np.linalg.norm(emb - centres[clusters], axis=1).astype(np.float32)
    storage.write_parquet(
        uris["assignments"],
        pa.table(
            {
                "sample_id": final["sample_id"],
                "cluster_id": final["cluster_id"],
                "distance_to_centroid": distance,
                "pc1": emb[:, 0],
                "pc2": emb[:, 1],
            }
        ),
    )
    order = np.argsort(-ids)  # scores in yet another order
    storage.write_parquet(
        uris["scores"],
        pa.table(
            {
                "sample_id": pa.array(ids[order], pa.int64()),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb[order].reshape(-1)), hidden),
            }
        ),
    )
    if with_manifest:
        mf.write(
            str(base / "final"),
            mf.Manifest(
                stage="sort",
                inputs={"scores": mf.input_entry(uris["scores"])},
                outputs={"train": mf.output_entry(uris["final"])},
                config={},
                code_version="test",
            ),
        )
    return uris


def write_report(uris: dict[str, str], out: str, cfg: ReportConfig) -> mf.Manifest:
    """The report stage's library call, into OUT/report/ (decontamination has its own tests)."""
    directory = str(Path(out) / "report")
    return report.write_report(
        uris["final"], uris["assignments"], uris["scores"], directory, cfg.replaced(decontaminate=False), "synth"
    )


def png_info(data: bytes) -> tuple[tuple[int, int], dict[str, Any]]:
    assert data[:8] == PNG_MAGIC
    with Image.open(io.BytesIO(data)) as image:
        image.load()  # decodes every pixel: a truncated or corrupt file fails here
        return image.size, dict(image.info)


def test_write_report_lists_every_file_it_writes_and_is_byte_deterministic(tmp_path: Path):
    uris = write_inputs(tmp_path / "in")
    cfg = ReportConfig()
    outputs = []
    for name in ("a", "b"):
        manifest = write_report(uris, str(tmp_path / name), cfg)
        directory = tmp_path / name / "report"
        assert {p.name for p in directory.iterdir()} == {Path(e["uri"]).name for e in manifest.outputs.values()} | {
            "manifest.json"
        }
        assert mf.verify(str(directory)) is not None  # every listed hash matches its file
        outputs.append({k: Path(e["uri"]).read_bytes() for k, e in manifest.outputs.items()})
    assert outputs[0] == outputs[1]
    assert set(outputs[0]) == {"plot", "quantiles", "examples", "terms", "terms_plot", "topics"}
    assert manifest.inputs["scores"]["uri"] == uris["scores"]  # found through the final artifact's manifest
    assert manifest.counts == {"rows": 300, "clusters": 3, "map_rows": 300}
    for key in ("plot", "terms_plot"):
        (width, height), info = png_info(outputs[0][key])
        assert width > 400 and height > 100 and "Software" not in info
    terms = storage.read_json(manifest.output_uri("terms"))
    assert {k: set(t["term"] for t in v[:2]) for k, v in terms.items()} == {str(c): set(w) for c, w in TOPICS.items()}
    topics = storage.read_json(manifest.output_uri("topics"))
    assert topics["labels"] is None and "label_agreement" not in manifest.extra  # the rows carry no labels


def test_representatives_are_the_problems_nearest_each_centroid(tmp_path: Path):
    import polars as pl

    uris = write_inputs(tmp_path / "in", rows_per_cluster=20)
    manifest = write_report(uris, str(tmp_path / "o"), ReportConfig(representatives=2))
    topics = storage.read_json(manifest.output_uri("topics"))
    assignments = pl.read_parquet(uris["assignments"])
    for cid in TOPICS:
        nearest = assignments.filter(pl.col("cluster_id") == cid).sort("distance_to_centroid")["sample_id"][:2]
        assert [r["sample_id"] for r in topics["representatives"][str(cid)]] == nearest.to_list()
        assert all(TOPICS[cid][0] in r["question"] for r in topics["representatives"][str(cid)])
    examples = Path(manifest.output_uri("examples")).read_text()
    assert examples.count("**nearest the centroid**") == 2 * len(TOPICS)


def test_agreement_with_the_sources_own_labels_is_reported_as_nmi(tmp_path: Path):
    from sklearn.metrics import normalized_mutual_info_score

    uris = write_inputs(tmp_path / "in", rows_per_cluster=20, subjects=True)
    manifest = write_report(uris, str(tmp_path / "o"), ReportConfig())
    agreement = manifest.extra["label_agreement"]
    final = report.read_final_for_report(uris["final"])
    labels = [__import__("json").loads(m)["subject"] for m in final["source_meta"]]
    expected = normalized_mutual_info_score(labels, final["cluster_id"].to_list())
    assert agreement["column"] == "subject" and agreement["values"] == 3 and agreement["rows"] == 60
    assert agreement["nmi"] == pytest.approx(expected, abs=1e-4) and 0.3 < agreement["nmi"] < 1  # 4 in 5 agree
    topics = storage.read_json(manifest.output_uri("topics"))
    assert topics["labels"]["top"]["0"] == {"value": "Geometry", "share": 0.8}
    assert "NMI **" in Path(manifest.output_uri("examples")).read_text()


def test_map_separates_clusters_that_the_embeddings_separate(tmp_path: Path):
    """If the map lost the join between embeddings and rows, nearest neighbours would be of any cluster."""
    uris = write_inputs(tmp_path)
    final = report.read_final_for_report(uris["final"])
    points, method = report.map_points(final, uris["scores"], ReportConfig())
    assert method == "t-SNE" and points.height == final.height
    xy = points.select("x", "y").to_numpy()
    dist = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(dist, np.inf)
    labels = points["cluster_id"].to_numpy()
    assert (labels[dist.argmin(1)] == labels).mean() > 0.95


def test_map_uses_a_seeded_sample_of_map_sample_rows(tmp_path: Path):
    uris = write_inputs(tmp_path)
    final = report.read_final_for_report(uris["final"])
    cfg = ReportConfig(map_sample=40)
    first, _ = report.map_points(final, uris["scores"], cfg)
    again, _ = report.map_points(final.reverse(), uris["scores"], cfg)  # row order does not change the sample
    other, _ = report.map_points(final, uris["scores"], ReportConfig(map_sample=40, map_seed=7))
    assert first.height == 40 and first["sample_id"].to_list() == again["sample_id"].to_list()
    assert first["sample_id"].to_list() != other["sample_id"].to_list()
    assert set(first["sample_id"].to_list()) <= set(final["sample_id"].to_list())
    manifest = write_report(uris, str(tmp_path / "o"), cfg)
    assert manifest.counts["map_rows"] == 40


def test_missing_scores_and_missing_embeddings_are_clear_errors(tmp_path: Path):
    uris = write_inputs(tmp_path, rows_per_cluster=10, with_manifest=False)
    Path(uris["scores"]).rename(tmp_path / "elsewhere.parquet")
    with pytest.raises(FileNotFoundError, match=re.escape(uris["scores"])):
        write_report(uris, str(tmp_path), ReportConfig())
    partial = storage.read_parquet(str(tmp_path / "elsewhere.parquet")).slice(0, 20)
    storage.write_parquet(uris["scores"], partial)
    with pytest.raises(ValueError, match=r"scores\.parquet: 10 sample_id\(s\) of the final artifact have no embedding"):
        write_report(uris, str(tmp_path), ReportConfig())


def test_terms_grid_draws_at_most_terms_grid_clusters(tmp_path: Path):
    uris = write_inputs(tmp_path, rows_per_cluster=10)
    sizes = []
    for cap in (1, 3):
        manifest = write_report(uris, str(tmp_path / str(cap)), ReportConfig(terms_grid_clusters=cap))
        sizes.append(png_info(Path(manifest.output_uri("terms_plot")).read_bytes())[0])
    assert sizes[0][0] < sizes[1][0]


def test_publish_shows_cluster_terms_as_a_table_and_an_inline_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import base64

    from ads_prefect.tasks import publish as pub

    uris = write_inputs(tmp_path, rows_per_cluster=10)
    manifest = write_report(uris, str(tmp_path), ReportConfig())
    made: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(pub, "create_table_artifact", lambda key, table, description: made.update({key: table}))
    monkeypatch.setattr(
        pub, "create_markdown_artifact", lambda key, markdown, description: made.update({key: markdown})
    )
    monkeypatch.setattr(pub, "get_run_logger", lambda: __import__("logging").getLogger("test"))
    from ads_core.stages.base import StageContext
    from ads_core.stages.report.stage import STAGE

    ctx = StageContext(source="", out=str(tmp_path), dataset="synth", config=BuildConfig(), layout={})
    for item in STAGE.ui(ctx, manifest):
        pub.render(item, "synth")
    keys = ("difficulty-quantiles", "cluster-examples", "report-plot", "cluster-terms", "cluster-terms-image")
    assert {f"ads-synth-{k}" for k in keys} <= set(made)
    table = made["ads-synth-cluster-terms"]
    quantiles = storage.read_json(manifest.output_uri("quantiles"))
    assert [r["cluster_id"] for r in table] == [0, 1, 2] and [r["size"] for r in table] == [10, 10, 10]
    assert [r["median_difficulty"] for r in table] == [q["q50"] for q in quantiles]
    assert all(set(r["top_terms"].split(", ")[:2]) == set(TOPICS[r["cluster_id"]]) for r in table)
    assert all(TOPICS[r["cluster_id"]][0] in r["nearest_the_centroid"] for r in table)
    for key, output in (("ads-synth-cluster-terms-image", "terms_plot"), ("ads-synth-report-plot", "plot")):
        markdown = made[key]
        assert "file://" not in markdown
        inline = markdown.split("data:image/png;base64,", 1)[1].split(")", 1)[0]
        assert base64.b64decode(inline) == Path(manifest.output_uri(output)).read_bytes()


def test_report_writes_the_section_when_the_source_has_a_level(tmp_path: Path):
    import json

    from scipy.stats import spearmanr

    uris = write_inputs(tmp_path / "in", rows_per_cluster=20, subjects=True)  # level = i % 5 + 1 in source_meta
    scores = storage.read_parquet(uris["scores"])
    tokens = np.arange(scores.num_rows, dtype=np.int32) % 7 + 3
    storage.write_parquet(uris["scores"], scores.append_column("n_target_tokens", [tokens]))
    directory = str(tmp_path / "o" / "report")
    manifest = report.write_report(
        uris["final"], uris["assignments"], uris["scores"], directory, ReportConfig(decontaminate=False), "synth"
    )
    section = storage.read_json(manifest.output_uri("validity"))
    final = report.with_target_tokens(report.read_final_for_report(uris["final"]), uris["scores"])
    level = [json.loads(m)["level"] for m in final["source_meta"]]
    difficulty = final["difficulty"].to_numpy()
    expected_mean = spearmanr(difficulty, level).statistic
    expected_sum = spearmanr(difficulty * final["n_target_tokens"].to_numpy(), level).statistic
    rows = {(r["measure"], r["against"]): r for r in section["spearman"]}
    assert section["scored"] == "nll_mean" and set(rows) == {
        ("nll_mean", "level"),
        ("nll_mean", "nll_sum"),
        ("nll_sum", "level"),
    }
    assert rows[("nll_mean", "level")]["rho"] == pytest.approx(expected_mean, abs=1e-4)
    assert rows[("nll_sum", "level")]["rho"] == pytest.approx(expected_sum, abs=1e-4)
    assert rows[("nll_mean", "level")]["n"] == 60
    assert section["clusters"] == {"label": "subject", "nmi": manifest.extra["label_agreement"]["nmi"], "values": 3}
    assert "## Difficulty validity" in Path(manifest.output_uri("examples")).read_text()
    assert manifest.extra["difficulty_validity"] == {
        "scored": "nll_mean",
        "spearman": {
            "nll_mean vs level": rows[("nll_mean", "level")]["rho"],
            "nll_sum vs level": rows[("nll_sum", "level")]["rho"],
        },
        "between_measures": {"nll_mean vs nll_sum": rows[("nll_mean", "nll_sum")]["rho"]},
    }


def test_the_report_names_the_difficulty_the_final_manifest_records(tmp_path: Path):
    """Regression (issue 53): a build that scored nll_sum called its difficulty "token-mean NLL" in examples.md,
    the plot's title and the UI's quantile table."""
    from ads_core.stages.base import StageContext
    from ads_core.stages.report.stage import STAGE

    uris = write_inputs(tmp_path / "in", rows_per_cluster=10)
    final_dir = str(tmp_path / "in" / "final")
    recorded = mf.read(final_dir)
    recorded.extra["difficulty_measure"] = "nll_sum"
    mf.write(final_dir, recorded)
    directory = str(tmp_path / "o" / "report")
    cfg = ReportConfig(decontaminate=False)
    manifest = report.write_report(uris["final"], uris["assignments"], uris["scores"], directory, cfg, "synth")
    assert manifest.extra["difficulty_measure"] == "nll_sum"  # the record, not the caller's default (nll_mean)
    examples = Path(manifest.output_uri("examples")).read_text()
    assert "(difficulty = nll_sum, summed NLL of the reference solution, under the policy model)" in examples
    ctx = StageContext(source="", out=str(tmp_path), dataset="synth", config=BuildConfig(), layout={})
    titles = {item.key: item.description for item in STAGE.ui(ctx, manifest)}
    assert titles["difficulty-quantiles"] == (
        "difficulty quantiles per cluster (nll_sum, summed NLL of the reference solution)"
    )
    assert not any("token-mean" in text for text in (examples, *titles.values()))
