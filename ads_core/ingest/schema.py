"""The conversion's fixed shapes: prompt templates, reject reasons, and the output and rejects schemas.

verl's GRPO reader expects exactly OUTPUT_SCHEMA's top-level columns; extra_info carries provenance.
"""

from __future__ import annotations

from typing import get_args

import pyarrow as pa

from ads_core.common.contract import REJECTS_SCHEMA  # noqa: F401 - the format stage writes it (see the contract)
from ads_core.config.build import FormatConfig, TemplateName

TEMPLATES: dict[str, str] = {
    # The ADS reference's wording: the instruction line, the question, and an opened think tag.
    "ads_think": "Please reason step by step, and put your final answer within \\boxed{}.\n\n{question}\n\n<think>",
    "boxed": "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}.",
    "plain": "{question}",
}
assert set(TEMPLATES) == set(get_args(TemplateName)), "one template per FormatConfig.template choice"


def template_string(cfg: FormatConfig) -> str:
    """The prompt template rows are written with: `template_text` when given, else the named one."""
    return cfg.template_text if cfg.template_text is not None else TEMPLATES[cfg.template]


REJECT_REASONS = (
    "missing_question",
    "missing_answer",
    "duplicate",
    "too_long",
    "bad_type",
    "bad_encoding",
    "bad_json",
    "bad_quote",
    "bad_row",
)

PROMPT_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
EXTRA_INFO_TYPE = pa.struct(
    [
        ("index", pa.int64()),
        ("sample_id", pa.int64()),
        ("question", pa.string()),
        ("solution", pa.string()),
        ("answer", pa.string()),
        ("split", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("source_id", pa.string()),
        ("source_meta", pa.string()),
    ]
)
OUTPUT_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", PROMPT_TYPE),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", EXTRA_INFO_TYPE),
        ("sample_id", pa.int64()),
    ]
)
