"""Exercise checkers that say *which* mistake was made, and never raise.

An exercise knows its answer and the wrong answers learners commonly give, each with the
hint that mistake deserves ("12 is dL/dy: you stopped one link early"). ``check`` turns
whatever the learner passed (a number, a Value, a string, an array, ``None``, the untouched
``...``) into a verdict; odd input gets a polite explanation, not a traceback.
"""
from __future__ import annotations

import ast
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...engine.graph import is_node
from .progress import record
from .registry import CORRECT, NOT_ATTEMPTED, REGISTRY, UNREADABLE, WRONG, Exercise, Feedback, register  # noqa: F401
from .registry import lookup, solutions_allowed, unknown_message

_hints_shown: dict[str, int] = {}


def _tensor_kind(answer) -> str | None:
    """"Value", "Tensor" (haaw's), "torch tensor", or None for anything else."""
    if is_node(answer):
        return "Value" if np.ndim(answer.data) == 0 and not isinstance(answer.data, np.ndarray) else "Tensor"
    if type(answer).__module__.startswith("torch") and hasattr(answer, "detach"):
        return "torch tensor"
    return None


def _as_number(answer):
    """(number, None) or (None, why it is not one)."""
    kind = _tensor_kind(answer)
    if kind == "Value":
        return None, (f"You passed a Value (data={answer.data:g}, grad={answer.grad:g}), not a number. "
                      "Pass its .data or its .grad, whichever the question asks for.")
    if kind:
        shape = tuple(answer.shape)
        if int(np.prod(shape)) == 1:
            return None, f"You passed a {kind}, not a number: pass its number with .item()."
        return None, f"Expected one number, got a {kind} of shape {shape}."
    if isinstance(answer, bool):
        return None, f"Expected a number, got {answer}."
    if isinstance(answer, (complex, np.complexfloating)) or (hasattr(answer, "dtype") and np.iscomplexobj(answer)):
        return None, f"Expected a real number, got the complex number {answer}: drop the imaginary part yourself if it is 0."
    if isinstance(answer, str):
        text = answer.strip().replace("_", "").replace(" ", "")
        if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?", text):
            text = text.replace(",", "")  # 1,000,000: commas between thousands
        elif "," in text:
            return None, f"{answer!r:.40}: write the decimal point as a dot (1.64, not 1,64)."
        try:
            answer = float(text)
        except ValueError:
            return None, f"Expected a number, got the text {answer!r:.40}."
    if isinstance(answer, (list, tuple, np.ndarray)) or hasattr(answer, "__array__"):
        try:
            array = np.asarray(answer, dtype=np.float64)
        except OverflowError:
            return None, "Expected one number: " + "a number in your answer is too large for a float (floats stop near 1.8e308)."
        except (TypeError, ValueError):
            return None, f"Expected one number, got a {type(answer).__name__} that is not numeric."
        if array.size != 1:
            return None, f"Expected one number, got {type(answer).__name__} of shape {array.shape}."
        answer = array.reshape(())
    try:
        number = float(answer)
    except (TypeError, ValueError, OverflowError):
        return None, f"Expected a number, got {type(answer).__name__}."
    if not math.isfinite(number):
        return None, f"Expected a finite number, got {number}: look for a division by zero or an overflow."
    return number, None


_PLAIN = re.compile(r"[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d*)?([eE][+-]?\d+)?")
_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_UNIT_NAMES = {"b": "bytes", "byte": "bytes", "bytes": "bytes", "kb": "kB", "mb": "MB", "gb": "GB", "tb": "TB",
               "kib": "KiB", "mib": "MiB", "gib": "GiB", "tib": "TiB"}
for _prefix, _short in (("kilo", "kb"), ("mega", "mb"), ("giga", "gb"), ("tera", "tb"), ("kibi", "kib"),
                        ("mebi", "mib"), ("gibi", "gib"), ("tebi", "tib")):
    for _word in (f"{_prefix}byte", f"{_prefix}bytes"):  # a unit in words: "275 gigabytes"
        _UNITS[_word], _UNIT_NAMES[_word] = _UNITS[_short], _UNIT_NAMES[_short]
