"""The verifier process: math-verify on (prediction, gold) pairs, read as JSON lines on stdin.

It runs in its own process so that the parent can stop it at the time limit whatever it is doing (sympy's
big-integer arithmetic ignores signals, and math-verify's own timeouts need the main thread). Started by
`ads_core.grading.pool`; one request at a time:

    -> {"pairs": [[prediction, gold], ...]}
    <- {"match": true|false}             (true when any pair is equivalent)
    <- {"match": false, "error": "..."}  (math-verify raised on every pair it tried)

Nothing but this protocol is written to the pipe: stdout is redirected to stderr before math-verify loads.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from functools import lru_cache
from typing import Any

READY = {"ready": True}


@lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[Any, ...]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    cfg = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return tuple(parse(f"\\boxed{{{text}}}", extraction_config=cfg, parsing_timeout=None))


def equivalent(prediction: str, gold: str) -> bool:
    """math-verify's verdict, without its (main-thread only) timeouts: the parent enforces the limit."""
    from math_verify import verify

    parsed_gold, parsed_pred = _parse(gold), _parse(prediction)
    if not parsed_gold or not parsed_pred:
        return False
    return bool(verify(list(parsed_gold), list(parsed_pred), timeout_seconds=None))


def answer(request: dict[str, Any]) -> dict[str, Any]:
    errors = []
    for prediction, gold in request["pairs"]:
        try:
            if equivalent(str(prediction), str(gold)):
                return {"match": True}
        except Exception as exc:  # noqa: BLE001 - junk input must not end the worker
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    if errors and len(errors) == len(request["pairs"]):
        return {"match": False, "error": errors[0]}
    return {"match": False}


def main() -> None:
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)  # math-verify warns once that its timeouts are off: we know
    import math_verify  # noqa: F401 - loaded before "ready", so boot time never counts against a request

    _parse("1")  # warm the LaTeX parser too
    proto.write(json.dumps(READY).encode() + b"\n")
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            reply = answer(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            reply = {"match": False, "error": f"bad request: {exc}"[:200]}
        proto.write(json.dumps(reply).encode() + b"\n")


if __name__ == "__main__":
    main()
