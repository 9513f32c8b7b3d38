"""Notebook 08's "find the bug" exercises: an answer is (line, explanation). Every right form passes; a wrong line
or a wrong explanation is rejected, and the message names that mistake only when it is that mistake; odd input
gets a polite message, never an exception."""
import numpy as np
import pytest

from haaw import Tensor, Value
from haaw.course.exercises import REGISTRY, BugExercise, check, hint, solution
from haaw.course.exercises.core import CORRECT, NOT_ATTEMPTED, UNREADABLE, WRONG
from haaw.course.exercises.nb08 import EXPLANATIONS

KEYS = ["08-bug-a", "08-bug-b", "08-bug-c"]


def test_the_three_exercises_are_bug_exercises_with_different_answers():
    assert all(isinstance(REGISTRY[k], BugExercise) for k in KEYS)
    assert len({REGISTRY[k].explanation for k in KEYS}) == 3  # three kinds of bug, not one three times


@pytest.mark.parametrize("key", KEYS)
def test_every_right_form_passes(key):
    ex = REGISTRY[key]
    n, words = ex.line, ex.explanation
    forms = [(n, words), [n, words], (np.int64(n), words), (float(n), words), (str(n), words), (f"line {n}", words),
             (f"Line {n}", words), (words, n), (n, words.upper()), (n, f"  the {words}. "), (n, words.replace(" ", "  "))]
    forms += [(n, synonym) for synonym in EXPLANATIONS[words]]
    for form in forms:
        feedback = check(key, form)
        assert feedback.status == CORRECT, (form, feedback.message)


@pytest.mark.parametrize("key", KEYS)
def test_every_wrong_answer_is_rejected_and_named_only_when_it_is_that_mistake(key):
    ex = REGISTRY[key]
    for n in range(1, ex.lines + 1):
        for words in EXPLANATIONS:
            if (n, words) == ex.answer:
                continue
            feedback = check(key, (n, words))
            assert feedback.status == WRONG, (n, words)
            message = feedback.message
            right_line, right_words = n == ex.line, words == ex.explanation
            assert ("Right line" in message) == right_line, (n, words, message)
            assert ("right kind of bug" in message) == right_words, (n, words, message)
            assert (ex.does in message) == right_line  # what the buggy line really does: only once it is found
            if right_line:
                assert ex.explanation_notes[words] in message
            else:
                assert ex.line_notes[n] in message  # what the blamed line really does
            assert ex.explanation not in message.replace(words, "")  # the right words are never given away


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("odd", [
    None, "", "4", "per example", 4, 4.5, True, float("nan"), float("inf"), 1e400, 10**100, -(10**100), complex(1, 2),
    (), (4,), (4, "per example", 1), {"line": 4}, {4, "per example"}, object(), Value(1.0), Tensor(np.ones(2)),
    np.array([4.0, 1.0]), np.zeros((2, 2)), [[4, "per example"]], (4, None), (4, 5), (4, ["per example"]),
    (None, "per example"), (True, "per example"), (4.5, "per example"), (float("nan"), "per example"),
    (1e400, "per example"), (0, "per example"), (-1, "per example"), (10**100, "per example"), (99, "per example"),
    ("four", "per example"), ("4th", "per example"), (4, "per exampel"), (4, "paddng in the sum"),
    (4, "unscaled micro batches"), (4, "staleness"), (4, "banana"), (4, ""), ("", ""), ("line", "line"),
])
def test_odd_input_gets_a_polite_message(key, odd):
    feedback = check(key, odd)
    assert feedback.status == UNREADABLE, (odd, feedback.message)
    assert feedback.message and "Traceback" not in feedback.message and "bug in the course" not in feedback.message


def test_odd_input_is_told_what_to_fix():
    assert "numbered 1 to 4; there is no line 9" in check("08-bug-a", (9, "per example")).message
    assert "there is no line that far down" in check("08-bug-a", (10**100, "per example")).message
    assert "Did you mean 'per example'?" in check("08-bug-a", (4, "per exampel")).message
    assert "Did you mean 'padding in the sum'?" in check("08-bug-b", (1, "paddng in the sum")).message
    assert "Did you mean" not in check("08-bug-a", (4, "banana")).message
    assert "Answer with a pair" in check("08-bug-a", "per example").message
    assert "is not a line number" in check("08-bug-a", ("four", "per example")).message
    assert "in words" in check("08-bug-a", (4, 5)).message
    assert check("08-bug-a", ...).status == NOT_ATTEMPTED


@pytest.mark.parametrize("key", KEYS)
def test_hints_and_solution_never_print_above_the_question_and_the_solution_names_the_answer(key):
    ex = REGISTRY[key]
    assert repr(ex.answer) in solution(key).message
    assert len(ex.hints) == 2 and "solution(" in hint(key, 2).message


def test_a_bug_exercise_must_say_what_every_other_line_and_explanation_is():
    menu = {"a": (), "b": (), "c": ()}
    whole = dict(key="x", question="q", lines=3, line=2, explanation="a", explanations=menu, does="d",
                 line_notes={1: "one", 3: "three"}, explanation_notes={"b": "b", "c": "c"})
    BugExercise(**whole)
    with pytest.raises(ValueError, match="every other line"):
        BugExercise(**{**whole, "line_notes": {1: "one"}})
    with pytest.raises(ValueError, match="every other explanation"):
        BugExercise(**{**whole, "explanation_notes": {"b": "b"}})