_POWERS = {1e3: "10³", 1e6: "10⁶", 1e9: "10⁹", 1e12: "10¹²", 2**10: "2¹⁰", 2**20: "2²⁰", 2**30: "2³⁰", 2**40: "2⁴⁰"}
# "How many forward-mode passes give ...": the words between "how many" and the verb name what is counted
_HOW_MANY = re.compile(r"\bhow many\s+(.+?)(?=\s+(?:do|does|did|would|will|give|gives|are|is|was|were|can|could|"
                       r"must|should|take|takes|need|needs|have|has)\b|\s*[?.,:;(]|$)", re.IGNORECASE)
_FUNCTIONS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "ln": math.log, "log2": math.log2,
              "log10": math.log10, "abs": abs}


def counted_words(question: str) -> list:
    """The words of what a "how many" question counts: ["forward-mode", "passes"], ["GB"]; [] for other questions."""
    match = _HOW_MANY.search(question or "")
    return match.group(1).split() if match else []


def _asked_unit(question: str) -> str | None:
    """The unit of memory a question asks for ("gb", "bytes"), or None when it asks for no such unit."""
    counted = counted_words(question)
    if counted and counted[0].lower() in _UNITS and counted[0] != "b":  # "b" is more often a bias than a byte
        return counted[0].lower()
    match = re.search(r"\bin\s+([A-Za-z]+)\b", question or "")  # "... in GB?"
    return match.group(1).lower() if match and match.group(1).lower() in _UNITS and match.group(1) != "b" else None


def same_word(a: str, b: str) -> bool:
    """"pass" and "passes", "array" and "arrays": one word, singular or plural, any case."""
    def forms(word):
        word = word.lower()
        return {word, word[:-1] if word.endswith("s") else word, word[:-2] if word.endswith("es") else word}
    return bool(forms(a) & forms(b))


def number_text(text: str):
    """A number as typed, as a plain number string that keeps its digits ("1,000" -> "1000"), or the value of
    arithmetic on numbers ("2^38", "sqrt(169)") as a float's repr; None for anything else."""
    text = text.strip()
    if _PLAIN.fullmatch(text.replace(" ", "")) and re.search(r"\d", text):
        return text.replace(" ", "").replace(",", "")
    source = re.sub(r"√\s*(\d+(?:\.\d*)?|\([^()]*\))", r"sqrt(\1)", text)  # √169: sqrt(169)
    source = source.replace("^", "**").replace("×", "*").replace("·", "*")
    try:
        value = _arithmetic(ast.parse(source, mode="eval").body)
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    return repr(float(value))


def _scaled(number: str, factor: float) -> str:
    """``number`` (a number string) times ``factor``, its digits kept where the factor is a power of ten:
    "275" and 1e9 give "275e9", so that 275 GB is read as precisely as it was typed."""
    mantissa, _, exponent = number.lower().partition("e")
    if factor == 1:
        return number
    if factor in (1e3, 1e6, 1e9, 1e12):
        return f"{mantissa}e{int(exponent or 0) + round(math.log10(factor))}"
    return repr(float(number) * factor)


