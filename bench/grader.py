"""The grader's time limit and speed: 16 distinct slow adversarial answers plus ordinary (answer, ground truth)
pairs, graded in the main thread, in a thread pool of 8 (as verl calls its reward) and in freshly started child
processes (fork and spawn, as reward workers are), against the previous reward as the baseline.

    nice -n 10 .venv/bin/python bench/grader.py [--pairs 10000] [--threads 8] [--timeout-s 1.0] [--children 4]
                                              [--baseline-pairs 1000] [--baseline-adversarial] [--smoke]

Ordinary pairs: the ground truths of the packaged eval sets (MATH-500, AIME24, AMC23) and of the GSM8K sample,
each answered right or wrong in the forms models write (the answer itself, ``$…$``, ``x = …``, ``\\dfrac``,
decimals of fractions, thousands separators, units in ``\\text{}``, percentages, full-width digits, another
problem's answer, off by one), inside a completion with some reasoning and an earlier box, seeded.
Adversarial: 16 distinct answers that make sympy run for seconds or forever (huge integral and sum bounds,
``\\Gamma(10^{9})``, ``\\binom{1000000}{500000}``, ``e^{e^{e^{10}}}``, power towers, nested factorials, and
symbolic ones the pre-check lets through and the CPU budget cuts), plus very long junk; each against one ground
truth and against one with six alternatives, all submitted at once to the thread pool.

Reports per context: p50/p99/max seconds per completion (wall time of the call, waiting for a free verifier
included), the slowest case, the reasons, how many completions went over the limit + 0.5 s, and how many
adversarial verdicts differ from the main thread's (a verdict that depends on load). Child processes: the parent
starts its verifier as an entry point does (`start_verifier`), then each child times its first grade (one that
needs math-verify) and then the adversarial answers. Fresh processes: standalone ones that share no verifier
(nothing started, nothing in the environment) each time one first grade (decided without math-verify, needing it
while their own verifier starts, or junk). The last lines: the target (every completion <= limit +
0.5 s in every context) met or not, and the ratio of the baseline's time per ordinary completion to the grader's.
Baseline (run back to back, main thread, ordinary pairs only): the reward before the grader, math-verify in this
process with its own signal timeouts (5 s), which a thread pool cannot use.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ads_core.common import defaults  # noqa: E402
from ads_core.config.eval import GraderConfig  # noqa: E402
from ads_core.evaluation.sets.catalog import packaged_data_dir  # noqa: E402
from ads_core.grading import api, configure, grade  # noqa: E402
from ads_core.grading.api import start_verifier  # noqa: E402
from ads_core.grading.pool import ZYGOTE_ENV, get_pool  # noqa: E402
from ads_core.grading.text import as_number, normalize_answer  # noqa: E402

EXPLODING = ["9^{9^{9^{9}}}", "2^{1000000000}", "((5!)!)!", "10^{-10^{10}}"]
ADVERSARIAL = [
    "\\int_{0}^{10^{100}} e^{x} dx",
    "\\Gamma(10^{9})",
    "\\binom{1000000}{500000}",
    "e^{e^{e^{10}}}",
    *EXPLODING,
    "\\prod_{k=1}^{10^{6}} k",
    "\\sum_{k=1}^{10^{12}} k",
    "\\tan(10^{100})",
    "\\sqrt{10^{100000}}",
    "999!!",
    "((x+1)^{30}+1)^{30}",  # these three pass the pre-check: the CPU budget cuts them
    "\\prod_{k=1}^{900} (x+k)",
    "(x+1)^{999}",
]  # 16 distinct answers
JUNK = ["1+" * 3000 + "1", "\\frac{" * 40 + "1" + "}{2}" * 40, "x" * 20000]
FIRST = ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}")  # a child's first grade: one that needs math-verify
FRESH = [  # a fresh process's first grade (it shares no verifier): decided here, needs math-verify, junk
    ("\\boxed{\\frac{1}{\\frac{1}{2}}}", "2", "right"),
    ("\\boxed{x⁻¹}", "\\frac{1}{x}", "right"),
    ("\\boxed{((x+1)^{30}+1)^{30}}", "1", "wrong"),
]
FRESH_SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ads_core.grading import grade
completion, truth, limit = json.loads(sys.argv[2])
start = time.perf_counter()
got = grade(completion, truth, timeout_s=limit)
print(json.dumps([time.perf_counter() - start, got.correct, got.extracted, got.reason, got.detail]))
"""
ALTERNATIVES = json.dumps(["5", "7", "9", "11", "13", "15"])
FILLER = "Let me think step by step. First we simplify, then we check the cases. A first guess: \\boxed{0}. "


