"""How many automatically made wrong versions of each code exercise's reference does its checker refuse?

    python scripts/exercise_mutants.py [--exercise KEY ...] [--limit N] [--seed S] [--write docs/results/exercise-mutants.md]

For every ``CodeExercise`` whose reference is a plain function (a class is skipped, and the report says so), the
reference's own source is changed one small thing at a time with Python's ``ast`` (the operators are listed in
``OPERATORS``): each change is a *mutant*, compiled in the reference's module namespace under the reference's name,
so that it sees the same helpers. No list of mistakes anyone thought of is involved.

A mutant that computes what the reference computes is not a wrong version at all. So each mutant is first run on a
battery of inputs, larger than the checker's: the exercise's own cases (its teaching cases and those drawn from its
domain), the same cases drawn again with other seeds (where they come from seeded generators), and copies whose
numbers are perturbed in ways that keep what the inputs promise (signs, zeros, probabilities that sum to 1). A mutant that gives the reference's outputs on all
of them, within the checker's tolerance, is counted *equivalent* and set aside; one that differs somewhere, or
raises, is *kept*. Each kept mutant is then given to ``check(key, mutant)``, as a learner's function would be:
*refused* when check says it is wrong, *survived* when check accepts it. A survivor is a wrong function, shown wrong
by an input, that the checker's battery lets through.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import datetime
import inspect
import linecache
import os
import platform
import random
import shlex
import subprocess
import sys
import textwrap
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

STARTED = time.perf_counter()  # the run's time includes importing haaw
os.environ.setdefault("HAAW_PROGRESS", "off")  # the checks below are no learner's attempts: keep no progress file
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's haaw, not an installed one

import numpy as np  # noqa: E402

from haaw.course.exercises import REGISTRY, CodeExercise, check  # noqa: E402
from haaw.course.exercises import code as _code  # noqa: E402
from haaw.course.exercises.registry import CORRECT, WRONG  # noqa: E402
from haaw.course.exercises.watchdog import TimeLimit  # noqa: E402
from haaw.engine import guard  # noqa: E402

OPERATORS = {  # the name a mutant is listed under: what it changes
    "arithmetic": "one of + − * / ** replaced by another (in an expression or an augmented assignment)",
    "operands swapped": "the two sides of a − b, a / b, a ** b or a @ b exchanged",
    "comparison": "< ↔ <=, > ↔ >=, < ↔ >, == ↔ !=, is ↔ is not, in ↔ not in",
    "constant": "0 → 1, 1 → 0 or 2, 0.5 → 2, any other number n → n + 1, True ↔ False",
    "axis": "axis= or dim= changed among 0, 1 and -1, or dropped",
    "keepdims dropped": "keepdims=... removed from a call",
    "term dropped": "a + b or a − b reduced to one of its terms",
    "accumulation dropped": "x += y (or −=, *=, /=) made x = y",
    "arguments swapped": "two neighbouring positional arguments of a call exchanged",
    "transpose": ".T (or np.swapaxes / transpose) removed, or .T added to an operand of @ or to a returned value",
    "reduction swapped": "sum ↔ mean, max ↔ min, maximum ↔ minimum",
    "sign dropped": "a unary minus or a `not` removed",
    "in-place write": "the first array argument changed in place at the start (`x *= 1`, or `x[0] *= 1` for a list)",
    "returns an input": "a return statement made to return one of the function's arguments",
}
REPEATS = 4  # how many times cases() is drawn again with other seeds, where it is seeded
PERTURBATIONS = 3  # randomly perturbed copies of every case (and one scaled up, one down, one zeroed)
SPREAD = 0.3  # how far a perturbation moves a number: a factor exp(0.3·N(0, 1)), or as much in log-odds
BATTERY_SECONDS = 3.0  # a mutant still running the battery after this long counts as differing (it runs forever)

_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_COMPARE = {ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt),
            ast.GtE: (ast.Gt, ast.LtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,),
            ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,), ast.NotIn: (ast.In,)}
_REDUCTIONS = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin", "amin": "amax",
               "maximum": "minimum", "minimum": "maximum", "nansum": "nanmean", "nanmean": "nansum"}
_AXES = ("axis", "dim")


# --- making mutants -------------------------------------------------------------------------------------------
@dataclass
class Mutant:
    operator: str  # a key of OPERATORS
    where: str  # "nb04.py:118", the reference's line that was changed
    change: str  # the one-line diff: "…G * (1 - y * y)… → …G * (1 + y * y)…"
    source: str  # the whole mutated function
    fn: Callable | None = None
    differs_on: str = ""  # the first input of the battery it differs on ("" for an equivalent mutant)
    how: str = ""  # "other numbers", "raises ValueError", ...
    status: str = ""  # check's verdict on a kept mutant
    message: str = ""  # the first line of check's message
    seconds: float = 0.0  # how long that check took

    @property
    def kept(self) -> bool:
        return bool(self.differs_on)

    def line(self) -> str:
        return f"[{self.operator}] {self.where}: {self.change}"


def _body_nodes(fdef: ast.FunctionDef) -> list:
    """Every node of the function's body (not its signature, decorators or docstring), in a fixed order."""
    body = fdef.body[1:] if _docstring(fdef) else fdef.body
    return [node for statement in body for node in ast.walk(statement)]


