"""What a reader sees: every figure in the prose is shown by a cell, every exercise asks its question
on the page, no answer is printed before it is asked, and the learner's own code runs in the engine."""
import re
from pathlib import Path

import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.editions import course_notebooks
from haaw.course.exercises.code import CodeExercise
from haaw.course.exercises.core import CORRECT, ArrayExercise, BugExercise, ChoiceExercise, _show

NOTEBOOKS = course_notebooks(Path(__file__).resolve().parents[2] / "notebooks")
LESSONS = [p for p in NOTEBOOKS if not p.name.startswith("00")]  # 00 checks the setup: no lesson, no exercise
ANSWER_KEYS = sorted(k for k, ex in REGISTRY.items() if not isinstance(ex, CodeExercise))

# Figures a notebook may state without computing them: facts quoted from the literature or the
# source texts, each with the reason it is not measured here.
STATED = {
    "06": {  # Korthikanti et al. 2022, abstract (a 530B-parameter GPT model on a GPU cluster): not measurable here
        "42.1%": "model FLOPs utilisation with full activation recomputation",
        "54.2%": "model FLOPs utilisation with selective recomputation and sequence parallelism",
        "29%": "54.2 / 42.1: the step that much faster than with full recomputation",
        "90%": "selective recomputation and sequence parallelism together remove over 90% of the time overhead "
               "that activation recomputation adds",
    },
    "08": {  # Chowdhery et al. 2022 (PaLM), section 5.1, on their loss spikes: not measurable here
        "100": "restarted from a checkpoint about 100 steps before the spike, skipping a few hundred batches",
    },
}

NUMBER = re.compile(r"(?<![\w.^/⁻])(\d{1,3}(?:,\d{3})+|\d+\.\d+|\d+)(?:e(-?\d+))?(\s*%)?(?![\w.]*\d)")


def numbers_in(text: str):
    """(as written, value, decimals, percent) for every number in ``text``."""
    for m in NUMBER.finditer(text):
        digits, exponent, percent = m.group(1), m.group(2), m.group(3)
        value = float(digits.replace(",", "")) * (10.0 ** int(exponent) if exponent else 1.0)
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        yield m.group(0).strip(), value, decimals, bool(percent)


def worth_checking(written: str, value: float, decimals: int, percent: bool) -> bool:
    """A measured-looking figure: a decimal, a percentage, or a number of at least 100 (not a year)."""
    if percent or decimals:
        return True
    return value >= 100 and not (1900 <= value <= 2099 and "," not in written)


def shown(value: float, decimals: int, percent: bool, pool: np.ndarray) -> bool:
    """Does some number the cells show or set round to ``value`` as written?"""
    if pool.size == 0:
        return False
    candidates = [pool, 100 * pool] if percent else [pool]
    tol = 0.5 * 10.0 ** -decimals + 1e-9
    return any(np.any(np.abs(c - value) <= tol * max(1.0, 1e-12)) or np.any(np.isclose(c, value, rtol=1e-9))
               for c in candidates)


def cell_numbers(nb) -> np.ndarray:
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        texts.append(cell.source)
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            texts.extend(str(v) for k, v in out.get("data", {}).items() if k in ("text/plain", "text/html"))
    return np.array([v for t in texts for _, v, _, _ in numbers_in(t)], dtype=np.float64)


def prose(cell) -> str:
    """A markdown cell's text without links' targets, which are addresses, not figures."""
    return re.sub(r"\]\([^)]*\)", "]", cell.source)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_in_the_prose_is_shown_by_a_cell(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    pool = cell_numbers(nb)
    allowed = STATED.get(path.name[:2], {})
    missing = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for written, value, decimals, percent in numbers_in(prose(cell)):
            if worth_checking(written, value, decimals, percent) and written not in allowed \
                    and not shown(value, decimals, percent, pool):
                missing.append(f"cell {i}: {written!r}")
    assert not missing, f"{path.name}: figures in the text that no cell shows or sets: {missing}"


def check_cells(nb):
    """(index, key) of every code cell that calls check("key", ...)."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for key in re.findall(r"check\(\s*[\"']([^\"']+)[\"']", cell.source):
                yield i, key


def squash(text: str) -> str:
    return re.sub(r"[\s*`_]+", " ", text).strip().lower()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_exercise_asks_its_question_on_the_page_and_is_stored_untouched(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    found = list(check_cells(nb))
    if path.parent.name != "deeper":  # a core has one in code; its companion may ask only for answers
        assert any(isinstance(REGISTRY[k], CodeExercise) for _, k in found), "at least one code exercise"
    for i, key in found:
        assert key in REGISTRY, f"cell {i}: no exercise {key!r}"
        above = next(c for c in reversed(nb.cells[:i]) if c.cell_type == "markdown")
        assert squash(REGISTRY[key].question) in squash(above.source), f"cell {i}: the question of {key} is not above it"
        printed = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                          for o in nb.cells[i].get("outputs", []))
        assert "Not attempted yet" in printed, f"cell {i}: the stored output of {key} should be the untouched one"


def answer_forms(ex) -> list:
    if isinstance(ex, BugExercise):
        return [ex.answer]
    if isinstance(ex, ChoiceExercise):
        return list(ex.answer if isinstance(ex.answer, tuple) else (ex.answer,))
    if isinstance(ex, ArrayExercise):
        return []
    return [_show(float(ex.answer))] + [str(f) for f in ex.forms]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_answer_is_printed_before_its_question(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    for i, key in check_cells(nb):
        ex = REGISTRY[key]
        if isinstance(ex, (CodeExercise, ChoiceExercise, BugExercise)):
            continue
        earlier = " ".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                           for c in nb.cells[:i] if c.cell_type == "code" for o in c.get("outputs", []))
        for form in answer_forms(ex):
            assert not re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", earlier), \
                f"{path.name}, exercise {key}: its answer {form} is printed above the question"


@pytest.mark.parametrize("key", ANSWER_KEYS)
def test_every_documented_form_of_an_answer_is_accepted(key):
    ex = REGISTRY[key]
    forms = [ex.answer] if isinstance(ex.answer, np.ndarray) else answer_forms(ex)
    for form in forms:
        assert check(key, form).status == CORRECT, form


@pytest.mark.parametrize("number", ["01", "02", "03", "05", "09", "10"])
def test_these_notebooks_run_a_later_cell_on_the_learner_s_own_code(number):
    nbformat = pytest.importorskip("nbformat")
    path = next(p for p in NOTEBOOKS if p.name.startswith(number))
    nb = nbformat.read(path, as_version=4)
    assert any(c.cell_type == "code" and re.search(r"\b(yours|pick)\(", c.source) for c in nb.cells)
