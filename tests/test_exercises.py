"""Every checker: the right answer passes, each anticipated mistake gets its own hint,
odd input gets a polite message and never an exception."""
import numpy as np
import pytest

from haaw import Value
from haaw.exercises import REGISTRY, check, hint, solution
from haaw.exercises.core import CORRECT, NOT_ATTEMPTED, UNREADABLE, WRONG

KEYS = sorted(REGISTRY)
MISTAKES = [(key, wrong, why) for key in KEYS for wrong, why in REGISTRY[key].mistakes.items()]
GARBAGE = [None, "forty", "", np.array([1.0, 2.0]), np.zeros((2, 2)), [1, 2, 3], {}, object(),
           True, float("nan"), float("inf"), 1e400, complex(1, 2), Value(1.0), [[1, 2]], "1.2.3"]


def test_the_course_has_exercises_for_notebooks_01_and_02():
    assert {k[:2] for k in KEYS} >= {"01", "02"}
    for key in KEYS:
        assert 2 <= sum(k[:2] == key[:2] for k in KEYS) <= 4


@pytest.mark.parametrize("key", KEYS)
def test_the_right_answer_passes_in_any_reasonable_form(key):
    answer = REGISTRY[key].answer
    for form in (answer, float(answer), np.float64(answer), np.array([answer]), str(answer)):
        assert check(key, form).status == CORRECT, form


@pytest.mark.parametrize("key, wrong, why", MISTAKES)
def test_each_anticipated_mistake_gets_its_own_hint(key, wrong, why):
    feedback = check(key, wrong)
    assert feedback.status == WRONG
    assert why in feedback.message


def test_the_hints_match_the_issue_examples():
    assert "stopped one link early" in check("01-dL/dw", 12).message
    assert "is y" in check("01-dL/dw", 6).message


@pytest.mark.parametrize("key", KEYS)
def test_a_sign_error_is_named(key):
    answer = float(REGISTRY[key].answer)
    if -answer in REGISTRY[key].mistakes:
        pytest.fail("a mistake table entry would shadow the sign check")
    assert "sign" in check(key, -answer).message


@pytest.mark.parametrize("key", KEYS)
def test_the_untouched_placeholder_means_not_attempted(key):
    feedback = check(key, ...)
    assert feedback.status == NOT_ATTEMPTED
    assert "Not attempted yet" in repr(feedback)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("garbage", GARBAGE, ids=lambda g: type(g).__name__)
def test_garbage_gets_a_polite_message(key, garbage):
    feedback = check(key, garbage)
    assert feedback.status == UNREADABLE
    assert feedback.message and "Traceback" not in feedback.message


def test_an_unknown_exercise_lists_the_real_ones():
    feedback = check("nope", 1)
    assert feedback.status == UNREADABLE and "01-dL/dw" in feedback.message
    assert hint(None).status == UNREADABLE and solution(42).status == UNREADABLE


def test_an_unexpected_wrong_number_suggests_a_hint():
    assert "hint('01-step')" in check("01-step", 123.0).message


@pytest.mark.parametrize("key", KEYS)
def test_hints_are_tiered_and_end_at_the_solution(key):
    ex = REGISTRY[key]
    shown = [hint(key, level=i + 1).message for i in range(len(ex.hints))]
    for i, message in enumerate(shown):
        assert message.startswith(f"Hint {i + 1}/{len(ex.hints)}: {ex.hints[i]}")
    assert "solution(" in shown[-1]
    assert str(ex.answer) in solution(key).message.replace(",", "")


def test_hint_without_a_level_advances_one_tier_per_call():
    key = "01-chain"
    first, second = hint(key, level=1), hint(key)
    assert first.message.startswith("Hint 1/") and second.message.startswith("Hint 2/")
