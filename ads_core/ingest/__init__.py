"""Reading any source file into verl-schema rows: the format conversion, with rejects that account for every row.
It is not a stage: the build's format stage (`ads_core.stages.format`), `ads format` and the eval sets
(`ads_core.evaluation.sets.writer`, which training planning, `ads eval` and the report stage call) all convert with
`convert.format_dataset` / `convert.write_formatted`. `sources` names a SOURCE's files; `readers`, `csv_rows` and
`arrow` read them into `records`; `evidence` and `detect` find each column's role; `rows` and `values` turn a row
into question, solution and answer, or a reject; `schema` holds the templates and the output and rejects schemas.
"""