def ground_truths() -> list[str]:
    """Every packaged eval set answer and the GSM8K sample's final answers."""
    truths = []
    for name in ("math500", "aime24", "amc23"):
        for line in (packaged_data_dir() / name / "test.jsonl").read_text().splitlines():
            raw = json.loads(line)["answer"]
            truths.append(str(int(raw)) if isinstance(raw, float) and raw.is_integer() else str(raw))
    for line in Path(defaults.sample_path()).read_text().splitlines():
        truths.append(json.loads(line)["answer"].split("####")[-1].strip().replace(",", ""))
    return truths


def right_forms(truth: str) -> list[str]:
    """Ways a model writes the same answer."""
    forms = [truth, f"${truth}$", truth.replace("\\frac", "\\dfrac"), f" {truth} "]
    if "=" not in truth and "\\in" not in truth:
        forms.append(f"x = {truth}")
    if re.fullmatch(r"-?\d+", truth):
        value = int(truth)
        forms += [f"{value:,}", f"{value}.0", f"{value}\\text{{ dollars}}", f"{value}\\%"]
        forms += [truth.translate(str.maketrans("0123456789", "０１２３４５６７８９")), f"\\frac{{{value * 2}}}{{2}}"]
    m = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", truth)
    if m and int(m.group(2)) in (2, 4, 5, 8, 10, 20, 25, 50):
        num, den = int(m.group(1)), int(m.group(2))
        forms += [str(num / den), f"{num}/{den}", f"{100 * num / den:g}\\%"]
    return [f for f in forms if f.strip()]


def wrong_forms(truth: str, others: list[str], rng: random.Random) -> list[str]:
    """Wrong answers: another problem's answer, off by one, a near miss."""
    same = {normalize_answer(truth), as_number(normalize_answer(truth))} - {None}
    forms = [
        o
        for o in (rng.choice(others), rng.choice(others))
        if not same & {normalize_answer(o), as_number(normalize_answer(o))}
    ]
    if re.fullmatch(r"-?\d+", truth):
        forms += [str(int(truth) + 1), str(-int(truth) if int(truth) else 1), f"{int(truth) + 1}\\%"]
    else:
        forms.append(truth + "+1")
    return [f for f in forms if f != truth]


