"""Code exercises: you write a piece of the engine, ``check`` runs it on a battery of cases.

A ``CodeExercise`` knows a reference implementation, a battery of cases (small ones you can check
by hand first, then generated ones: random shapes, broadcasting, batch dimensions, float32, extreme
values; then cases drawn from its declared ``Domain``, domain.py), and the wrong implementations
learners often write, each with a name and an explanation.
``check(key, your_function)`` runs your function on every case, inside a time limit and never
letting an exception out. On the first case it gets wrong it says which mistake your code matches,
if it matches one, and otherwise shows where the numbers differ: yours, expected, the difference.
When your function passes, ``yours(...)`` can put it inside the engine (``haaw.use``) so that later
cells train real models on it.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import linecache
import math
import sys
import textwrap
import traceback
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Callable

import numpy as np

from ...engine import guard
from ...engine.graph import is_node
from .domain import Domain
from .progress import keep_source, load
from .registry import CORRECT, NOT_ATTEMPTED, REGISTRY, UNREADABLE, WRONG, Exercise, Feedback
from .watchdog import TimeLimit, TooSlow

TIME_LIMIT = 5.0  # seconds for all the cases of one check; past it the code is called too slow
_HAAW = str(Path(__file__).resolve().parents[2])  # frames inside haaw are not the learner's
_NUMPY = str(Path(np.__file__).resolve().parent)
_COURSE = str(Path(__file__).resolve().parents[1])  # the course's code: its wrong versions call its references


@dataclass
class Case:
    kind: str  # what kind of case, listed when a function passes: "hand-checkable", "float32", "a causal mask"
    args: tuple
    detail: str = ""  # what this one is, said with the kind when a function fails it: "a = 2, b = 3"
    note: str = ""  # said when a function fails this case: what is special about it
    scaled: bool | None = None  # tiny or huge values: each output compared relative to its own size (_tolerances)
    note_on: tuple = ()  # the outputs the note is about: said only when one of them is the first wrong one

    @property
    def label(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


def _on_its_own(ex, fn):
    """``fn`` as the checker runs it: while it runs, what ``ex.refuses`` names refuses to run (guard.py), and so
    does the exercise's own reference, whatever name either was imported under."""
    refused = (*ex.refuses, f"reference {ex.key}")
    if isinstance(fn, type):  # a class: the engine calls its methods; refuse around the whole run instead
        return fn
    return guard.while_refusing(fn, refused)


@dataclass
class Mistake:
    name: str  # "transpose on the wrong side"
    why: str  # what it computes instead, and why that is wrong
    code: Callable  # a function with the same signature that makes exactly this mistake
    premise: Callable | None = None  # premise(fn, *case args) -> bool: what must be true of the learner's code too


@dataclass(kw_only=True)
class CodeExercise(Exercise):
    # question: what to write; check() repeats it while the exercise is not attempted
    signature: str  # "linear_backward(X, W, G) -> (dX, dW, db)"
    minutes: int  # a learner's minutes to write it, by difficulty (4 to 30): the time model in scripts/measure_notebooks.py
    reference: Callable
    cases: Callable[[], list]  # builds the battery, list of Case
    mistakes: list = field(default_factory=list)
    outputs: tuple = ()  # names of the returned values, for the messages ("dX", "dW", "db")
    slot: str | None = None  # the haaw.use slot a passing function can fill
    run: Callable | None = None  # run(fn, *args) -> outputs; default fn(*copies of args)
    expected: Callable | None = None  # expected(case) -> outputs, where they come from elsewhere (PyTorch)
    diagnose: Callable | None = None  # diagnose(fn, *args) -> more words on a failed case (an audit, say)
    too_slow: str = ""  # what to look for when the code runs out of time, if this exercise knows better
    in_place: str = ""  # what to say when the code changes an input in place, if this exercise knows better
    # term_sizes(case) -> per output, the sum of |terms| adding up to each entry: in float32, an entry whose terms
    # cancel is allowed a few epsilons of them (rounding is all an answer can show there), not only atol
    term_sizes: Callable | None = None
    rtol: float = 1e-6  # float64; float32 cases use 1e-4
    atol: float = 1e-9
    # the implementations a learner's function may not call while it runs (names marked refusable, guard.py): by
    # default the engine's backward; the exercise's own reference is always refused as well
    refuses: tuple = guard.BACKWARD
    # the space the inputs come from (domain.py): check draws seeded cases from it after the teaching cases, and
    # holds the outputs it names in keeps_dtype to the inputs' dtype
    domain: Domain | None = None

    # the outputs are gradients in the order backward produces them (a whole network's, say): a failure names the
    # first wrong one and says that those before it are right, and a function whose later lines are still `...`
    # is checked as far as it goes ("dlogits and dW2 are right so far"); ``said`` glosses a name in messages
    in_order: bool = False
    said: dict = field(default_factory=dict)  # output name -> how messages name it: "dh (dL/dh, after tanh)"

    # the solution shown to learners, when the reference is not it (a reference that can also make the mistakes
    # of the table, with keyword arguments); a test runs it through the checker, so it cannot go stale
    solution_code: str = ""

    def __post_init__(self):
        """The reference becomes refusable while a learner's function for this exercise runs, under every name it
        has: here, and in the module that defines it (as a decorator would have made it)."""
        if not 4 <= self.minutes <= 30:
            raise ValueError(f"{self.key}: a code exercise takes 4 to 30 minutes, not {self.minutes}")
        original, name = self.reference, f"reference {self.key}"
        what = f"the course's own {getattr(original, '__name__', 'solution')} (the answer to {self.key})"
        if isinstance(original, type):  # a class: subclassing it is caught by the engine class it rebuilds
            guard.REFUSABLE[name] = what
            return
        self.reference = guard.refusable(name, what, except_from=_COURSE)(original)  # its wrong versions call it
        module = sys.modules.get(getattr(original, "__module__", ""))
        if module is not None and getattr(module, original.__name__, None) is original:
            setattr(module, original.__name__, self.reference)

    @property
    def solution(self) -> str:
        return textwrap.dedent(self.solution_code or inspect.getsource(guard.unguarded(self.reference)))

    def all_cases(self) -> list:
        """The battery check runs: the teaching cases, then the cases drawn from the domain."""
        return [*self.cases(), *(self.domain.cases(self.key) if self.domain else ())]

    def mistake_pairs(self) -> list:
        return [(m.name, m.why) for m in self.mistakes]

    def check(self, answer) -> Feedback:
        return check_code(self, answer)

    def worked_solution(self) -> str:
        return f"Solution, one way to write it:\n{self.solution}"


