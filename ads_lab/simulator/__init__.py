"""`ads simulate`: the synthetic GRPO learners (``learners``, a model, not evidence about LLMs) and the comparison
of the samplers on them (``run``)."""
