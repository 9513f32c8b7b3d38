"""The student edition of the notebooks, written from the instructor edition the repository holds.

    python -m haaw.course.editions student OUT_DIR [--notebooks DIR]

A student edition is the same notebooks with these differences: ``solution(...)`` is switched off (the
first code cell sets HAAW_SOLUTIONS=off; ``hint(...)`` still works, tier by tier) and the text no longer
points at it; every exercise cell's stored output is cleared, so nothing is shown before the learner
runs it; and so is every later cell's output that would give away a number an exercise asks for, or, in the same
section, the words of a word answer (a choice, or what a bug does). On a shared
JupyterHub, also set HAAW_SOLUTIONS=off in the hub's environment. Neither is a lock: a learner can set the
variable back in a cell, and the course's code is installed with it (the instructor guide says so).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from .style import FIGURE_TEXT  # an output's metadata key: the words drawn in a figure

SWITCH = 'import os\nos.environ["HAAW_SOLUTIONS"] = "off"  # student edition: solution(...) is switched off\n'
EXERCISE = re.compile(r"\bcheck\(\s*[\"']")
KEY = re.compile(r"""\bcheck\(\s*["']([^"']+)""")


# "`hint("k")` nudges, `solution("k")` shows one way to write it." → "`hint("k")` nudges.": solution() is off
POINTER = re.compile(r"""(`hint\("[^"]+"\)`\s*)(gives a nudge \(ask again for more\)|nudges),\s*`solution\("[^"]+"\)`"""
                     r"""\s*(?:the worked answer|shows one way to write it)\.""")
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
ARRAY = re.compile(r"\[[-+\d.,eE\s\[\]]*\d[-+\d.,eE\s\[\]]*\]")  # a printed array: [1. 4.], [[0. 3.]\n [1. 1.]]


def shown_digits(token: str) -> int:
    """The significant digits a printed number shows. A whole number shows every digit, trailing zeros too:
    a printed "10" is ten, a count, not 12 rounded to one digit. A decimal shows its digits from the first
    that is not zero ("0.360" shows 3, "1.64" shows 3); with an exponent, the mantissa's."""
    mantissa = token.lower().split("e")[0].lstrip("+-").replace(",", "")
    digits = mantissa.replace(".", "").lstrip("0")
    return max(len(digits), 1)


def _equal_as_shown(token: str, answer: float) -> bool:
    """Is ``answer`` the printed ``token`` at the digits it shows (the sign aside: -0.15 and 0.15 give it away)?"""
    try:
        value = abs(float(token.replace(",", "")))
    except ValueError:
        return False
    answer = abs(float(answer))
    if not value or not math.isfinite(value) or not answer:
        return False
    digits = shown_digits(token)
    return float(f"{value:.{digits - 1}e}") == float(f"{answer:.{digits - 1}e}")


def reveals(text: str, answer: float, counted: tuple = (), *, prose: bool = False, percent: bool = False) -> bool:
    """Does a number in ``text`` give ``answer`` away: equal to it at the digits the number shows?

    A number of one significant digit ("9", "0.5", "2e-3") is everywhere (a count, a step, an index): it gives
    an answer of less than 10 away only when a word after it is what the question counts (``counted``, the
    words of "how many forward-mode passes": "9 forward passes"). Ten or more, a one-digit number can only show
    exactly, written with its zeros ("20" is twenty). In ``prose`` (a markdown cell, the README), which names
    many counts, a whole-number answer to a "how many" question needs that word after it too ("16 bytes"); so does
    it in printed output, where counts of other things are as common ("k = 16", "16 wide, batch 16" say nothing of
    the 16 bytes Adam keeps a parameter). A number joined to a word by a hyphen ("16-bit") names a kind, not a
    count: it gives nothing away. A percentage ("1.0% become 0") is a share, not its number: it gives away only the
    answer of a question that asks for a percentage (``percent``)."""
    if not answer:
        return False
    words = [c for c in counted if len(c) > 3]
    for match in NUMBER.finditer(text):
        token = match.group(0)
        if re.match(r"\s?%", text[match.end():]) and not percent:
            continue  # "1.0% become 0" is a share, not the number 1.0
        if not _equal_as_shown(token, answer) or re.match(r"-[A-Za-z]", text[match.end():]):
            continue  # "16-bit" is a kind of number, not sixteen of anything
        after = re.findall(r"[A-Za-z]+", text[match.end():match.end() + 40])[:3]
        says_what = any(_same_word(w, c) for w in after for c in words)
        if shown_digits(token) < 2 and abs(answer) < 10:
            if says_what:
                return True
        elif not (words and float(answer).is_integer()) or says_what:
            return True
    return False


def _same_word(a: str, b: str) -> bool:
    from .exercises.core import same_word as same

    return same(a, b)


def reveals_array(text: str, answer) -> bool:
    """Does ``text`` print the array ``answer``: a bracketed list of its numbers, in order, each equal at the digits
    it shows ("dL/db = [1. 4.]" gives [1, 4] away)?"""
    import numpy as np

    flat = np.asarray(answer, dtype=np.float64).ravel()
    for match in ARRAY.finditer(text):
        tokens = NUMBER.findall(match.group(0))
        if len(tokens) != flat.size:
            continue
        if all(float(t.replace(",", "")) == 0.0 if a == 0 else (_equal_as_shown(t, a) and (float(t) < 0) == (a < 0))
               for t, a in zip(tokens, flat)):
            return True
    return False


def _numeric_answer(key: str):
    """(answer, the words of what its question counts) for a number exercise, else None."""
    from .exercises import REGISTRY
    from .exercises.core import NumberExercise, counted_words

    ex = REGISTRY.get(key)
    if not isinstance(ex, NumberExercise) or not isinstance(ex.answer, (int, float)):
        return None
    return float(ex.answer), tuple(w.lower() for w in counted_words(ex.question))


def _question(key: str) -> str:
    from .exercises import REGISTRY

    ex = REGISTRY.get(key)
    return getattr(ex, "question", "") if ex is not None else ""


def _asks_percent(key: str) -> bool:
    question = _question(key).lower()
    return "%" in question or "percent" in question or "per cent" in question


def _array_answer(key: str):
    from .exercises import REGISTRY
    from .exercises.core import ArrayExercise

    ex = REGISTRY.get(key)
    return ex.answer if isinstance(ex, ArrayExercise) else None


def _word_answers(key: str) -> tuple:
    """The words of a word answer (a choice, or what a bug does) in every spelling the checker accepts, lower case."""
    from .exercises import REGISTRY
    from .exercises.core import BugExercise, ChoiceExercise

    ex = REGISTRY.get(key)
    if isinstance(ex, BugExercise):
        return tuple(w.lower() for w in (ex.explanation, *ex.explanations[ex.explanation]))
    if isinstance(ex, ChoiceExercise):
        return tuple(w.lower() for w in (ex.answer if isinstance(ex.answer, tuple) else (ex.answer,)))
    return ()


def _says(text: str, words: tuple) -> bool:
    """Does ``text`` hold one of ``words`` as a whole phrase (any case)?"""
    low = text.lower()
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", low) for w in words)


def _output_text(cell) -> str:
    """What a cell's outputs show in words: printed text, results, and a figure's description and the words drawn in
    it (titles, axis labels, legends, annotations: ``show_figure`` stores them in the output's metadata)."""
    parts = []
    for o in cell.get("outputs", []):
        parts.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
        parts.extend(o.get("metadata", {}).get(FIGURE_TEXT, []))
    return "\n".join(parts)


class Answers:
    """The answers of the exercises met so far while reading a notebook from the top, and what gives one away.

    Numbers and arrays stay asked to the end of the notebook; the words of a word answer ("backward" recurs
    everywhere) only within the exercise's own section."""

    def __init__(self):
        self.numbers, self.arrays, self.words, self.last = [], [], [], []

    def new_section(self):
        self.words = []

    def meet(self, source: str):
        """Note the exercises that the code cell ``source`` asks (``last``: those of the latest code cell)."""
        self.last = KEY.findall(source)
        for key in self.last:
            number, array, words = _numeric_answer(key), _array_answer(key), _word_answers(key)
            if number is not None:
                self.numbers.append((key, *number))
            if array is not None:
                self.arrays.append((key, array))
            if words:
                self.words.append((key, words))

    def given_away(self, text: str, keys=None, prose: bool = False) -> list:
        """The keys of the answers met so far (or of those among ``keys``) that ``text`` gives away. In ``prose``,
        a number the question itself states ("at d_k = 64") gives nothing away: the reader has just read it."""
        def asked(key):
            return keys is None or key in keys

        def said(key):
            return NUMBER.findall(_question(key)) if prose else []

        found = [k for k, a, counted in self.numbers if asked(k)
                 and reveals(_without(text, said(k)), a, counted, prose=prose, percent=_asks_percent(k))]
        found += [k for k, a in self.arrays if asked(k) and reveals_array(text, a)]
        found += [k for k, w in self.words if asked(k) and _says(text, w)]
        return list(dict.fromkeys(found))


def _without(text: str, numbers: list) -> str:
    """``text`` with the numbers in ``numbers`` taken out, as whole numbers."""
    for n in set(numbers):
        text = re.sub(rf"(?<![\w.]){re.escape(n)}(?![\w]|\.\d)", " ", text)
    return text


def leaks(nb) -> list:
    """Every place in notebook ``nb`` that gives away the answer of an exercise asked above it: (cell index,
    "output" or "markdown", exercise key). An output, of any later cell; a markdown cell, right under the
    exercise (before the next code cell), where the eye falls on it while answering. The student edition clears
    an output; a markdown cell it cannot change: its text must be written not to say the answer."""
    found, answers, under = [], Answers(), False
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            if re.match(r"## ", cell.source):
                answers.new_section()
                under = False
            if under:
                found += [(i, "markdown", k) for k in answers.given_away(_prose(cell.source), answers.last, prose=True)]
            continue
        if cell.cell_type != "code":
            continue
        found += [(i, "output", k) for k in answers.given_away(_output_text(cell))]
        answers.meet(cell.source)
        under = bool(answers.last)
    return found


def readme_leaks(text: str) -> list:
    """Where a text beside the notebooks (the README) states the numeric or array answer of an exercise in the
    row or line that names its notebook ("notebooks/01_..."): (line number, key)."""
    from .exercises import REGISTRY

    found = []
    for n, line in enumerate(text.splitlines(), 1):
        named = set(re.findall(r"notebooks/(?:deeper/)?(\d\d)_", line))
        if not named:
            continue
        answers = Answers()
        for key in (k for k in REGISTRY if k[:2] in named):
            answers.meet(f'check("{key}", ...)')
        answers.words = []  # a word answer ("backward") is a word of every description
        found += [(n, k) for k in answers.given_away(_prose(line), prose=True)]
    return found


def _prose(source: str) -> str:
    """A markdown cell's words without link targets and heading numbers, which are addresses, not answers."""
    return re.sub(r"\]\([^)]*\)", "]", source)


_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
FORMULA = re.compile(r"(?<![\w/])d[A-Za-z]\w*\s*=\s*[^\s,;.]")  # "dV = Pᵀ G": a result's formula, whole


def _expressions(text: str):
    """The arithmetic a text writes out ("0.9 ** 50", "√(3² + 4² + 12²)", "2^(30 − 24)", "−ln(1/31)"), each as a
    value, read without eval (the checker's own reader of typed answers)."""
    from .exercises.core import number_text

    text = text.replace("−", "-").replace("×", "*").replace("·", "*")
    text = re.sub(r"([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)", lambda m: "**(" + m.group(1).translate(_SUPERSCRIPT) + ")", text)
    text = re.sub(r"\b(ln|log|exp|sqrt)\s+(\d+(?:\.\d+)?)", r"\1(\2)", text)
    text = text.replace("√(", "sqrt(")
    parts = re.split(r"[=:;,]|\.(?:\s|$)|≈", text)
    parts += re.findall(r"[-+*/^().\d\s]*\d[-+*/^().\d\s]*", text)  # "sum × 1/4": the arithmetic among the words
    for part in parts:
        part = part.strip().strip(".").lstrip("*/+^ ").rstrip("*/+-^ ")
        if re.search(r"\d", part) and re.search(r"[-+*/^√]|ln|log|exp|sqrt", part) and re.fullmatch(r"[-+*/^().\d\s√]*(?:(?:ln|log|exp|sqrt)[-+*/^().\d\s]*)*", part):
            value = number_text(part)
            if value is not None:
                yield float(value)


def hint_gives_away(ex, text: str) -> str | None:
    """Why hint ``text`` of exercise ``ex`` is its answer rather than a way to it, or None. A hint may lead up to
    the last step; it may not take it: print the number, write out the arithmetic that is the number, print the
    array, or give the formula of a result (``dX = ...``) whole."""
    from .exercises.core import ArrayExercise, NumberExercise

    if isinstance(ex, NumberExercise) and isinstance(ex.answer, (int, float)):
        answer = float(ex.answer)
        from .exercises.core import counted_words

        if reveals(text, answer, tuple(w.lower() for w in counted_words(ex.question))):
            return f"it states the answer, {answer:g}"
        if any(math.isclose(v, answer, rel_tol=1e-9) for v in _expressions(text)):
            return f"its arithmetic is the answer, {answer:g}"
    if isinstance(ex, ArrayExercise) and reveals_array(text, ex.answer):
        return "it prints the answer's array"
    if len(FORMULA.findall(text)) >= 1 and type(ex).__name__ == "CodeExercise":
        return f"it gives the formula of a result whole: {FORMULA.findall(text)}"
    return None


def hint_leaks() -> list:
    """(key, hint level, why) for every hint of every exercise that gives its answer away."""
    from .exercises import REGISTRY

    return [(key, level, why) for key, ex in REGISTRY.items() for level, text in enumerate(ex.hints, 1)
            if (why := hint_gives_away(ex, text))]


def _widget_text(nb) -> str:
    """The words the explorers' saved state holds (the values of their text boxes and outputs): a saved
    notebook shows them wherever an explorer's output is displayed, whichever cell asks the exercise."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    parts = []
    for model in state.values():
        shown = model.get("state", {})
        for value in (shown.get("value"), shown.get("description")):
            if isinstance(value, str):
                parts.append(re.sub(r"<[^>]+>", " ", value))
        for o in shown.get("outputs", []):  # an Output widget's outputs: printed text and figures' words
            if isinstance(o, dict):
                parts.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
                parts.extend(o.get("metadata", {}).get(FIGURE_TEXT, []))
    return "\n".join(parts)


def widget_leaks(nb) -> list:
    """The exercise keys of notebook ``nb`` whose answers its explorers' saved state gives away."""
    answers = Answers()
    answers.meet("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
    answers.words = []  # a word answer is a word of every explorer's labels
    return answers.given_away(_widget_text(nb), prose=True)  # a slider at the question's own value is no answer


def student_notebook(nb):
    """A student copy of the notebook object ``nb`` (nbformat), changed in place and returned."""
    if widget_leaks(nb):  # the explorers' saved state shows an answer: the learner runs them to see them
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.get("outputs", [])):
                cell.outputs, cell.execution_count = [], None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = POINTER.sub(r"\1\2.", cell.source)
    answers = Answers()
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.match(r"## ", cell.source):
            answers.new_section()
        if cell.cell_type != "code":
            continue
        if answers.given_away(_output_text(cell)):
            cell.outputs, cell.execution_count = [], None  # run it to see: after you have answered
        answers.meet(cell.source)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and SWITCH not in code[0].source:
        first = code[0].source
        magic, _, rest = first.partition("\n") if first.startswith("%") else ("", "", first)
        code[0].source = (magic + "\n" if magic else "") + SWITCH + rest
    for cell in code:
        if EXERCISE.search(cell.source):
            cell.outputs, cell.execution_count = [], None
    return nb


def course_notebooks(folder: Path, *, cores: bool = True, companions: bool = True) -> list[Path]:
    """The course's notebooks in ``folder``, in course order: the setup check and the cores (``NN_name.ipynb``),
    then the companions that go deeper (``deeper/NN_name_deeper.ipynb``), in their cores' order."""
    found = sorted(folder.glob("[0-9][0-9]_*.ipynb")) if cores else []
    return found + (sorted(folder.glob("deeper/[0-9][0-9]_*_deeper.ipynb")) if companions else [])


def write_student_edition(out: Path, source: Path) -> list[Path]:
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in course_notebooks(source):
        nb = student_notebook(nbformat.read(path, as_version=4))
        target = out / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the student edition of the course's notebooks.")
    parser.add_argument("edition", choices=["student"])
    parser.add_argument("out", type=Path, help="folder to write the notebooks into")
    parser.add_argument("--notebooks", type=Path, default=Path(__file__).resolve().parents[2] / "notebooks",
                        help="the instructor edition (default: the repository's notebooks/)")
    args = parser.parse_args(argv)
    if args.out.resolve() == args.notebooks.resolve():
        parser.error("write the student edition to another folder: the repository keeps the instructor edition")
    written = write_student_edition(args.out, args.notebooks)
    print(f"wrote {len(written)} student notebooks to {args.out} (solutions off, exercise outputs cleared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