def _docstring(fdef) -> bool:
    first = fdef.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _parents(tree) -> dict:
    found = {}
    for node in ast.walk(tree):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        found[id(item)] = (node, name, i)
            elif isinstance(value, ast.AST):
                found[id(value)] = (node, name, None)
    return found


def _number_alternatives(value) -> list:
    if value == 0:
        new = [1]
    elif value == 1:
        new = [0, 2]
    elif value == 0.5:
        new = [2]
    else:
        new = [value + 1]
    return [type(value)(n) for n in new]


def _is_np(node) -> bool:
    return isinstance(node, ast.Name) and node.id in ("np", "numpy")


def _transposed(node):
    return ast.Attribute(value=node, attr="T", ctx=ast.Load())


def _sites(fdef: ast.FunctionDef):
    """(operator, index of the node in _body_nodes, transform): transform(node) -> the node that replaces it."""
    nodes = _body_nodes(fdef)
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    # numbers that are an axis= or keepdims= value are the axis and keepdims operators' to change
    spoken_for = {id(n) for node in nodes if isinstance(node, ast.keyword) and node.arg in (*_AXES, "keepdims")
                  for n in ast.walk(node.value)}
    in_strings = {id(n) for node in nodes if isinstance(node, ast.JoinedStr) for n in ast.walk(node)}
    for i, node in enumerate(nodes):
        if id(node) in in_strings:
            continue
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, _ARITH):
            for op in _ARITH:
                if not isinstance(node.op, op):
                    yield "arithmetic", i, lambda n, op=op: _with(n, op=op())
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Div, ast.Pow, ast.MatMult)):
            yield "operands swapped", i, lambda n: _with(n, left=n.right, right=n.left)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            yield "term dropped", i, lambda n: n.left
            yield "term dropped", i, lambda n: n.right if isinstance(n.op, ast.Add) else ast.UnaryOp(ast.USub(), n.right)
        if isinstance(node, ast.AugAssign) and isinstance(node.op, _ARITH):
            yield "accumulation dropped", i, lambda n: ast.Assign(targets=[_load_to_store(n.target)], value=n.value,
                                                                  lineno=n.lineno)
        if isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                for alternative in _COMPARE.get(type(op), ()):
                    yield "comparison", i, lambda n, j=j, a=alternative: _with(
                        n, ops=[a() if k == j else o for k, o in enumerate(n.ops)])
        if isinstance(node, ast.Constant) and id(node) not in spoken_for:
            if isinstance(node.value, bool):
                yield "constant", i, lambda n: ast.Constant(not n.value)
            elif isinstance(node.value, (int, float)):
                for new in _number_alternatives(node.value):
                    yield "constant", i, lambda n, new=new: ast.Constant(new)
        if isinstance(node, ast.Call):
            yield from _call_sites(i, node)
        if isinstance(node, ast.Attribute) and node.attr == "T" and isinstance(node.ctx, ast.Load):
            yield "transpose", i, lambda n: n.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            yield "transpose", i, lambda n: _with(n, left=_transposed(n.left))
            yield "transpose", i, lambda n: _with(n, right=_transposed(n.right))
        if isinstance(node, ast.Return) and node.value is not None:
            for p in params:
                yield "returns an input", i, lambda n, p=p: ast.Return(value=ast.Name(p, ast.Load()))
            parts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for j, part in enumerate(parts):
                if isinstance(part, ast.Name):
                    yield "transpose", i, lambda n, j=j: _with(n, value=_returned_transposed(n.value, j))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            yield "sign dropped", i, lambda n: n.operand