def ordinary_pairs(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(completion, ground truth, label) with label right/wrong, seeded; half right, half wrong."""
    rng = random.Random(seed)
    truths = ground_truths()
    pairs = []
    while len(pairs) < n:
        truth = rng.choice(truths)
        right = rng.random() < 0.5
        answer = rng.choice(right_forms(truth) if right else wrong_forms(truth, truths, rng))
        completion = FILLER * rng.randint(1, 8) + f"So the answer is $\\boxed{{{answer}}}$."
        pairs.append((completion, truth, "right" if right else "wrong"))
    return pairs


def adversarial_pairs(smoke: bool) -> list[tuple[str, str, str]]:
    answers = (ADVERSARIAL[:4] + ADVERSARIAL[-1:] + JUNK[:1]) if smoke else ADVERSARIAL + JUNK
    return [(f"{FILLER}\\boxed{{{a}}}", truth, "adversarial") for a in answers for truth in ("5", ALTERNATIVES)]


def timed(completion: str, truth: str, limit: float) -> tuple[float, api.Grade]:
    start = time.perf_counter()
    result = grade(completion, truth, timeout_s=limit)
    return time.perf_counter() - start, result


def run(pairs: list[tuple[str, str, str]], limit: float, threads: int) -> list[tuple[float, api.Grade]]:
    """Each pair graded once, cache emptied first (both contexts do the same work)."""
    api._cache.clear()
    if threads <= 1:
        return [timed(c, t, limit) for c, t, _ in pairs]
    with ThreadPoolExecutor(threads) as executor:
        return list(executor.map(lambda p: timed(p[0], p[1], limit), pairs))


def report(name: str, pairs: list[tuple[str, str, str]], results: list[tuple[float, api.Grade]], limit: float) -> int:
    """Print one context's figures; returns how many completions went over the limit + 0.5 s."""
    seconds = [s for s, _ in results]
    q = statistics.quantiles(seconds, n=100, method="inclusive") if len(seconds) > 1 else seconds * 99
    worst = max(range(len(results)), key=lambda i: seconds[i])
    reasons: dict[str, int] = {}
    for _, g in results:
        reasons[g.reason] = reasons.get(g.reason, 0) + 1
    over = sum(s > limit + 0.5 for s in seconds)
    answer = results[worst][1].extracted or ""
    shown = answer if len(answer) <= 60 else answer[:57] + "..."
    print(
        f"{name:<32} n={len(seconds):>6}  p50 {q[49] * 1000:8.2f} ms  p99 {q[98] * 1000:8.2f} ms  "
        f"max {max(seconds):6.3f} s  over limit+0.5 s: {over}"
    )
    print(f"{'':<32} slowest: {shown!r} vs {pairs[worst][1][:40]!r} -> {results[worst][1].reason}")
    print(f"{'':<32} reasons: {', '.join(f'{k} {v}' for k, v in sorted(reasons.items()))}")
    if pairs and pairs[0][2] != "adversarial":
        disagree = [
            (p[0][-60:], p[1][:40], g.reason)
            for p, (_, g) in zip(pairs, results, strict=True)
            if g.correct != (p[2] == "right") and g.reason != "timeout"
        ]
        print(f"{'':<32} verdicts that disagree with the generator's label (timeouts aside): {len(disagree)}")
        for case in disagree[:5]:
            print(f"{'':<32}   {case}")
    return over


def differing(
    name: str, reference: list[api.Grade], results: list[api.Grade], pairs: list[tuple[str, str, str]]
) -> None:
    """How many verdicts differ from the main thread's (each pair graded in both)."""
    diff = [
        f"{(p[0].rsplit('boxed{', 1)[-1][:30])!r}: {a.reason} -> {b.reason}"
        for p, a, b in zip(pairs, reference, results, strict=True)
        if a.reason != b.reason
    ]
    print(f"{'':<32} adversarial verdicts that differ from the main thread's ({name}): {len(diff)}")
    for line in diff[:5]:
        print(f"{'':<32}   {line}")


def child_grades(queue: Any, pairs: list[tuple[str, str, str]], limit: float) -> None:
    """In a fresh child: time its first grade (one that needs math-verify), then every pair, in its main thread."""
    start = time.perf_counter()
    first = grade(FIRST[0], FIRST[1], timeout_s=limit)
    took = time.perf_counter() - start
    queue.put([(took, first), *(timed(c, t, limit) for c, t, _ in pairs)])


def children(method: str, count: int, pairs: list[tuple[str, str, str]], limit: float) -> list[list[Any]]:
    """COUNT children started one after another with METHOD, each returning `child_grades`."""
    ctx = multiprocessing.get_context(method)
    out = []
    for _ in range(count):
        queue = ctx.Queue()
        child = ctx.Process(target=child_grades, args=(queue, pairs, limit))
        child.start()
        out.append(queue.get(timeout=600))
        child.join(60)
    return out


def fresh_first_grades(count: int, limit: float) -> tuple[list[tuple[str, str, str]], list[tuple[float, api.Grade]]]:
    """Each FRESH pair as the first grade of COUNT standalone processes that share no verifier (none started,
    none in the environment): whatever starts the verifier, that call keeps the limit."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != ZYGOTE_ENV}
    root = str(Path(__file__).resolve().parents[1])
    pairs, results = [], []
    for completion, truth, label in FRESH * count:
        args = [sys.executable, "-c", FRESH_SCRIPT, root, json.dumps([completion, truth, limit])]
        out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, check=True)
        took, correct, extracted, reason, detail = json.loads(out.stdout.splitlines()[-1])
        pairs.append((completion, truth, label))
        results.append((took, api.Grade(correct, extracted, reason, detail, took)))
    return pairs, results


def baseline_is_correct(prediction: str, truth: str) -> bool:
    """The reward before the grader (its essentials): string-equal after normalisation, else math-verify in
    this process with its signal timeouts of 5 s (main thread only)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    if normalize_answer(prediction) == normalize_answer(truth):
        return True
    cfg = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    try:
        gold = parse(f"\\boxed{{{truth}}}", extraction_config=cfg, parsing_timeout=5)
        pred = parse(f"\\boxed{{{prediction}}}", extraction_config=cfg, parsing_timeout=5)
        return bool(gold and pred and verify(gold, pred, timeout_seconds=5))
    except Exception:  # noqa: BLE001
        return False


def baseline(pairs: list[tuple[str, str, str]]) -> list[float]:
    from ads_core.grading.text import extract_answer

    seconds = []
    for completion, truth, _ in pairs:
        start = time.perf_counter()
        answer = extract_answer(completion)
        if answer is not None:
            baseline_is_correct(answer, truth)
        seconds.append(time.perf_counter() - start)
    return seconds


PEAK = """
import sys
from ads_cli.main import app
try:
    app(["grade", *sys.argv[1:]])
except SystemExit as exc:
    code = exc.code
for line in open("/proc/self/status"):
    if line.startswith(("VmHWM", "VmRSS")):
        print(line.strip(), file=sys.stderr)
sys.exit(code)
"""


def memory(megabytes: float, seed: int) -> None:
    """`ads grade` on a JSONL file of MEGABYTES (ordinary completions, padded to ~4 kB each): its own peak
    resident memory (VmHWM, the verifier processes not included) against the file's size and against the same
    command on a 1-row file (the interpreter and libraries)."""
    import os
    import subprocess
    import tempfile

    rows = ordinary_pairs(max(1, int(megabytes * 1e6 / 4200)), seed)
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for name, count in (("one row", 1), ("input", len(rows))):
            src = Path(folder) / f"{count}.jsonl"
            with src.open("w") as fh:
                for completion, truth, _ in rows[:count]:
                    padded = FILLER * 40 + completion
                    fh.write(json.dumps({"completion": padded, "answer": truth}) + "\n")
            out = subprocess.run(
                [sys.executable, "-c", PEAK, str(src), "--out", str(Path(folder) / f"{count}.parquet")],
                capture_output=True,
                text=True,
                cwd=str(Path(__file__).resolve().parents[1]),
            )
            peak = int(next(line.split()[1] for line in out.stderr.splitlines() if line.startswith("VmHWM"))) / 1024
            results[name] = (os.path.getsize(src) / 2**20, peak)
            print(f"ads grade, {name:<8} {count:>7} rows  {results[name][0]:8.1f} MiB in  peak RSS {peak:8.1f} MiB")
    (size, peak), (_, base) = results["input"], results["one row"]
    above = (peak - base) / size
    print(f"peak / input: {peak / size:.2f}x; above the 1-row run: {above:.2f}x the input (target <= 3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="Ordinary (answer, ground truth) pairs.")
    parser.add_argument("--threads", type=int, default=8, help="Thread pool size (verl uses a pool too).")
    parser.add_argument("--timeout-s", type=float, default=GraderConfig().timeout_s, help="The grader's limit.")
    parser.add_argument("--children", type=int, default=4, help="Child processes per start method (fork, spawn).")
    parser.add_argument("--baseline-pairs", type=int, default=1000, help="Ordinary pairs the baseline grades.")
    parser.add_argument("--baseline-adversarial", action="store_true", help="Also time the baseline on EXPLODING.")
    parser.add_argument(
        "--memory-mb", type=float, default=0.0, help="Only measure `ads grade`'s peak memory on a JSONL of this size."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes: runs in seconds (for tests).")
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.threads, args.baseline_pairs, args.children = 200, 2, 20, 1
        args.timeout_s = min(args.timeout_s, 0.3)
    if args.memory_mb:
        memory(args.memory_mb, args.seed)
        return
    configure(GraderConfig(timeout_s=args.timeout_s))
    limit = args.timeout_s

    start = time.perf_counter()
    start_verifier()  # as an entry point does: children share it (not counted below)
    print(f"verifier start: {time.perf_counter() - start:.2f} s; limit {limit:g} s; pool {api.pool_size()} processes")
    trips = []
    for _ in range(20 if args.smoke else 500):
        start = time.perf_counter()
        get_pool(api.pool_size()).ask({"pairs": []}, limit, time.monotonic() + limit)  # the round trip alone
        trips.append(time.perf_counter() - start)
    print(f"verifier round trip (an empty request): p50 {statistics.median(trips) * 1000:.3f} ms")
    ordinary = ordinary_pairs(args.pairs, args.seed)
    adversarial = adversarial_pairs(args.smoke)
    over = 0
    main_adversarial: list[api.Grade] = []
    for threads, context in ((1, "main thread"), (args.threads, f"thread pool ({args.threads})")):
        over += report(f"ordinary, {context}", ordinary, run(ordinary, limit, threads), limit)
        results = run(adversarial, limit, threads)
        over += report(f"adversarial, {context}", adversarial, results, limit)
        if threads == 1:
            main_adversarial = [g for _, g in results]
        else:
            differing(context, main_adversarial, [g for _, g in results], adversarial)
    pool = get_pool(api.pool_size())
    print(f"verifier processes killed at their budget: {pool.killed}; extra workers forked in bursts: {pool.extra}")
    child_ordinary = ordinary[:50]
    for method in ("fork", "spawn"):
        runs = children(method, args.children, [*adversarial, *child_ordinary], limit)
        firsts = [r[0] for r in runs]
        over += report(f"child ({method}), first grade", [(*FIRST, "right")] * len(firsts), firsts, limit)
        rest = [pair for r in runs for pair in r[1 : 1 + len(adversarial)]]
        over += report(f"adversarial, child ({method})", adversarial * len(runs), rest, limit)
        differing(f"child ({method})", main_adversarial * len(runs), [g for _, g in rest], adversarial * len(runs))
    fresh_pairs, fresh = fresh_first_grades(args.children, limit)
    over += report("fresh process, first grade", fresh_pairs, fresh, limit)
    verdict = "met" if over == 0 else f"NOT met ({over} over)"
    print(f"target: every completion <= {limit + 0.5:g} s (limit + 0.5 s) in every context: {verdict}")

    sample = ordinary[: args.baseline_pairs]
    base = baseline(sample)
    ours = [s for s, _ in run(sample, limit, 1)]
    q = statistics.quantiles(base, n=100, method="inclusive")
    print(
        f"{'baseline (old reward), main':<32} n={len(base):>6}  p50 {q[49] * 1000:8.2f} ms  p99 {q[98] * 1000:8.2f} ms"
    )
    if args.baseline_adversarial:
        for answer in EXPLODING:
            start = time.perf_counter()
            baseline_is_correct(answer, "5")
            print(f"baseline on {answer!r}: {time.perf_counter() - start:.2f} s")
    print(f"ratio baseline / grader, mean time per ordinary completion: {sum(base) / sum(ours):.2f}x")


if __name__ == "__main__":
    main()