def _plain(text: str, question: str = ""):
    """A number as people write it, as a plain number string (its digits kept, for "as precise as typed"):
    "1/3", "2**6" or "2^6", "sqrt(169)" (arithmetic on numbers, read without eval), "33%", "275 GB", "16 bytes",
    "9 passes". Words after the number must be the unit or the thing the ``question`` asks for: a unit of memory
    is converted when the question asks for bytes, and must be the question's own when it asks for GB or MiB.
    Returns (text, None) or (None, why it cannot be read)."""
    raw = text.strip().replace("_", "")
    if not raw or _PLAIN.fullmatch(raw.replace(" ", "")):
        return raw, None  # a plain number, or something _as_number explains better
    percent = re.fullmatch(r"(.+?)\s*%", raw)
    if percent and _PLAIN.fullmatch(percent.group(1).strip()):
        return f"{percent.group(1).strip().replace(',', '')}e-2", None
    worded = re.fullmatch(r"(.*?[\d.)])\s*([A-Za-z][A-Za-z-]*(?:\s+[A-Za-z][A-Za-z-]*)*)\s*\.?", raw)
    number = number_text(worded.group(1)) if worded else None
    if number is None:
        value = number_text(raw)
        return (text.strip() if value is None else value), None  # not a number: _as_number says what it expected
    words = re.split(r"[\s-]+", worded.group(2).lower())
    counted = [w for w in re.split(r"[\s-]+", " ".join(counted_words(question)).lower()) if w]
    asked = _asked_unit(question)
    what = " ".join(counted_words(question))
    alone = "; type the number alone" + (f" (or with {counted[-1]!r})" if counted and not asked else "") + "."
    if words[0] in _UNITS:
        unit, rest = words[0], words[1:]
        if asked is None:
            return None, (f"{text!r:.40}: {_UNIT_NAMES[unit]} is a unit of memory, but the question "
                          + (f"asks how many {what}" if what else "does not ask for one") + alone)
        if rest and not all(any(same_word(w, c) for c in counted[1:]) for w in rest):
            return None, f"{text!r:.40}: the question asks how many {what}{alone}"
        if _UNITS[asked] == 1:  # asked for bytes: any multiple of a byte is a number of bytes
            return _scaled(number, _UNITS[unit]), None
        if _UNIT_NAMES[unit] != _UNIT_NAMES[asked]:
            name, other = _UNIT_NAMES[asked], _UNIT_NAMES[unit]
            one = "byte" if other == "bytes" else other
            return None, (f"{text!r:.40}: the question asks in {name} (1 {name} = {_POWERS[_UNITS[asked]]} bytes), "
                          f"and {other} is another unit (1 {one} = {_show(_UNITS[unit] / _UNITS[asked])} {name}). "
                          f"Give the number of {name}.")
        return number, None
    if counted and not asked and all(any(same_word(w, c) for c in counted) for w in words) and any(
            same_word(w, counted[-1]) for w in words):
        return number, None  # "9 passes", "20 such arrays": what the question counts
    if counted:
        return None, f"{text!r:.40}: the question asks how many {what}{alone}"
    return None, (f"{text!r:.40}: the unit {worded.group(2)!r} is not one the checker knows; type the number "
                  "alone, in the unit the question uses.")


