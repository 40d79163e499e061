"""Extension points are declared, never patched: no module outside ``ads_core/sampler`` sets, changes or deletes an
attribute of a sampler object. A trainer meets a kind's needs through the sampler protocol (what it provides for a
declared need reaches the factory, ``build_sampler(..., provided=...)``) or an explicit method of the sampler; a
sampler's own methods set its own attributes (``self.x = ...`` is never flagged). Likewise the TRL loop hands its
trainer everything through the constructor: no module of ``ads_core/train/trl`` sets an attribute on a trainer.

Read from the source with ``ast``. A sampler object is an expression named like one (``sampler``,
``train_sampler``, ``trainer.feed.sampler``), a name bound to a sampler's construction (``s = DotsSampler(...)``,
``build_sampler(...)``, ``make_sampler()``) or to another sampler (``s = feed.sampler``), or a name annotated with a
sampler type (``s: Sampler``); a trainer object likewise, with "trainer" for "sampler". Flagged: ``x.attr = ...``,
``x.attr += ...``, ``x.attr: T = ...``, ``del x.attr``, ``x.__dict__[...] = ...``, ``setattr(x, ...)``,
``object.__setattr__(x, ...)`` and ``delattr(x, ...)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("ads_core", "ads_prefect", "ads_cli", "bench")
OWNER = REPO / "ads_core" / "sampler"  # the samplers' own package
TRL = REPO / "ads_core" / "train" / "trl"  # the TRL loop: run_trl and the trainer's parts
SETTERS = ("setattr", "__setattr__", "delattr", "__delattr__")


def _names_in(node: ast.AST) -> list[str]:
    """The names of a call's callee, outermost first: ``kinds.build_sampler`` -> [build_sampler, kinds]."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names


def _makes(value: ast.AST, word: str) -> bool:
    """An object made (``XSampler(...)``, ``XSampler.from_parquet(...)``, ``build_sampler(...)``) or taken from
    another object (``feed.sampler``), WORD being the kind of object (``sampler``)."""
    if isinstance(value, ast.Call):
        return any(word in n.lower() for n in _names_in(value.func))
    return isinstance(value, ast.Attribute) and word in value.attr.lower()


def _typed(annotation: ast.AST | None, word: str) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and word in node.id.lower():
            return True
        if isinstance(node, ast.Attribute) and word in node.attr.lower():
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and word in node.value.lower():
            return True
    return False


def _bound(tree: ast.AST, word: str) -> set[str]:
    """Names the module binds to such an object anywhere (assignment from one, or an annotation naming one)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _makes(node.value, word):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if _typed(node.annotation, word) or (node.value is not None and _makes(node.value, word)):
                bound.add(node.target.id)
        elif isinstance(node, ast.arg) and _typed(node.annotation, word):
            bound.add(node.arg)
    return bound - {"self", "cls"}


def sampler_patches(source: str, word: str = "sampler") -> list[tuple[int, str]]:
    """(line, what) of every attribute of a sampler object (a WORD object) that SOURCE sets, changes or deletes."""
    tree = ast.parse(source)
    bound = _bound(tree, word)

    def is_sampler(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id not in ("self", "cls") and (word in node.id.lower() or node.id in bound)
        if isinstance(node, ast.Attribute):
            return word in node.attr.lower()
        return isinstance(node, ast.Call) and _makes(node, word)

    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                if isinstance(t, ast.Attribute) and is_sampler(t.value):
                    found.append((node.lineno, ast.unparse(t)))
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute):
                    if t.value.attr == "__dict__" and is_sampler(t.value.value):
                        found.append((node.lineno, ast.unparse(t)))
        if isinstance(node, ast.Call) and node.args:
            callee = _names_in(node.func)
            if callee and callee[0] in SETTERS and is_sampler(node.args[0]):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_scan_finds_every_way_of_patching_a_sampler():
    source = """
from ads_core.sampler.dots.sampler import DotsSampler
def attach(trainer, make):
    sampler = trainer.feed.sampler
    sampler.rollout = make(trainer)
    trainer.feed.sampler.rollout = None
    s = DotsSampler([0], [0])
    s.rollout = len
    s.steps += 1
    del s.steps
    built = kinds.build_sampler("dots", [0], [0], None, 1)
    built.__dict__["x"] = 1
    setattr(train_sampler, "step_of", len)
    object.__setattr__(sampler, "x", 1)
def typed(s: Sampler, t: "ADSSampler"):
    s.p = None
    t.r: float = 0.0
"""
    assert [line for line, _ in sampler_patches(source)] == [5, 6, 8, 9, 10, 12, 13, 14, 16, 17]


def test_the_scan_leaves_an_objects_own_attributes_and_other_objects_alone():
    source = """
class FeedbackSampler:
    def __init__(self, sampler):
        self.sampler = sampler
        self.draws = 0
    def load(self, fresh):
        self.sampler = fresh
        self.draws += 1
def other(trainer, cfg, feed):
    trainer.feed = feed
    cfg.sampler_kind = "ads"
    sampler_cfg = cfg
    setattr(trainer, "feed", feed)
    feed.sampler.follow_steps(len)
"""
    assert sampler_patches(source) == []


def test_no_module_outside_the_sampler_package_patches_a_sampler():
    """Today nothing does: DOTS's reference rollouts reach its sampler through the factory (the need
    ``reference_rollouts``), verl's train sampler learns the trainer's step through ``follow_steps``."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for package in SCANNED
        for path in sorted((REPO / package).rglob("*.py"))
        if not path.is_relative_to(OWNER)
        for line, what in sampler_patches(path.read_text())
    ]
    assert found == []


def test_the_trl_loop_hands_its_trainer_everything_through_the_constructor():
    """run_trl made the trainer and then set its horizon, resume point, identity and rotation on it, and the hooks
    and reference rollouts wrote its fields; now all of that is ``ADSGRPOTrainer(...)``'s arguments."""
    assert [line for line, _ in sampler_patches("trainer = make()\ntrainer.run_id = 'r'\n", "trainer")] == [2]
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in sorted(TRL.rglob("*.py"))
        for line, what in sampler_patches(path.read_text(), "trainer")
    ]
    assert found == []