def _call_sites(i, node):
    for j, kw in enumerate(node.keywords):
        if kw.arg in _AXES:
            value = _axis_value(kw.value)
            for new in (0, 1, -1):
                if new != value:
                    yield "axis", i, lambda n, j=j, new=new: _with(n, keywords=[
                        ast.keyword(k.arg, _number(new)) if m == j else k for m, k in enumerate(n.keywords)])
        if kw.arg in (*_AXES, "keepdims"):
            yield ("axis" if kw.arg in _AXES else "keepdims dropped"), i, lambda n, j=j: _with(
                n, keywords=[k for m, k in enumerate(n.keywords) if m != j])
    if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
        for j in range(len(node.args) - 1):
            yield "arguments swapped", i, lambda n, j=j: _with(
                n, args=[*n.args[:j], n.args[j + 1], n.args[j], *n.args[j + 2:]])
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _REDUCTIONS:
        yield "reduction swapped", i, lambda n: _with(n, func=_with(n.func, attr=_REDUCTIONS[n.func.attr]))
    elif isinstance(func, ast.Name) and func.id in ("max", "min"):
        yield "reduction swapped", i, lambda n: _with(n, func=ast.Name(_REDUCTIONS[n.func.id], ast.Load()))
    if isinstance(func, ast.Attribute) and func.attr in ("swapaxes", "transpose"):
        if _is_np(func.value) and node.args:
            yield "transpose", i, lambda n: n.args[0]
        elif not _is_np(func.value):
            yield "transpose", i, lambda n: n.func.value


def _returned_transposed(value, j):
    """The returned value with .T on its j-th part (the value itself, if it is not a tuple)."""
    if not isinstance(value, ast.Tuple):
        return _transposed(value)
    return _with(value, elts=[_transposed(e) if k == j else e for k, e in enumerate(value.elts)])