def _arithmetic(node):
    """The value of +, -, *, / and ** on plain numbers, and of sqrt, exp and log (ln, log2, log10) of them, also
    written np.sqrt or math.sqrt; anything else (a name, another call) is refused."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in (
                "np", "numpy", "math"):
            name = func.attr
        else:
            name = func.id if isinstance(func, ast.Name) else None
        if name in _FUNCTIONS:
            return _FUNCTIONS[name](_arithmetic(node.args[0]))
        raise ValueError("not arithmetic on numbers")
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > 1000 or abs(left) > 1e6:
                raise ValueError("too large a power")
            return float(left) ** right
        return {ast.Add: lambda: left + right, ast.Sub: lambda: left - right, ast.Mult: lambda: left * right,
                ast.Div: lambda: left / right}[type(node.op)]()
    raise ValueError("not arithmetic on numbers")


def _show(number: float) -> str:
    """36 as 36, 274877906944 as 274,877,906,944, 1.64 as 1.64."""
    # twelve digits: enough to see how 48.000048 differs from 48, never the last-bit noise of 0.1 + 0.2
    return f"{int(number):,}" if number.is_integer() and abs(number) < 1e16 else f"{number:.12g}"


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-12


def significant_digits(answer) -> int:
    """How many significant digits the learner wrote: 3 for "1.64", 3.43 or 275e9; many for 0.9**50."""
    text = answer.strip() if isinstance(answer, str) else repr(float(answer))
    if not isinstance(answer, str) and text.endswith(".0"):  # 275e9 prints as 275000000000.0
        text = text[:-2].rstrip("0") or "0"
    mantissa = text.lower().split("e")[0].lstrip("+-").replace(",", "").replace("_", "")
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in mantissa else len(digits)


def _as_written(number: float, answer, expected: float) -> bool:
    """The right answer rounded to the precision the learner typed (at least 3 significant digits):
    3.43 for ln 31 = 3.434..., 275e9 for 274,877,906,944."""
    try:
        digits = significant_digits(answer)
    except (TypeError, ValueError):
        return False
    if digits < 3 or expected == 0 or not math.isfinite(expected):
        return False
    return float(f"{expected:.{digits - 1}e}") == float(f"{number:.{digits - 1}e}")


def _precision(given) -> float:
    """The relative tolerance the type of a given number allows: about float32's for an np.float32 (or float16's,
    or an array of one of them), and for a Python float that is exactly a float32 with more digits than anyone types
    (what a float32 tensor's .item() returns); 0 for anything else, a typed number included."""
    dtype = getattr(given, "dtype", None)
    if isinstance(given, (np.generic, np.ndarray)) and dtype.kind == "f" and dtype.itemsize < 8:
        eps = float(np.finfo(dtype).eps)
    elif (type(given) is float and math.isfinite(given) and not given.is_integer()
          and float(np.float32(given)) == given and significant_digits(given) > 8):
        eps = float(np.finfo(np.float32).eps)
    else:
        return 0.0
    return max(1e-5, 8 * eps)  # a few roundings of float32 arithmetic; float16's are coarser


def _same_number(number: float, answer, expected: float, rtol: float) -> bool:
    if float(expected).is_integer() and number.is_integer() and number == expected:
        return True  # a count is exact
    if float(expected).is_integer() and abs(expected) >= 1e6:
        return _as_written(number, answer, expected)  # a large count: exact, or rounded as typed
    return _close(number, expected, rtol) or _as_written(number, answer, expected)


def check(key, answer) -> Feedback:
    """Say whether ``answer`` solves exercise ``key``, and if not, what probably went wrong.

    The exercise's own type checks the answer; this wrapper makes sure that a checker never raises, and writes
    a verdict on a real attempt (correct or wrong) to the progress file (``progress.py``)."""
    try:
        ex = lookup(key)
        feedback = Feedback(UNREADABLE, unknown_message(key)) if ex is None else ex.check(answer)
    except Exception as err:  # a checker must never be the thing that crashes
        return Feedback(UNREADABLE, _failure(key, err))
    if feedback.status in (CORRECT, WRONG):
        record(key, feedback.status)
    return feedback


def _failure(key, err: Exception) -> str:
    """What to say when checking raised. If code of the learner's raised it (their object's own method, say),
    it is their answer that could not be read; if only the course's code, the libraries and code Python
    generates (a dataclass's methods, "<string>") ran, it is the course's bug, and the learner is told so,
    with the traceback to report."""
    import sys
    import traceback

    frames = [frame.filename for frame in traceback.extract_tb(err.__traceback__)]
    package = str(Path(__file__).resolve().parents[2])
    libraries = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    generated = [f for f in frames if f.startswith("<") and not f.startswith(("<ipython-input", "<cell"))]
    theirs = [f for f in frames if f not in generated and not str(Path(f).resolve()).startswith((package, *libraries))]
    if theirs:
        return f"Could not read that answer: reading it ran your code, which raised {type(err).__name__}: {err}"
    return (f"This is a bug in the course, not in your answer: the checker of {key!r} failed. Please report it with "
            "this traceback:\n\n" + "".join(traceback.format_exception(err)).rstrip())


def _words(text: str) -> str:
    """Lower case, single spaces, no articles, no end punctuation: "The mask before the reduction." -> "mask before reduction"."""
    words = [w for w in text.strip().strip(".!?").lower().replace("-", " ").split() if w not in ("the", "a", "an")]
    return " ".join(words)


def _as_array(answer):
    """(float array, None) or (None, why it is not one)."""
    kind = _tensor_kind(answer)
    if kind == "Value":
        return None, "You passed a Value, not an array. Compute the array with NumPy (or with Tensors)."
    if kind == "Tensor":
        answer = answer.data  # a haaw Tensor holding the right numbers is a right answer
    elif kind == "torch tensor":
        answer = answer.detach().cpu().double().numpy()  # double(): NumPy has no bfloat16 of torch's
    if isinstance(answer, (str, bytes, dict, bool)) or answer is None:
        return None, f"Expected a NumPy array, got {type(answer).__name__}."
    try:
        array = np.asarray(answer, dtype=np.float64)
    except OverflowError:
        return None, "Expected a NumPy array of numbers: " + "a number in your answer is too large for a float (floats stop near 1.8e308)."
    except (TypeError, ValueError):
        return None, f"Expected a NumPy array of numbers, got {type(answer).__name__} that is not one."
    if not np.all(np.isfinite(array)):
        return None, "Your array contains inf or nan: look for a division by zero or an overflow."
    return array, None


def _matches(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=rtol, atol=rtol)


@dataclass(kw_only=True)
class _TypedAnswer(Exercise):
    """An exercise answered with something typed (a number, an array, words): what the three types share, the
    worked solution as text and the verdict when there is no answer yet. Each type reads a given answer in
    ``_check_given``."""

    solution: str = ""

    def worked_solution(self) -> str:
        return f"Solution: {self.solution}"

    def check(self, answer) -> Feedback:
        if answer is Ellipsis:
            return Feedback(NOT_ATTEMPTED, f"Not attempted yet: replace the ... with your answer, then run the cell. "
                                           f"Stuck? hint({self.key!r}) gives a nudge.")
        if answer is None:
            return Feedback(UNREADABLE, "Your answer is None: did the cell forget to assign or return a value?")
        return self._check_given(answer)

    def _check_given(self, answer) -> Feedback:
        raise NotImplementedError


@dataclass(kw_only=True)
class NumberExercise(_TypedAnswer):
    """An answer that is one number, typed as a number, a string ("2^38", "274.9e9", "16 bytes") or a sum."""

    answer: float
    mistakes: dict = field(default_factory=dict)  # {wrong number: why it is wrong}
    rtol: float = 1e-9  # relative: a count of 1,000,000 is not 999,999
    forms: tuple = ()  # other ways a learner may correctly write the answer (all must be accepted)

    def mistake_pairs(self) -> list:
        return list(self.mistakes.items())

    def _check_given(self, answer) -> Feedback:
        given = answer
        if isinstance(answer, str):
            answer, problem = _plain(answer, self.question)
            if problem:
                return Feedback(UNREADABLE, problem)
        number, problem = _as_number(answer)
        if problem:
            return Feedback(UNREADABLE, problem)
        rtol = max(self.rtol, _precision(given))  # np.float32(-0.15) is -0.15 as float32 holds it
        expected = float(self.answer)
        counted = expected.is_integer() and (number.is_integer() or abs(expected) >= 1e6)  # a count: exact only
        if number == expected or (not counted and _close(number, expected, rtol)):
            return Feedback(CORRECT, f"Correct: {_show(number)}.")
        for wrong, why in self.mistake_pairs():  # a named mistake first: "2.00" is the mistake 2, not 2.002 rounded
            if _close(number, float(wrong), rtol):
                return Feedback(WRONG, f"Not quite: {_show(number)}. {why}")
        if _same_number(number, answer, expected, rtol):
            return Feedback(CORRECT, f"Correct: {_show(number)}.")
        if _close(number, -float(self.answer), rtol):
            return Feedback(WRONG, f"Not quite: {_show(number)}. The size is right but the sign is not: check it.")
        asked = _asked_unit(self.question)
        if asked and _UNITS[asked] != 1 and _close(number, expected * _UNITS[asked], rtol):
            name = _UNIT_NAMES[asked]
            return Feedback(WRONG, f"Not quite: {_show(number)} is the answer in bytes, but the question asks in "
                                   f"{name}: give the number of {name} (1 {name} = {_POWERS[_UNITS[asked]]} bytes).")
        return Feedback(WRONG, f"Not quite: {_show(number)} is not it. Try hint({self.key!r}).")


@dataclass(kw_only=True)
class ArrayExercise(_TypedAnswer):
    """An answer that is an array (a NumPy array, a haaw Tensor or a torch tensor holding the numbers)."""

    answer: np.ndarray
    mistakes: tuple = ()  # ((wrong array, why it is wrong), ...)
    rtol: float = 1e-9

    def mistake_pairs(self) -> list:
        return list(self.mistakes)

    def _check_given(self, answer) -> Feedback:
        array, problem = _as_array(answer)
        if problem:
            return Feedback(UNREADABLE, problem)
        expected = self.answer
        if _matches(array, expected, self.rtol):
            return Feedback(CORRECT, f"Correct: shape {expected.shape}, every entry right.")
        for wrong, why in self.mistake_pairs():
            if _matches(array, np.asarray(wrong, dtype=np.float64), self.rtol):
                return Feedback(WRONG, f"Not quite. {why}")
        if array.shape != expected.shape:
            if array.ndim == 2 and _matches(array.T, expected, self.rtol):
                return Feedback(WRONG, f"Not quite: you have the transpose, shape {array.shape}. A gradient has the "
                                       f"shape of what it is the gradient of, {expected.shape}. Transpose your result, or use "
                                       "(AB)ᵀ = BᵀAᵀ: swap the two factors and transpose each.")
            return Feedback(WRONG, f"Not quite: your answer has shape {array.shape}, but it must have shape "
                                   f"{expected.shape}, the shape of what it is the gradient of.")
        if _matches(-array, expected, self.rtol):
            return Feedback(WRONG, "Not quite: every entry has the wrong sign.")
        wrong = ~np.isclose(array, expected, rtol=self.rtol, atol=self.rtol)
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return Feedback(WRONG, f"Not quite: {int(wrong.sum())} of {wrong.size} entries differ; the first at {first}: "
                               f"yours {array[first]:g}, expected {expected[first]:g}. Try hint({self.key!r}).")


@dataclass(kw_only=True)
class ChoiceExercise(_TypedAnswer):
    """An answer in words, one of ``choices`` (spelling, case, articles and end punctuation aside)."""

    answer: str | tuple  # the right words, or every accepted spelling of them
    choices: tuple  # every word the checker understands
    mistakes: dict = field(default_factory=dict)  # {wrong words: why they are wrong}

    def mistake_pairs(self) -> list:
        return list(self.mistakes.items())

    def _check_given(self, answer) -> Feedback:
        options = ", ".join(repr(c) for c in self.choices)
        if not isinstance(answer, str):
            return Feedback(UNREADABLE, f"Answer with words, one of: {options}.")
        word = _words(answer)
        accepted = self.answer if isinstance(self.answer, tuple) else (self.answer,)
        known = {_words(a) for a in accepted} | {_words(w) for w, _ in self.mistake_pairs()}
        if word not in known:  # "backward()" or "backwards" for "backward"
            for form in (word.replace("()", ""), word[:-1] if word.endswith("s") else word):
                if form in known:
                    word = form
                    break
        if word not in known:  # "back-prop" or "back prop" for "backprop": the same word, spaced or hyphenated
            squeezed = {k.replace(" ", "").replace("()", ""): k for k in known}
            for form in (word.replace(" ", "").replace("()", ""), word.replace(" ", "").replace("()", "").rstrip("s")):
                if form in squeezed:
                    word = squeezed[form]
                    break
        if word in {_words(a) for a in accepted}:
            return Feedback(CORRECT, f"Correct: {' '.join(answer.split()).rstrip('.')}.")  # in the learner's words
        for wrong, why in self.mistake_pairs():
            if word == _words(wrong):
                return Feedback(WRONG, f"Not quite: {' '.join(answer.split()).rstrip('.')}. {why}")
        return Feedback(UNREADABLE, f"{answer!r:.40} is not one of the answers the checker knows: {options}.")


def _line_number(value) -> int | None:
    """A line number as people give it: 4, 4.0, "4", "line 4"; None for anything else (True, 4.5, "four")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(?:line\s*)?(\d{1,6})\s*", value, flags=re.IGNORECASE)
        return int(match.group(1)) if match else None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


@dataclass(kw_only=True)
class BugExercise(_TypedAnswer):
    """A short listing with one bug: the answer is the line that holds it and what it does, as a pair
    ``(line, explanation)``, the explanation one of ``explanations`` (a menu shared by a notebook's listings).

    The checker knows what every other line does (``line_notes``: a learner who blames a correct line is told what
    it does) and, for the buggy line, why each other explanation is not it (``explanation_notes``)."""

    lines: int  # the listing's lines are numbered 1 to lines
    line: int  # the one that holds the bug
    explanation: str  # the right key of ``explanations``
    explanations: dict  # {key: (other words a learner may use for it, ...)}
    line_notes: dict  # {every other line: what it does, and why it is fine}
    explanation_notes: dict  # {every other key: why the buggy line does not do that}

    does: str  # what the buggy line really does, told to a learner who names it with the wrong explanation

    def __post_init__(self):
        if set(self.line_notes) != set(range(1, self.lines + 1)) - {self.line}:
            raise ValueError(f"{self.key}: line_notes must say what every other line does")
        if set(self.explanation_notes) != set(self.explanations) - {self.explanation}:
            raise ValueError(f"{self.key}: explanation_notes must cover every other explanation")

    @property
    def answer(self) -> tuple:
        return (self.line, self.explanation)

    def mistake_pairs(self) -> list:
        return ([((n, self.explanation), why) for n, why in self.line_notes.items()]
                + [((self.line, key), why) for key, why in self.explanation_notes.items()])

    def _menu(self) -> str:
        return ", ".join(repr(k) for k in self.explanations)

    def _form(self) -> str:
        return (f"Answer with a pair: the line's number and what goes wrong there, for example "
                f"check({self.key!r}, (2, {list(self.explanations)[-1]!r})).")

    def _explanation(self, words: str):
        """(key, None) or (None, why the words are not one of the menu's)."""
        word, spellings = _words(words), {}
        for key, synonyms in self.explanations.items():
            for w in (key, *synonyms):
                spellings.setdefault(_words(w), key)  # the first key to claim a spelling keeps it
        if word in spellings:
            return spellings[word], None
        close = difflib.get_close_matches(word, list(spellings), n=1, cutoff=0.75)
        guess = f" Did you mean {spellings[close[0]]!r}?" if close else ""
        return None, f"{words!r:.40} is not an explanation the checker knows.{guess} The explanations: {self._menu()}."

    def _check_given(self, answer) -> Feedback:
        if isinstance(answer, np.ndarray):
            answer = answer.tolist() if answer.ndim == 1 else answer
        if not isinstance(answer, (tuple, list)) or len(answer) != 2:
            return Feedback(UNREADABLE, self._form())
        first, second = answer
        if _line_number(first) is None and _line_number(second) is not None:
            first, second = second, first  # ("per example", 4): the order swapped, the meaning clear
        number = _line_number(first)
        if number is None:
            return Feedback(UNREADABLE, f"{first!r:.40} is not a line number. {self._form()}")
        if not isinstance(second, str):
            return Feedback(UNREADABLE, f"Say what goes wrong in words, one of: {self._menu()}. {self._form()}")
        if not 1 <= number <= self.lines:
            shown = f"line {number}" if abs(number) < 10**6 else "line that far down"
            return Feedback(UNREADABLE, f"The listing's lines are numbered 1 to {self.lines}; there is no {shown}.")
        key, problem = self._explanation(second)
        if problem:
            return Feedback(UNREADABLE, problem)
        if number == self.line and key == self.explanation:
            return Feedback(CORRECT, f"Correct: line {number}, {key}.")
        if number == self.line:
            return Feedback(WRONG, f"Right line, but not {key!r}: {self.explanation_notes[key]} "
                                   f"What line {number} does instead: {self.does}")
        if key == self.explanation:
            return Feedback(WRONG, f"That is the right kind of bug, but not on line {number}: {self.line_notes[number]}")
        return Feedback(WRONG, f"Not line {number}: {self.line_notes[number]} Try hint({self.key!r}).")


def hint(key, level: int | None = None) -> Feedback:
    """The next hint for ``key`` (or hint number ``level``); each gives away a little more."""
    ex = lookup(key)
    if ex is None:
        return Feedback(UNREADABLE, unknown_message(key))
    solved = f"solution({key!r}) shows the worked answer" if solutions_allowed() else "solutions are switched off here"
    if not ex.hints:
        return Feedback("hint", f"There is no hint for {key!r}; {solved}.")
    if level is None:
        level = min(_hints_shown.get(key, 0) + 1, len(ex.hints))
    elif isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 1 <= level <= len(ex.hints):
        return Feedback(UNREADABLE, f"hint({key!r}, level) takes a level from 1 to {len(ex.hints)}; got {level!r}.")
    _hints_shown[key] = level
    more = (f" (hint({key!r}) again for hint {level + 1})" if level < len(ex.hints)
            else f" That was the last hint: {solved}." if solutions_allowed()
            else f" That was the last hint ({solved}): the rest is yours, and check({key!r}, ...) says what is off.")
    return Feedback("hint", f"Hint {level}/{len(ex.hints)}: {ex.hints[level - 1]}{more}")


def solution(key) -> Feedback:
    """The worked solution of ``key`` (unless an instructor switched solutions off: HAAW_SOLUTIONS=off)."""
    ex = lookup(key)
    if ex is None:
        return Feedback(UNREADABLE, unknown_message(key))
    if not solutions_allowed():
        return Feedback("solution", "Solutions are switched off here (HAAW_SOLUTIONS=off, set by whoever runs this "
                                    f"course): hint({key!r}) still works, one step at a time.")
    return Feedback("solution", ex.worked_solution())