_passed: dict[str, Callable] = {}  # key -> the function object that passed


def passed(key: str, fn=None) -> bool:
    """Has ``fn`` (or any function, if None) passed exercise ``key`` in this session?"""
    return key in _passed and (fn is None or _passed[key] is fn)


# --- running learner code safely ------------------------------------------------------------------
def _time_limit() -> TimeLimit:
    """The limit on one check; this module's code (the battery, ``check_code``) is never hit, only the learner's."""
    return TimeLimit(TIME_LIMIT, spare=(__file__,))


def _copies(args):
    """Read-only copies of the arrays in ``args`` (and in lists or tuples among them), as the engine hands its
    own arrays to your code (``haaw.use``): code that changes an input in place fails here at once, at its line,
    instead of passing its check and then corrupting the engine's arrays in a later cell."""
    from ...engine.plugins import read_only

    return tuple(read_only(a, copy=True) for a in args)


def _fresh(args) -> tuple:
    """A copy of a case's arguments for one call: its arrays, lists, tuples and dicts copied all the way down (a
    function, a Tensor or a number is passed as it is), so that a function that changes what it is given changes
    only its own copy, never the case that the next call (a mistake's code, a later check) receives."""
    def fresh(value):
        if isinstance(value, np.ndarray):
            return value.copy()
        if isinstance(value, list):
            return [fresh(v) for v in value]
        if isinstance(value, tuple) and type(value) is tuple:
            return tuple(fresh(v) for v in value)
        if isinstance(value, dict):
            return {k: fresh(v) for k, v in value.items()}
        return value

    return tuple(fresh(a) for a in args)


def _changed(given, now, name="") -> str:
    """Which argument a call changed in place, as a phrase ("its 2nd argument, a list"), comparing what it was
    given (``now``, after the call) with the case's own (``given``); "" if none. Arrays, lists, tuples and dicts are
    compared by value (a NaN equals a NaN); anything else is not looked at."""
    if isinstance(given, np.ndarray):
        same = (isinstance(now, np.ndarray) and now.shape == given.shape and now.dtype == given.dtype
                and np.array_equal(now, given, equal_nan=given.dtype.kind in "fc"))
        return "" if same else name or "an array"
    if isinstance(given, (int, float, complex, str, np.generic)):  # an entry of a list: by value, NaN equal to NaN
        same = type(now) is type(given) and (now == given or (now != now and given != given))
        return "" if same else name or type(given).__name__
    if isinstance(given, (list, tuple)) and not hasattr(given, "_fields"):
        if not isinstance(now, type(given)) or len(now) != len(given):
            return name or f"a {type(given).__name__}"
        return next((found for g, n in zip(given, now) if (found := _changed(g, n, name or
                                                                              f"a {type(given).__name__}"))), "")
    if isinstance(given, dict):
        if not isinstance(now, dict) or now.keys() != given.keys():
            return name or "a dict"
        return next((found for k in given if (found := _changed(given[k], now[k], name or "a dict"))), "")
    return ""


def _changed_input(given: tuple, now: tuple) -> str:
    for number, (g, n) in enumerate(zip(given, now), start=1):
        found = _changed(g, n)
        if found:
            return f"argument {number} ({found})"
    return ""


class LearnerError(Exception):
    def __init__(self, message: str, status: str = WRONG):
        super().__init__(message)
        self.message, self.status = message, status


