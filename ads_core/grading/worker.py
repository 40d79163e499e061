"""The verifier processes: math-verify on (prediction, gold) pairs, read as JSON lines from a socket.

They run in processes of their own so that the pool can stop one at its limit whatever it is doing
(sympy's big-integer arithmetic ignores signals, and math-verify's own timeouts need the main thread). The pool
(`ads_core.grading.pool`) starts one zygote (`ads_core.common.procs.Zygote`), which forks the workers; one
request at a time:

    -> {"pairs": [[prediction, gold], ...], "cpu_s": 1.0}
    <- {"match": true|false}             (true when any pair is equivalent)
    <- {"match": false, "error": "..."}  (math-verify raised on every pair it tried)

Nothing but this protocol is written to the socket; stdout goes to stderr.
"""

from __future__ import annotations

import contextlib
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


WARM_UP = [
    ("1", "2"),
    ("\\frac{1}{2}", "0.5"),
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("x^2+1", "(x+1)^2"),
    ("(2,\\infty)", "[2,\\infty)"),
    ("3.14", "\\pi"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)"),
    ("x=2, x=-3", "2, -3"),
    ("\\text{B}", "B"),
    ("9", "\\left[ \\frac{\\pi}{8}, \\frac{5 \\pi^2}{4} \\right]"),
    ("1+274i", "\\sin(\\theta)"),
    ("(0,9) \\cup (9,36)", "\\{1, 2\\}"),
]  # one of each shape: sympy's first use of each is slow, and every worker is forked from this warm state


def serve(reader: Any, writer: Any) -> None:
    """Answer requests, one JSON line each, until the other end closes.

    A request's ``cpu_s`` arms the kernel's CPU limit a little past it (SIGXCPU ends the process whatever it
    does): a worker whose asker died, and so can no longer stop it, still stops by itself."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    for line in reader:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request.get("cpu_s"):
                used = resource.getrusage(resource.RUSAGE_SELF)
                soft = int(used.ru_utime + used.ru_stime + float(request["cpu_s"])) + 2
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))
            reply = answer(request)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reply = {"match": False, "error": f"bad request: {exc}"[:200]}
        writer.write(json.dumps(reply).encode() + b"\n")
        writer.flush()


def _die_with(parent: int) -> None:
    """Ask the kernel for SIGKILL when the thread that started us ends; exit if PARENT is already gone."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _same_user(conn: Any) -> bool:
    import socket
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


def zygote(fd: int, parent: int) -> None:
    """Load and warm math-verify once, then fork a ready worker for every byte a client sends.

    Clients: the process that started us (over the socket pair FD, our lifeline: when it closes, we exit), and any
    process of the same user that connects to our abstract Unix socket (a child of our parent sharing us). Each
    worker gets one end of a new socket pair; the other end goes back to the asker with the worker's pid
    (SCM_RIGHTS). Forking a warm process takes milliseconds where starting Python and sympy takes seconds, and
    its first verdicts are as fast as later ones, so a worker killed at the limit costs little.
    """
    import secrets
    import selectors
    import signal
    import socket

    os.dup2(2, 1)  # stray prints from libraries must not reach anyone
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)  # math-verify warns once that its timeouts are off: we know
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed workers are reaped by the kernel
    _die_with(parent)  # first: the pool's process may already be gone
    lifeline = socket.socket(fileno=fd)
    for prediction, gold in WARM_UP:
        with contextlib.suppress(Exception):
            equivalent(prediction, gold)
    address = f"ads-grader-{os.getpid()}-{secrets.token_hex(8)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)  # abstract: nothing to clean up; same-user check on each connection
    listener.listen(64)
    lifeline.sendall(json.dumps({**READY, "address": address}).encode() + b"\n")
    me = os.getpid()
    selector = selectors.DefaultSelector()
    selector.register(lifeline, selectors.EVENT_READ)
    selector.register(listener, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            sock = key.fileobj
            if sock is listener:
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    if _same_user(conn):
                        selector.register(conn, selectors.EVENT_READ)
                    else:
                        conn.close()
                continue
            try:
                wanted = sock.recv(1)
            except OSError:
                wanted = b""
            if not wanted:
                if sock is lifeline:
                    os._exit(0)
                selector.unregister(sock)
                sock.close()
                continue
            ours, theirs = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                for other in [k.fileobj for k in selector.get_map().values()]:
                    other.close()
                ours.close()
                _die_with(me)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                serve(theirs.makefile("rb"), theirs.makefile("wb"))
                os._exit(0)
            theirs.close()
            with contextlib.suppress(OSError):  # the asker gave up (its deadline): the worker sees EOF and exits
                socket.send_fds(sock, [f"{pid}\n".encode()], [ours.fileno()])
            ours.close()


if __name__ == "__main__":
    zygote(int(sys.argv[1]), int(sys.argv[2]))