def _axis_value(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    return None


def _number(n):
    return ast.UnaryOp(ast.USub(), ast.Constant(-n)) if n < 0 else ast.Constant(n)


def _with(node, **fields):
    """A shallow copy of ``node`` with some fields replaced."""
    new = copy.copy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


def _load_to_store(target):
    target = copy.deepcopy(target)
    target.ctx = ast.Store()
    return target


def _mutated(fdef, index, transform):
    tree = copy.deepcopy(fdef)
    target = _body_nodes(tree)[index]
    parent, name, position = _parents(tree)[id(target)]
    new = transform(target)
    if position is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[position] = new
    return tree


def _in_place(fdef, example_args):
    """The first array argument changed in place as the function starts: `x *= 1`, or `x[0] *= 1` for a list of
    arrays. Which argument holds an array is read off the exercise's first case; None if none does."""
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    for name, value in zip(params, example_args):
        if isinstance(value, np.ndarray):
            target = ast.Name(name, ast.Store())
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
            target = ast.Subscript(ast.Name(name, ast.Load()), ast.Constant(0), ast.Store())
        else:
            continue
        tree = copy.deepcopy(fdef)
        start = 1 if _docstring(tree) else 0
        tree.body.insert(start, ast.AugAssign(target=target, op=ast.Mult(), value=ast.Constant(1)))
        return tree, fdef.body[start].lineno
    return None


def _one_line(before: str, after: str, context: int = 24) -> str:
    """The first changed line of ``before`` and ``after`` (two sources), trimmed to the change and a little around."""
    old, new = before.splitlines(), after.splitlines()
    k = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    if len(new) > len(old) and (k >= len(old) or old[k] == new[k + 1]):
        return f"+ `{new[k].strip()}`"
    a, b = old[k].strip() if k < len(old) else "", new[k].strip() if k < len(new) else ""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    left = a[max(0, p - context):p]
    right = a[len(a) - s:len(a) - s + context]
    dots_left = "…" if p > context else ""
    dots_right = "…" if s > context else ""

    def show(text):
        return f"`{dots_left}{left}{text}{right}{dots_right}`"

    return f"{show(a[p:len(a) - s])} → {show(b[p:len(b) - s])}"


def reference_of(ex: CodeExercise):
    """The reference as a learner would type it (the course wraps it to refuse it), or None if it is a class."""
    fn = guard.unguarded(ex.reference)
    return None if isinstance(fn, type) else fn


def mutants(ex: CodeExercise) -> list[Mutant]:
    """Every mutant of the exercise's reference, compiled in its module's namespace; the same list every time."""
    original = reference_of(ex)
    lines, first = inspect.getsourcelines(original)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    fdef = tree.body[0]
    fdef.decorator_list = []  # the course's @refusable marks are not the learner's
    before = ast.unparse(fdef)
    where = Path(inspect.getsourcefile(original)).name
    made, seen = [], {before}
    candidates = [(op, lambda i=i, t=t: _mutated(fdef, i, t), _body_nodes(fdef)[i]) for op, i, t in _sites(fdef)]
    cases = ex.cases()
    placed = _in_place(fdef, cases[0].args if cases else ())
    if placed:
        candidates.append(("in-place write", lambda: placed[0], placed[1]))
    for operator, build, node in candidates:
        try:
            after = ast.unparse(ast.fix_missing_locations(build()))
        except Exception:  # a change the tree cannot hold
            continue
        if after in seen:
            continue
        seen.add(after)
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        made.append(Mutant(operator, f"{where}:{first + line - 1}", _one_line(before, after), after))
    return made


def compile_mutant(ex: CodeExercise, mutant: Mutant, number: int):
    """The mutant as a function, defined in a copy of the reference's module namespace under the reference's name."""
    original = reference_of(ex)
    filename = f"<mutant {number} of {ex.key}>"
    source = mutant.source + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # its lines, for messages
    namespace = dict(original.__globals__)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[original.__name__]


# --- the battery ----------------------------------------------------------------------------------------------
@dataclass
class Probe:
    label: str
    args: tuple
    expected: tuple  # the reference's outputs on these arguments
    scaled: bool | None = None  # compared at each output's own scale, as check compares the case it comes from


@contextlib.contextmanager
def _reseeded(offset: int):
    """np.random.default_rng(seed) gives the generator of seed + offset; yields the seeds it was asked for."""
    original, asked = np.random.default_rng, []

    def default_rng(seed=None, *args, **kwargs):
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            asked.append(seed)
            seed = int(seed) + offset
        return original(seed, *args, **kwargs)

    np.random.default_rng = default_rng
    try:
        yield asked
    finally:
        np.random.default_rng = original


def _perturb(value, rng, factor=1.0, zero=False):
    """(a perturbed copy of ``value``, whether anything changed).

    Floats move by a random factor exp(0.3·N(0, 1)), times ``factor``: signs and zeros stay. An array all of whose
    numbers lie between 0 and 1, or a number strictly between them (probabilities, masks, betas, learning rates),
    moves in log-odds instead and stays there (0 and 1 stay too), and rows that summed to 1 sum to 1 again; ``factor``
    leaves them alone. Booleans in an array or a list flip one time in five. With ``zero``, every float array that
    is not of that kind becomes zeros instead (a zero gradient). Integers, strings, None and functions stay as they
    are: they are counts, shapes, class ids, options and graph builders."""
    if isinstance(value, np.ndarray):
        if value.dtype == bool and value.size:
            if zero:
                return value, False
            flips = rng.random(value.shape) < 0.2
            return value ^ flips, bool(flips.any())
        if value.dtype.kind != "f" or value.size == 0:
            return value, False
        v = value.astype(np.float64)
        finite = np.isfinite(v)
        if np.all((v[finite] >= 0) & (v[finite] <= 1)):
            if zero:
                return value, False
            inside = finite & (v > 0) & (v < 1)
            logit = np.log(np.where(inside, v, 0.5) / (1 - np.where(inside, v, 0.5)))
            moved = 1 / (1 + np.exp(-(logit + SPREAD * rng.standard_normal(v.shape))))
            new = np.where(inside, moved, v)
            sums = v.sum(axis=-1, keepdims=True)
            if v.ndim and np.allclose(sums, 1, atol=1e-6):
                new = new / new.sum(axis=-1, keepdims=True)
        elif zero:
            new = np.zeros_like(v)
        else:
            new = np.where(finite, v * factor * np.exp(SPREAD * rng.standard_normal(v.shape)), v)
        new = new.astype(value.dtype)
        return new, not np.array_equal(new, value, equal_nan=True)
    if isinstance(value, (float, np.floating)) and not isinstance(value, bool):
        if zero or not np.isfinite(value) or value == 0:
            return value, False
        if 0 < value < 1:
            logit = np.log(value / (1 - value)) + SPREAD * rng.standard_normal()
            return type(value)(1 / (1 + np.exp(-logit))), True
        return type(value)(value * factor * np.exp(SPREAD * rng.standard_normal())), True
    if isinstance(value, list) and value and all(isinstance(v, (bool, np.bool_)) for v in value):
        if zero:
            return value, False
        flipped = [bool(v) ^ (rng.random() < 0.2) for v in value]
        return flipped, flipped != [bool(v) for v in value]
    if isinstance(value, (list, tuple)):
        parts = [_perturb(v, rng, factor, zero) for v in value]
        items = [p for p, _ in parts]
        return (items if isinstance(value, list) else tuple(items)), any(c for _, c in parts)
    if isinstance(value, dict):
        parts = {k: _perturb(v, rng, factor, zero) for k, v in value.items()}
        return {k: p for k, (p, _) in parts.items()}, any(c for _, c in parts.values())
    return value, False


PERTURBED = (  # (what the probe is called, _perturb's keywords): PERTURBATIONS of the first, one of each other
    ("perturbed", {}),
    ("scaled up ×100", {"factor": 100.0}),
    ("scaled down ×0.01", {"factor": 0.01}),
    ("its float arrays zeroed", {"zero": True}),
)


def _runner(ex: CodeExercise):
    return ex.run or (lambda f, *args: f(*_code._copies(args)))


def _outputs(ex, run, fn, args, *, learner=True) -> tuple:
    """``fn``'s outputs on a copy of ``args``, as the checker reads them (it raises what the checker would refuse).
    A learner's function runs as check runs it, with the exercise's shortcuts (its reference among them) refused."""
    result = run(_code._on_its_own(ex, fn) if learner else fn, *copy.deepcopy(args))
    return _code._as_outputs(result, ex.outputs, len(ex.outputs))


def battery(ex: CodeExercise, seed: int = 0, repeats: int = REPEATS, perturbations: int = PERTURBATIONS):
    """(the inputs the reference runs on, with its outputs; a few words on what they are)."""
    inputs = [(c.label, c.args, c.scaled) for c in ex.all_cases()]
    drawn = 0
    for k in range(1, repeats + 1):
        with _reseeded(1_000_003 * (seed + 1) + 7919 * k) as asked:
            again = ex.all_cases()
        if not asked:  # the cases draw nothing at random: drawing them again gives the same cases
            break
        inputs += [(f"{c.label}, drawn again ({k})", c.args, c.scaled) for c in again]
        drawn = k
    rng = np.random.default_rng([seed, zlib.crc32(ex.key.encode())])
    perturbed = 0
    for label, args, scaled in list(inputs):
        for kind, how in PERTURBED:
            for j in range(perturbations if kind == "perturbed" else 1):
                new, changed = _perturb(args, rng, **how)
                if changed:
                    inputs.append((f"{label}, {kind}" + (f" ({j + 1})" if kind == "perturbed" else ""), new, scaled))
                    perturbed += 1
    run, probes = _runner(ex), []
    with _quiet():
        for label, args, scaled in inputs:
            try:
                probes.append(Probe(label, args, _outputs(ex, run, ex.reference, args, learner=False), scaled))
            except Exception:  # the reference itself cannot take these (a negative base to a fractional power)
                continue
    cases, teaching = len(ex.all_cases()), len(ex.cases())
    what = (f"{cases} cases" + (f" ({cases - teaching} from its domain)" if cases > teaching else "")
            + (f", drawn {drawn} more times" if drawn else ", not seeded")
            + (f", {perturbed} perturbed" if perturbed else ", nothing to perturb"))
    return probes, what


@contextlib.contextmanager
def _quiet():
    """Mutants divide by zero and overflow: NumPy's warnings are not what is measured here (and under pytest a
    warning from code in a haaw module's namespace would become an error, which check would then count)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            yield


def _how(mine: np.ndarray, expected: np.ndarray) -> str:
    """How an output of a mutant differs from the reference's, in a few words."""
    if mine.shape != expected.shape:
        return f"gives shape {mine.shape}, not {expected.shape}"
    m, e = mine.astype(np.float64), expected.astype(np.float64)
    if np.any(~np.isfinite(m) & np.isfinite(e)):
        return "gives nan or inf where the reference is finite"
    if np.any(np.isfinite(m) & ~np.isfinite(e)):
        return "gives finite numbers where the reference gives nan or inf"
    both = np.isfinite(m) & np.isfinite(e)
    worst = np.max(np.abs(m - e)[both] / np.maximum(np.abs(e)[both], 1e-300), initial=0.0)
    return f"gives other numbers, off by up to {worst:.2g} relative"


def _first_difference(ex, run, fn, probes) -> tuple[str, str]:
    """(the label of the first probe where ``fn`` differs from the reference, how), or ("", "") if on none."""
    limit = TimeLimit(BATTERY_SECONDS, spare=(__file__,))
    try:
        with limit:
            for probe in probes:
                try:
                    mine = _outputs(ex, run, fn, probe.args)
                except Exception as err:
                    return probe.label, f"raises {type(err).__name__}" if not isinstance(
                        err, _code.LearnerError) else "is refused by the exercise's runner"
                tolerances = _code._tolerances(ex, _code.Case(probe.label, probe.args, scaled=probe.scaled),
                                               probe.expected)
                for m, e, tolerance in zip(mine, probe.expected, tolerances):
                    if not _code._same(m, e, *tolerance):
                        return probe.label, _how(m, e)
    except limit.expired:
        limit.stop()
        return "the battery", f"runs longer than {BATTERY_SECONDS:g} s"
    return "", ""


# --- measuring ------------------------------------------------------------------------------------------------
@dataclass
class Result:
    key: str
    possible: int = 0  # mutants the operators can make
    made: list = field(default_factory=list)  # the ones tried (all of them, or --limit of them at random)
    probes: int = 0
    battery: str = ""
    seconds: float = 0.0
    skipped: str = ""  # why the exercise was not measured

    @property
    def kept(self) -> list:
        return [m for m in self.made if m.kept]

    @property
    def equivalent(self) -> list:
        return [m for m in self.made if not m.kept]

    @property
    def refused(self) -> list:
        return [m for m in self.kept if m.status != CORRECT]

    @property
    def survived(self) -> list:
        return [m for m in self.kept if m.status == CORRECT]

    @property
    def slowest_check(self) -> float:
        return max((m.seconds for m in self.kept), default=0.0)


def measure(ex: CodeExercise, limit: int | None = None, seed: int = 0) -> Result:
    """Make the exercise's mutants (``limit`` of them at random), keep those that differ from the reference on
    the battery, and run check on each kept one."""
    start = time.perf_counter()
    result = Result(ex.key)
    if reference_of(ex) is None:
        result.skipped = f"its reference is a class ({guard.unguarded(ex.reference).__name__}), not a function"
        return result
    everything = mutants(ex)
    result.possible = len(everything)
    chosen = list(range(len(everything)))
    if limit is not None and limit < len(chosen):
        random.Random(zlib.crc32(f"{seed} {ex.key}".encode())).shuffle(chosen)
        chosen = sorted(chosen[:limit])
    probes, result.battery = battery(ex, seed)
    result.probes = len(probes)
    if not probes:  # every mutant would look equivalent
        raise RuntimeError(f"{ex.key}: the reference raised on every input of the battery")
    run = _runner(ex)
    before = dict(_code._passed)  # a survivor passes check, which remembers it: forget it again afterwards
    try:
        with _quiet():
            for number in chosen:
                mutant = everything[number]
                try:
                    mutant.fn = compile_mutant(ex, mutant, number)
                except Exception:  # a change Python will not compile
                    continue
                result.made.append(mutant)
                mutant.differs_on, mutant.how = _first_difference(ex, run, mutant.fn, probes)
                if not mutant.kept:
                    continue
                t = time.perf_counter()
                feedback = check(ex.key, mutant.fn)
                mutant.seconds = time.perf_counter() - t
                mutant.status = feedback.status
                mutant.message = feedback.message.strip().splitlines()[0] if feedback.message.strip() else ""
    finally:
        _code._passed.clear()
        _code._passed.update(before)
    result.seconds = time.perf_counter() - start
    return result


def exercises(keys=()) -> list[CodeExercise]:
    found = [ex for ex in REGISTRY.values() if isinstance(ex, CodeExercise)]
    if keys:
        unknown = sorted(set(keys) - {ex.key for ex in found})
        if unknown:
            raise SystemExit(f"no code exercise called {', '.join(unknown)}; they are: "
                             f"{', '.join(ex.key for ex in found)}")
        found = [ex for ex in found if ex.key in keys]
    return found


# --- the report -----------------------------------------------------------------------------------------------
def table(results: list[Result]) -> str:
    rows = ["| exercise | possible | made | equivalent | kept | refused | survived | slowest check | battery |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if r.skipped:
            rows.append(f"| `{r.key}` | – | – | – | – | – | – | – | skipped: {r.skipped} |")
            continue
        rows.append(f"| `{r.key}` | {r.possible} | {len(r.made)} | {len(r.equivalent)} | {len(r.kept)} | "
                    f"{len(r.refused)} | {len(r.survived)} | {r.slowest_check * 1000:.0f} ms | "
                    f"{r.probes} inputs: {r.battery} |")
    measured = [r for r in results if not r.skipped]
    rows.append(f"| all | {sum(r.possible for r in measured)} | {sum(len(r.made) for r in measured)} | "
                f"{sum(len(r.equivalent) for r in measured)} | {sum(len(r.kept) for r in measured)} | "
                f"{sum(len(r.refused) for r in measured)} | {sum(len(r.survived) for r in measured)} | "
                f"{max((r.slowest_check for r in measured), default=0) * 1000:.0f} ms | |")
    return "\n".join(rows)


# Survivors that are as right as the reference, each with the reason: (exercise, text of the changed line) -> why.
# (04-clip-grad-norm's max_norm / (norm - 1e-06) was listed here until its domain drew gradients whose norm is under
# 1e-6: there the factor is negative, and the check refuses it.)
AS_RIGHT: dict = {}


def _as_right(key: str, mutant) -> str:
    return next((why for (k, text), why in AS_RIGHT.items() if k == key and text in mutant.line()), "")


def survivors(results: list[Result]) -> str:
    lines = []
    for r in results:
        if not r.survived:
            continue
        lines += ["", f"`{r.key}`, {len(r.survived)} of {len(r.kept)} kept:", ""]
        for m in r.survived:
            why = _as_right(r.key, m)
            lines.append(f"- {m.line()}; first differs on: {m.differs_on} ({m.how})"
                         + (f". **As right as the reference**: {why}" if why else ""))
    return "\n".join(lines[1:]) if lines else "None."


def equivalents(results: list[Result]) -> str:
    lines = [f"- `{r.key}` {m.line()}" for r in results for m in r.equivalent]
    return "\n".join(lines) if lines else "None."


def odd_verdicts(results: list[Result]) -> str:
    """Kept mutants that check neither accepted nor called wrong (a checker that failed, say): worth a look."""
    lines = [f"- `{r.key}` {m.line()}: {m.status}: {m.message}" for r in results for m in r.refused
             if m.status != WRONG]
    return "\n".join(lines)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def report(results: list[Result], command: str, took: float) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    operators = "\n".join(f"- {name}: {what}" for name, what in OPERATORS.items())
    odd = odd_verdicts(results)
    return f"""# Exercise mutants: the wrong versions of each reference that the checkers let through

Written by `{command}` on {when}, at commit `{_commit()}`.
The run took {took:.0f} s in all, from Python's start to the page (Python {platform.python_version()},
{platform.machine()}, {os.cpu_count()} cores).

Each code exercise's reference is changed one small thing at a time by `scripts/exercise_mutants.py`, with
Python's `ast`, by the operators below; nobody chose which wrong versions to try. A mutant that gives the
reference's outputs on a battery larger than the checker's (the exercise's cases, teaching and drawn from its domain,
the same cases drawn again with other seeds, and perturbed copies of every case) is *equivalent* and not counted. A
mutant that differs there, or raises, is *kept*, and given to `check(key, mutant)` as a learner's function: *refused*
when check calls it wrong, *survived* when check accepts it. A survivor is a function that computes something other
than the reference on an input the battery found, and that the checker passes.

"possible" is how many mutants the operators make of the reference; "made" is how many were tried (at most the
`--limit`, drawn at random with the seed); "slowest check" is the longest single `check` of a kept mutant; "battery"
says what the inputs were.

## Per exercise

{table(results)}

## The survivors

Each line: the operator, the reference's line, the change, and the first input of the battery on which the mutant
differs from the reference (an input the checker's cases do not have, or one they have where the checker's tolerance
or its runner lets the difference through).

{survivors(results)}
{f"{chr(10)}## Kept mutants that check neither passed nor called wrong{chr(10)}{chr(10)}{odd}{chr(10)}" if odd else ""}
## The mutants counted equivalent

They gave the reference's outputs on every input of the battery: most are truly the same function (a change in a
branch the reference never takes, a transpose of a vector); the others differ only where the battery does not look
(see the last section).

{equivalents(results)}

## How the mutants are made

{operators}

Only the body of the reference is changed: not its signature (where some references keep the keyword switches
that make the checker's named mistakes), not its decorators, not its docstring. Two operators that give the same
source make one mutant. Each mutant is compiled in a copy of the reference's module namespace under the reference's
name, so that it calls the same helpers.

## What the battery can and cannot see

Each case of the exercise gives {PERTURBATIONS} randomly perturbed copies, one scaled up ×100, one scaled down ×0.01,
and one with its float arrays zeroed. A perturbation keeps what an input promises: a float moves by a random factor
(so signs and zeros stay, as a ReLU's output stays non-negative); a number strictly between 0 and 1, or an array of
numbers between 0 and 1 (probabilities, masks), moves in log-odds and stays between them, and is neither scaled nor
zeroed; rows that summed to 1 sum to 1 again; booleans in a mask or a list flip one time in five. Integers, strings
and functions are left as they are: they are shapes, counts, class ids, options and graph builders. An input the
reference itself cannot take (a negative base to a fractional power) is left out.

Every exercise's domain draws its cases with a seed, so each is drawn again with other seeds, also where the inputs
hold no floats to perturb (the graphs of `02-backward`, the shapes of `04-init-std`, the batches of `08-repair-step`
and `09-token-weighted`): there the battery is the checker's cases and their redraws. A case of tiny or huge values is
compared at each output's own scale, as check compares it, and so are its perturbed copies. Anywhere, a mutant that
differs from the reference only on inputs neither a draw nor a perturbation makes (of another sign, say) is counted
equivalent: the "equivalent" column is an upper bound, and "survived" a lower one.
"""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", action="append", default=[], metavar="KEY", help="only this exercise (repeatable)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N mutants per exercise, at random")
    parser.add_argument("--seed", type=int, default=0, help="for the choice of mutants and the battery's draws")
    parser.add_argument("--write", metavar="FILE", help="write the report (markdown) to FILE")
    args = parser.parse_args(argv)
    results = []
    for ex in exercises(args.exercise):
        result = measure(ex, args.limit, args.seed)
        results.append(result)
        if result.skipped:
            print(f"{ex.key}: skipped, {result.skipped}", flush=True)
        else:
            print(f"{ex.key}: {len(result.made)} made of {result.possible}, {len(result.equivalent)} equivalent, "
                  f"{len(result.kept)} kept, {len(result.refused)} refused, {len(result.survived)} survived "
                  f"({result.seconds:.1f} s; slowest check {result.slowest_check * 1000:.0f} ms)", flush=True)
    took = time.perf_counter() - STARTED
    print()
    print(table(results))
    print()
    print("Survivors:")
    print(survivors(results))
    odd = odd_verdicts(results)
    if odd:
        print("\nKept mutants that check neither passed nor called wrong:\n" + odd)
    print(f"\n{took:.1f} s")
    if args.write:
        command = "python scripts/exercise_mutants.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        path = Path(args.write)
        (path if path.is_absolute() else ROOT / path).write_text(report(results, command.strip(), took))


if __name__ == "__main__":
    main()