def learner_line(tb) -> str:
    """'line 3: dW = X @ G' for the innermost frame of the learner's own code, or ''."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if not (filename.startswith((_HAAW, _NUMPY)) or "site-packages" in filename or filename.startswith("<frozen")):
            found = filename, lineno, frame.f_code.co_name
    if found is None:
        return ""
    filename, lineno, name = found  # the source is read once: a RecursionError has a thousand frames
    source = linecache.getline(filename, lineno).strip()
    return f"line {lineno} of {name}" + (f": {source}" if source else "")


def _at(err) -> str:
    where = learner_line(err.__traceback__)
    return f"\n  at {where}" if where else ""


_IN_PLACE = ("The arrays it receives are the engine's own (a gradient another operation still needs): make a new "
             "array instead, G = G * ..., not G *= ... or G[...] = ...")
# what a learner's code may raise that is not the learner's to report: the reader's interrupt, the time limit
_ESCAPES = (KeyboardInterrupt, TooSlow)


def _call(fn, args, what: str, in_place: str = ""):
    """``fn(*args)``, turning whatever goes wrong into a LearnerError whose message a learner can act on (any
    exception, SystemExit included, but the reader's KeyboardInterrupt). ``in_place``: what to say of an input
    changed in place, if the exercise knows better than the engine's arrays."""
    try:
        return fn(*args)
    except (TooSlow, LearnerError):
        raise
    except guard.ShortcutRefused as err:
        raise LearnerError(f"{what} is not its own work: {err}" + _at(err)) from None
    except RecursionError as err:
        raise LearnerError(f"{what} went deeper than Python allows (RecursionError, at {learner_line(err.__traceback__) or 'a recursive call'}). "
                           "A recursive walk fails on a long chain of nodes: use a loop with an explicit stack or list.") from None
    except _ESCAPES:
        raise
    except BaseException as err:  # the learner's code raised (SystemExit too): show their line, not ours
        where = learner_line(err.__traceback__)
        if isinstance(err, ValueError) and "read-only" in str(err):
            raise LearnerError(f"{what} changes one of its inputs in place" + (f", at {where}" if where else "") +
                               ". " + (in_place or _IN_PLACE)) from None
        raise LearnerError(f"{what} raised {type(err).__name__}: {err}" + (f"\n  at {where}" if where else "")) from None


def _placeholder_line(fn) -> int | None:
    """The line (in the function's cell) of a `...` still left in ``fn``'s body, or None.

    For a class, its own methods are looked at (a class's source cannot be read in a notebook;
    its methods' can)."""
    if isinstance(fn, type):
        methods = [getattr(m, "__func__", m) for m in vars(fn).values() if callable(getattr(m, "__func__", m))]
        return next((line for line in map(_placeholder_line, methods) if line is not None), None)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        first = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    # NumPy's own `...` in an index (x[..., None]) is code, not a placeholder
    indexing = {id(n) for sub in ast.walk(tree) if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value is Ellipsis and id(node) not in indexing:
            return first + node.lineno - 1
    return None


# --- reading and comparing outputs -----------------------------------------------------------------
def _as_outputs(result, names, expected_count) -> tuple:
    """The learner's result as a tuple of float arrays, or a LearnerError saying what is wrong with it."""
    if result is None:
        raise LearnerError("your function returned None: did it forget to `return` the result?")
    if expected_count > 1:
        if isinstance(result, np.ndarray) and result.ndim and len(result) == expected_count:
            result = list(result)  # np.array([dX, dW]) of outputs of one shape: a stack of the values, in order
        if not isinstance(result, (tuple, list)):
            raise LearnerError(f"return {expected_count} values, ({', '.join(names)}); got one {type(result).__name__}")
        if len(result) != expected_count:
            raise LearnerError(f"return {expected_count} values, ({', '.join(names)}); got {len(result)}")
        items = list(result)
    else:
        items = [result]
    arrays = []
    for name, item in zip(names, items):
        if item is Ellipsis:
            raise LearnerError(f"{name} is still `...`: replace it with your code", NOT_ATTEMPTED)
        if hasattr(item, "detach") and type(item).__module__.startswith("torch"):
            try:
                item = item.detach().cpu().numpy()
            except Exception:  # a format NumPy does not have (bfloat16): the learner's output, not the course's bug
                raise LearnerError(f"{name} is a torch tensor of {item.dtype}, which NumPy cannot hold: return a NumPy "
                                   "array (or a torch tensor in float32 or float64)") from None
        elif is_node(item):  # a haaw Tensor or Value
            item = item.data
        try:
            array = np.asarray(item)
        except Exception:
            raise LearnerError(f"{name} is not an array of numbers (got {type(item).__name__})") from None
        if array.dtype == object or array.dtype.kind not in "biufV":
            raise LearnerError(f"{name} is not an array of numbers (got {type(item).__name__} of {array.dtype})")
        arrays.append(array)
    return tuple(arrays)


def _tolerance(ex, arrays):
    low = any(a.dtype.itemsize < 8 and a.dtype.kind == "f" for a in arrays)
    return (1e-4, 1e-5) if low else (ex.rtol, ex.atol)


def _tolerances(ex, case, expected) -> list:
    """(rtol, atol) for each output of ``case``: float32's if float32 is in or out, the exercise's otherwise. On a
    case of tiny or huge values (``case.scaled``) atol is taken relative to the output's largest finite entry: an
    entry of a huge output that nearly cancels is off by rounding far more than atol, and a tiny output lies within
    atol of anything."""
    rtol, atol = _tolerance(ex, [*expected, *_arrays_in(case.args)])
    low = [a.dtype for a in (*expected, *_arrays_in(case.args)) if a.dtype.kind == "f" and a.dtype.itemsize < 8]
    if ex.term_sizes is not None and low and not case.scaled:
        eps = float(max(np.finfo(d).eps for d in low))
        return [(rtol, max(atol, _ROUNDINGS * eps * float(np.max(size, initial=0.0))))
                for size in ex.term_sizes(case)]
    if not case.scaled:
        return [(rtol, atol)] * len(expected)
    found = []
    for e in expected:
        sizes = np.abs(e.astype(np.float64)).ravel()
        sizes = sizes[np.isfinite(sizes)]
        size = float(sizes.max()) if sizes.size else 0.0
        found.append((rtol, atol * size if size > 0 else atol))
    return found


_ROUNDINGS = 4  # how many epsilons of the terms' sizes an entry whose terms cancel may be off by (term_sizes)


def _same(a: np.ndarray, b: np.ndarray, rtol, atol) -> bool:
    if a.shape != b.shape:
        return False
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    return bool(np.all(both_nan | np.isclose(a64, b64, rtol=rtol, atol=atol)))


def _describe_case(case: Case) -> str:
    shapes = ", ".join(f"{a.shape}" for a in case.args if isinstance(a, np.ndarray))
    return f"{case.label}" + (f" (input shapes {shapes})" if shapes else "")


def _grid(yours: np.ndarray, expected: np.ndarray, rtol, atol, limit: int = 6) -> tuple[str, str]:
    """The first few differing entries as a table, in text and in HTML."""
    y64, e64 = yours.astype(np.float64), expected.astype(np.float64)
    wrong = ~(np.isclose(y64, e64, rtol=rtol, atol=atol) | (np.isnan(y64) & np.isnan(e64)))
    where = [tuple(int(i) for i in idx) for idx in np.argwhere(wrong)[:limit]] if y64.ndim else [()]
    rows = [(str(idx) if idx else "()", f"{y64[idx]:.6g}", f"{e64[idx]:.6g}", f"{y64[idx] - e64[idx]:.3g}")
            for idx in where]
    count = int(np.sum(wrong))
    header = ("entry", "yours", "expected", "difference")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    text = "\n".join("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in [header] + rows)
    more = f"\n  ({count} of {wrong.size} entries differ)" if count > len(rows) or y64.ndim else ""
    cells = "".join(f"<tr><td>{escape(a)}</td><td style='background:#f8d7da'>{escape(b)}</td><td>{escape(c)}</td>"
                    f"<td>{escape(d)}</td></tr>" for a, b, c, d in rows)
    html = (f"<table style='font-family:monospace'><tr>{''.join(f'<th>{h}</th>' for h in header)}</tr>{cells}"
            f"</table><div>{escape(more.strip())}</div>")
    return text + more, html


def check_code(ex: CodeExercise, fn) -> Feedback:
    """Run ``fn`` on every case of ``ex`` and say whether it passes, and if not, why."""
    name = getattr(fn, "__name__", "your function")
    if fn is Ellipsis:
        return Feedback(NOT_ATTEMPTED, f"Not attempted yet: write {ex.signature}, then pass the function itself "
                                       f"(its name, no parentheses) to check.\nThe task: {ex.question}")
    if not callable(fn):
        return Feedback(UNREADABLE, f"check({ex.key!r}, ...) needs your function itself, {ex.signature.split('(')[0]} "
                                    f"(its name, without parentheses or arguments); got {type(fn).__name__} {fn!r:.40}.")
    line = _placeholder_line(fn)
    if line is not None and not ex.in_order:  # in order, the lines written so far are checked: _battery
        return Feedback(NOT_ATTEMPTED, f"Not attempted yet (or not finished): line {line} of {name} still holds a "
                                       f"`...` placeholder. Replace each ... with your code, then run the cell again."
                                       f"\nThe task: {ex.question}")
    run = ex.run or (lambda f, *args: f(*_copies(args)))
    cases = ex.all_cases()
    _import_ahead(fn)
    limit = _time_limit()
    try:
        with limit:
            verdict = _battery(ex, fn, name, run, cases)
    except limit.expired:  # this check's own time-out; an enclosing check's passes on to that check
        limit.stop()  # again: the time-out may have arrived as the block ended, before __exit__ could stop it
        verdict = Feedback(WRONG, f"{name} took longer than {TIME_LIMIT:g} s for its {len(cases)} cases and was "
                                  "stopped: " + (ex.too_slow or "look for a loop that never ends (or one over every "
                                                 "entry where one NumPy operation would do)."))
    if verdict.status == CORRECT:
        _passed[ex.key] = fn
        keep_source(ex.key, fn)  # so that a later notebook, or a new kernel, can run it again: mine()
    elif _passed.get(ex.key) is fn:
        del _passed[ex.key]
    return verdict


_SLOW_TO_IMPORT = ("torch", "scipy")  # seconds to import the first time: not the learner's code's time


def _import_ahead(fn) -> None:
    """Import the slow-to-import libraries ``fn``'s code names (``import torch`` inside the function, say) before
    the time limit starts: a first import of PyTorch can take longer than the limit itself, and an import stopped
    half-way leaves the library unusable for the rest of the session."""
    names, codes = set(), [getattr(getattr(fn, "__func__", fn), "__code__", None)]
    if isinstance(fn, type):
        codes = [getattr(getattr(m, "__func__", m), "__code__", None) for m in vars(fn).values()]
    while codes:
        code = codes.pop()
        if code is not None:
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    for module in _SLOW_TO_IMPORT:
        if module in names and module not in sys.modules:
            with contextlib.suppress(Exception):
                __import__(module)


def _refusing_for_a_class(ex, fn):
    """Around the whole run of a class (a custom Function, called by the engine): what the exercise refuses."""
    if isinstance(fn, type):
        return guard.refusing((*ex.refuses, f"reference {ex.key}"))
    return contextlib.nullcontext()


def _battery(ex, fn, name, run, cases) -> Feedback:
    """Every case in turn. The expected outputs of a case are computed only after the learner's function has
    returned on it, in ``_one_case``, and are gone before the function runs again (on the next case, or to name a
    mistake): no frame the learner's code can reach holds them while it runs."""
    own = _on_its_own(ex, fn)
    so_far = None  # in backward's order, a function not finished: what is right so far, on every case
    changed_dtype = ""  # what is said about the first case whose outputs did not keep the inputs' dtype
    changed_input = ""  # what is said about the first case whose inputs the function changed in place
    for number, case in enumerate(cases, start=1):
        where = f"Case {number} of {len(cases)}, {_describe_case(case)}"
        out = _one_case(ex, fn, name, run, own, case, where)
        changed_dtype = changed_dtype or (f"✗ Not yet. {where}: {out.dtype}" if out.dtype else "")
        if out.verdict is None and out.dtype and out.values:  # off where the dtype changed: the dtype first,
            return Feedback(WRONG, changed_dtype)  # where it first changed
        if out.verdict is not None:
            verdict = out.verdict
            if out.candidates:  # the learner's function runs again here: no expected value is in any frame now
                verdict = _named(ex, fn, run, out.candidates, cases, where, out.detail) or verdict
            if verdict.status == NOT_ATTEMPTED:
                return verdict
            note = f"\n({case.note})" if case.note and _note_applies(ex, case, out) else ""
            also = f"\n(It also changes {out.moved} in place: {ex.in_place or _IN_PLACE_ANY}.)" if out.moved else ""
            return dataclasses.replace(verdict, message=verdict.message + note + also
                                       + (_diagnosis(ex, fn, case) if out.values else ""))
        if out.unfinished is not None:
            so_far = out.unfinished  # right on this case: on to the next, to say so of every case
            continue
        changed_input = changed_input or (f"✗ Not yet. {where}: {name} changes {out.moved} in place, and with it "
                                          f"its caller's values: {ex.in_place or _IN_PLACE_ANY}." if out.moved else "")
    if so_far is not None:
        return so_far
    if changed_input:  # every value is right, but the function changed what it was given
        return Feedback(WRONG, changed_input)
    if changed_dtype:  # every value is right, but not every dtype
        return Feedback(WRONG, changed_dtype)
    labels = ", ".join(dict.fromkeys(c.kind for c in cases))
    plug = (f" It can now run inside the engine: a later cell plugs it in with yours({ex.slot}=...)."
            if ex.slot else "")
    low = any(a.dtype.itemsize < 8 and a.dtype.kind == "f" for c in cases for a in _arrays_in(c.args))
    within = f"each within a relative {ex.rtol:g}" + (" (1e-4 in float32)" if low else "")
    return Feedback(CORRECT, f"✓ Correct: {name} passed all {len(cases)} cases ({labels}), {within}.{plug}")


_IN_PLACE_ANY = ("make new values from the inputs instead of changing them (a copy, x.copy() or list(v), if you "
                 "need one to change)")


@dataclass
class _Outcome:
    """What one case found: a failing verdict (None if it passed), the mistakes that match the learner's outputs on
    it (named only if they match on every case), the wrong output's description, whether the verdict is about
    values (a diagnosis may add to it), a so-far verdict of a function not finished, a changed dtype, a changed
    input."""
    verdict: Feedback | None = None
    candidates: tuple = ()
    detail: str = ""
    values: bool = False
    unfinished: Feedback | None = None
    dtype: str = ""
    moved: str = ""
    wrong: str = ""  # the first wrong output, where values are compared


def _note_applies(ex, case, out) -> bool:
    """Is the case's note about this failure? A case can say which outputs its note is about (``note_on``): then it
    is said only when the first wrong output is one of them."""
    if not case.note_on:
        return True
    if out.wrong:
        return out.wrong in case.note_on
    head = out.verdict.message.split("\n", 1)[0]  # a function not finished (_so_far): the wrong one is named
    return any(f"the first wrong one is {_said(ex, name)}" in head for name in case.note_on)


def _expected(ex, run, case) -> tuple:
    right = ex.expected(case) if ex.expected else run(ex.reference, *_fresh(case.args))
    return _as_outputs(right, ex.outputs, len(ex.outputs))


def _one_case(ex, fn, name, run, own, case, where) -> _Outcome:
    """One case, on a fresh copy of its arguments: the learner's function first, and only once it has returned the
    expected outputs, which live in this frame alone and are gone when it returns."""
    args = _fresh(case.args)
    try:
        with _refusing_for_a_class(ex, fn):
            result = _call(lambda *a: run(own, *a), args, name, ex.in_place)
    except LearnerError as err:
        return _Outcome(_error_verdict(ex, fn, name, where, err))
    moved = _changed_input(case.args, args)
    expected = _expected(ex, run, case)  # only now that the learner's function has returned
    try:
        if ex.in_order:
            unfinished = _so_far(ex, result, expected, case, where)
            if unfinished is not None and unfinished.status != NOT_ATTEMPTED:
                return _Outcome(unfinished, moved=moved)  # a wrong one among those written so far
            if unfinished is not None:
                return _Outcome(unfinished=unfinished, moved=moved)
        mine = _as_outputs(result, ex.outputs, len(ex.outputs))
    except LearnerError as err:
        return _Outcome(_error_verdict(ex, fn, name, where, err), moved=moved)
    dtype = _dtype_changed(ex, result, case)
    tolerances = _tolerances(ex, case, expected)  # float32 in or out: float32's tolerance
    bad = [i for i, (m, e, t) in enumerate(zip(mine, expected, tolerances)) if not _same(m, e, *t)]
    if not bad:
        return _Outcome(dtype=dtype, moved=moved)
    if dtype:  # the values are off where the dtype changed too: the dtype first (_battery)
        return _Outcome(dtype=dtype, values=True, moved=moved)
    verdict, detail, candidates = _explain(ex, run, case, where, mine, expected, bad, tolerances)
    return _Outcome(verdict, tuple(candidates), detail, values=True, moved=moved, wrong=ex.outputs[bad[0]])


def _error_verdict(ex, fn, name, where, err) -> Feedback:
    if err.status == NOT_ATTEMPTED:
        return Feedback(NOT_ATTEMPTED, f"Not attempted yet (or not finished): {err.message}.")
    line = _placeholder_line(fn) if ex.in_order else None
    if ex.in_order and (line is not None or "'ellipsis'" in err.message):  # a `...` used in arithmetic
        return Feedback(NOT_ATTEMPTED, f"Not finished: {f'line {line} of {name}' if line else name} still "
                                       f"holds a `...` that a line after it uses. Write the gradients in "
                                       f"order, and leave every line after the last one you wrote as "
                                       f"`...`.\nThe task: {ex.question}")
    return Feedback(WRONG, f"✗ Not yet. {where}: {err.message}")


def _said(ex, name: str) -> str:
    return ex.said.get(name, name)


def _listed(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _so_far(ex, result, expected, case, where):
    """For an exercise whose outputs come in backward's order: where the function returned `...` for some of them
    (the lines not written yet), the outputs before the first `...` compared one by one, or None when nothing is
    left as `...`. A wrong one among them is named as the first wrong tensor; if all are right, the feedback says
    so and which comes next (the check goes on to the next case only when the function is finished)."""
    items = list(result) if isinstance(result, (tuple, list)) else None
    if items is None or len(items) != len(ex.outputs) or not any(item is Ellipsis for item in items):
        return None
    first = next(i for i, item in enumerate(items) if item is Ellipsis)
    if first == 0:
        return Feedback(NOT_ATTEMPTED, f"Not attempted yet: {_said(ex, ex.outputs[0])} is still `...`. Backward "
                                       f"starts there: write it, then run the cell again.\nThe task: {ex.question}")
    names = ex.outputs[:first]
    mine = tuple(_as_outputs(item, (name,), 1)[0] for item, name in zip(items, names))
    tolerances = _tolerances(ex, case, expected)
    bad = [i for i in range(first) if not _same(mine[i], expected[i], *tolerances[i])]
    if bad:
        return _explain(ex, None, case, where, mine, expected, bad, tolerances)[0]  # no mistake named on a part
    return Feedback(NOT_ATTEMPTED, f"So far so good: {_listed(names)} {'is' if first == 1 else 'are'} right on "
                                   f"every case. Next, {_said(ex, ex.outputs[first])}: it is still `...`.")


def _dtype_of(item):
    """The NumPy dtype of a returned value (an array, a NumPy number, a haaw or torch tensor), or None (a Python
    number has none: it takes the dtype of what it is combined with)."""
    if is_node(item):
        item = item.data
    dtype = getattr(item, "dtype", None)
    if dtype is None:
        return None
    try:
        return np.dtype(str(dtype).removeprefix("torch."))
    except TypeError:  # a format NumPy does not have (torch's bfloat16): the comparison of values speaks
        return None


def _dtype_changed(ex, result, case) -> str:
    """What to say of an output that the domain says keeps the inputs' dtype (``keeps_dtype``) and is of another
    floating-point dtype than the inputs (when they share one); "" if there is none. The values alone cannot show
    it: a float64 result of float32 inputs is as close to the expected numbers as float32's tolerance asks, and it
    would then run, silently, in float64 through an engine that trains in float32. Refused when every value is
    right, or when the values are off where the dtype changed (then the dtype is the first thing to fix)."""
    kept = ex.domain.keeps_dtype if ex.domain else ()
    given = {a.dtype for a in _arrays_in(case.args) if a.dtype.kind == "f"}
    if not kept or len(given) != 1:
        return ""
    (dtype,) = given
    items = (result,) if len(ex.outputs) == 1 else tuple(result)  # _as_outputs read it: a sequence of them
    for name, item in zip(ex.outputs, items):
        got = None if name not in kept else _dtype_of(item)
        if got is not None and got.kind == "f" and got != dtype:
            return (f"{name} is {got}, but the inputs are {dtype}: a gradient keeps the dtype of its inputs, so "
                    f"{name} must be {dtype} too. Something in your code made it {got}: an array made without "
                    f"a dtype (np.zeros(shape) is float64; np.zeros_like(...) keeps the dtype), a NumPy float64 "
                    f"number as a factor (np.sqrt(d) or np.float64(...); a Python float such as d ** -0.5 keeps "
                    f"the dtype), or .astype(float) or dtype=np.float64.")
    return ""


def _diagnosis(ex, fn, case) -> str:
    if ex.diagnose is None:
        return ""
    try:
        said = ex.diagnose(fn, *_fresh(case.args))
    except _ESCAPES:
        raise
    except BaseException:
        return ""
    return "\n" + said if said else ""  # a diagnosis with nothing to add adds no empty line


def _arrays_in(args) -> list:
    """The NumPy arrays among a case's arguments (Tensors' arrays included), one level into lists."""
    found = []
    for a in args:
        for item in (a if isinstance(a, (list, tuple)) else [a]):
            if not isinstance(item, np.ndarray):
                item = getattr(item, "data", item)  # a Tensor's array
            if isinstance(item, np.ndarray):
                found.append(item)
    return found


def _is_that_mistake(ex, fn, run, mistake, cases) -> bool:
    """Does ``fn`` compute what ``mistake`` computes on every case of the battery? Only then is it named. Each call
    has its own fresh copy of the case's arguments."""
    for case in cases:
        try:
            theirs = _as_outputs(run(mistake.code, *_fresh(case.args)), ex.outputs, len(ex.outputs))
        except Exception:
            theirs = None
        try:
            with _refusing_for_a_class(ex, fn):
                mine = _as_outputs(_call(lambda *a: run(_on_its_own(ex, fn), *a), _fresh(case.args), "yours"),
                                   ex.outputs, len(ex.outputs))
        except LearnerError:
            mine = None
        if (mine is None) != (theirs is None):
            return False
        if mistake.premise is not None:
            try:
                with _refusing_for_a_class(ex, fn):
                    if not mistake.premise(_on_its_own(ex, fn), *_fresh(case.args)):
                        return False
            except _ESCAPES:
                raise
            except BaseException:
                return False
        if mine is not None:
            if not all(_same(m, t, *tol) for m, t, tol in zip(mine, theirs, _tolerances(ex, case, theirs))):
                return False
    return True


def _named(ex, fn, run, candidates, cases, where, detail) -> Feedback | None:
    """The first of ``candidates`` (mistakes that give the learner's outputs on the failing case) that ``fn``
    matches on every case, named; None if none does. Called with no expected value in any frame."""
    for mistake in candidates:
        if _is_that_mistake(ex, fn, run, mistake, cases):
            return Feedback(WRONG, f"✗ Not yet. {where}: {detail}.\nThis looks like {mistake.name}: "
                                   f"{mistake.why}\n(hint({ex.key!r}) for a nudge)")
    return None


def _explain(ex, run, case, where, mine, expected, bad, tolerances) -> tuple:
    """(the verdict on a wrong case, what is wrong with its first wrong output, the mistakes whose outputs on this
    case are the learner's: ``_named`` runs the learner's function on every case to see if one of them is it)."""
    i = bad[0]
    out, yours, right = _said(ex, ex.outputs[i]), mine[i], expected[i]
    rtol, atol = tolerances[i]
    if yours.shape != right.shape:
        if right.shape == () and yours.size == 1:
            why = f": return one plain number, not an array of shape {yours.shape} (float(...) or .item())"
        elif yours.ndim == 2 and yours.T.shape == right.shape and _same(yours.T, right, rtol, atol):
            why = ": you have the transpose. A gradient has the shape of what it is the gradient of"
        elif out.startswith("d") or "grad" in out:
            why = ": a gradient has the shape of what it is the gradient of"
        else:
            why = ""
        detail = f"{out} has shape {yours.shape}, but it must have shape {right.shape}{why}"
    elif right.dtype.kind == "f" and yours.dtype != right.dtype:
        given = sorted({str(a.dtype) for a in _arrays_in(case.args) if a.dtype.kind == "f"})
        detail = (f"{out} is {yours.dtype}, but it should be {right.dtype}"
                  + (f", like the inputs ({', '.join(given)})" if given == [str(right.dtype)] else "")
                  + ": keep the inputs' dtype (a float64 array or np.float64 constant mixed in makes everything "
                  "float64)")
    elif np.any(~np.isfinite(yours.astype(np.float64))) and np.all(np.isfinite(right.astype(np.float64))):
        detail = f"{out} contains nan or inf where every expected entry is finite (a 0/0, a log(0) or an overflow?)"
    else:
        detail = f"{out}: wrong values"
    if ex.in_order:  # backward's order: the ones before it are right, and the ones after it are built from it
        after = [ex.outputs[j] for j in bad[1:]]
        detail = ((f"{_listed(ex.outputs[:i])} {'is' if i == 1 else 'are'} right; the first wrong one is " if i else
                   "the first gradient backward computes is wrong: ") + detail
                  + (f" ({_listed(after)} {'is' if len(after) == 1 else 'are'} wrong as well: fix {ex.outputs[i]} "
                     "first, as what backward computes after it may be computed from it)" if after else ""))
    verdict = _grid_feedback(ex, where, detail, yours, right, rtol, atol)
    if run is None:  # a function still being written (_so_far): no mistake is named on part of its outputs
        return verdict, detail, []
    candidates = []  # a mistake is named only when it gives exactly the learner's outputs here and on every case
    for mistake in ex.mistakes:
        try:
            theirs = _as_outputs(run(mistake.code, *_fresh(case.args)), ex.outputs, len(ex.outputs))
        except Exception:
            continue
        if all(_same(theirs[j], mine[j], *tolerances[j]) for j in range(len(mine))) and any(
                not _same(theirs[j], expected[j], *tolerances[j]) for j in bad):
            candidates.append(mistake)
    return verdict, detail, candidates


def _grid_feedback(ex, where, detail, yours, right, rtol, atol) -> Feedback:
    if yours.shape != right.shape or yours.dtype != right.dtype and right.dtype.kind == "f":
        return Feedback(WRONG, f"✗ Not yet. {where}: {detail}.")
    text, html = _grid(yours, right, rtol, atol)
    message = f"✗ Not yet. {where}: {detail}. The first entries that differ:\n{text}\nTry hint({ex.key!r})."
    html = (f"<div>✗ Not yet. {escape(where)}: {escape(detail)}. The first entries that differ:</div>{html}"
            f"<div>Try hint({escape(repr(ex.key))}).</div>")
    return Feedback(WRONG, message, html)


# --- plugging a passing function into the engine -------------------------------------------------
def _exercise_for(slot: str):
    return next((ex for ex in REGISTRY.values() if isinstance(ex, CodeExercise) and ex.slot == slot), None)


class Plugged:
    """What ``yours(...)`` put in place: ``all`` is True when every function given was used."""

    def __init__(self, used: dict, waiting: list):
        self.used, self.waiting = used, waiting
        self.all = not waiting

    def __bool__(self) -> bool:
        return self.all


@contextlib.contextmanager
def yours(**implementations):
    """Run the block with your functions in the engine's slots, each one that ``check`` accepted.

    A function that has not passed its exercise yet is not used: the block then runs on the engine's
    own code for that slot, and a line says what is missing, so the cell still runs.
    """
    from ...engine import plugins

    from ...engine.plugins import SLOTS

    unknown = sorted(set(implementations) - set(SLOTS))
    if unknown:
        raise TypeError(f"yours(): there is no slot called {', '.join(map(repr, unknown))}; the slots are: "
                        f"{', '.join(sorted(SLOTS))}")
    used, waiting, lines = {}, [], []
    for slot, fn in implementations.items():
        ex = _exercise_for(slot)
        label = getattr(fn, "__name__", slot)
        if ex is not None and callable(fn) and passed(ex.key, fn):
            used[slot] = _on_its_own(ex, fn)  # in the engine too, it may not call what it replaces
            lines.append(f"✓ your {label} runs in the engine's place ({slot})")
        else:
            waiting.append(slot)
            key = ex.key if ex else "?"
            lines.append(f"· {slot}: the engine's own, because your {ex.signature if ex else slot} has not passed "
                         f"check({key!r}, ...) yet")
    print("\n".join(lines))
    with plugins.use(**used):
        yield Plugged(used, waiting)


def mine(*keys: str):
    """Your own functions for the code exercises ``keys``, as they passed, read back from the progress file.

    Each is checked again before it is handed back, so what comes back has passed in this kernel too and
    ``yours(...)`` will plug it in. A key you have not passed gives None, and a line says so: where yours is
    None, ``yours`` runs the engine's own. One key gives one function; several give a tuple, in order.
    """
    kept = load()
    found, lines = [], []
    for key in keys:
        ex, entry = REGISTRY.get(key), kept.get(key, {})
        fn, why = None, "not passed yet (or no progress file here)"
        if ex is not None and entry.get("source") and entry.get("name"):
            namespace = _namespace()
            try:
                exec(compile(entry["source"], f"<your {entry['name']} from {key}>", "exec"), namespace)
                candidate = namespace[entry["name"]]
                verdict = check_code(ex, candidate)  # not core.check: reading yours back is no new attempt
                fn, why = (candidate, "") if verdict.correct else (None, "it no longer passes: " + verdict.message)
            except Exception as err:  # noqa: BLE001  (a learner's source: anything may go wrong)
                why = f"its source did not run again ({type(err).__name__}: {err})"
        elif ex is None:
            why = "there is no such exercise"
        lines.append(f"✓ {key}: your {entry['name']}" if fn else f"· {key}: {why}; the engine's own runs instead")
        found.append(fn)
    print("\n".join(lines))
    return found[0] if len(found) == 1 else tuple(found)


def _namespace() -> dict:
    """What a stored function may use without its notebook's other cells: NumPy, math and haaw's public names."""
    import numpy as np

    import haaw
    import haaw.nn.functional as F

    return {"np": np, "numpy": np, "math": math, "haaw": haaw, "F": F,
            **{name: getattr(haaw, name) for name in getattr(haaw, "__all__", ())}}


def pick(key: str, fn):
    """``fn`` if it passed exercise ``key``, otherwise the course's own implementation; say which.

    For pieces that run in a notebook's own cells rather than inside the engine (a ring all-reduce, a
    training step), so that the cell runs either way and says whose code it ran.
    """
    ex = REGISTRY[key]
    label = getattr(fn, "__name__", "yours")
    if callable(fn) and passed(key, fn):
        print(f"✓ running your {label}")
        return fn
    print(f"· running the course's {ex.signature.split('(')[0]}: yours has not passed check({key!r}, ...) yet")
    return ex.reference
