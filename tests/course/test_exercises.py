"""Every checker: the right answer passes, each anticipated mistake gets its own hint,
odd input gets a polite message and never an exception."""
import numpy as np
import pytest

from haaw import Value
from haaw.course.exercises import REGISTRY, ArrayExercise, ChoiceExercise, NumberExercise, check, hint, solution
from haaw.course.exercises.code import CodeExercise
from haaw.course.exercises.core import CORRECT, NOT_ATTEMPTED, UNREADABLE, WRONG

KEYS = sorted(k for k, ex in REGISTRY.items() if not isinstance(ex, CodeExercise))  # answers, not code
WORD_KEYS = [k for k in KEYS if isinstance(REGISTRY[k], ChoiceExercise)]
NUMBER_KEYS = [k for k in KEYS if isinstance(REGISTRY[k], NumberExercise)]
ARRAY_KEYS = [k for k in KEYS if isinstance(REGISTRY[k], ArrayExercise)]
MISTAKES = [(key, wrong, why) for key in KEYS for wrong, why in REGISTRY[key].mistake_pairs()]
GARBAGE = [None, "forty", "", np.array([1.0, 2.0]), np.zeros((2, 2)), [1, 2, 3], {}, object(),
           True, float("nan"), float("inf"), 1e400, complex(1, 2), Value(1.0), [[1, 2]], "1.2.3"]


def test_every_notebook_has_two_to_four_answer_exercises():
    assert {k[:2] for k in KEYS} == {f"{n:02d}" for n in range(1, 11)}
    for key in KEYS:
        assert 2 <= sum(k[:2] == key[:2] for k in KEYS) <= 4


@pytest.mark.parametrize("key", NUMBER_KEYS)
def test_the_right_number_passes_in_any_reasonable_form(key):
    answer = REGISTRY[key].answer
    for form in (answer, float(answer), np.float64(answer), np.array([answer]), str(answer)):
        assert check(key, form).status == CORRECT, form


@pytest.mark.parametrize("key", WORD_KEYS)
def test_the_right_words_pass_whatever_the_case_and_spacing(key):
    for accepted in REGISTRY[key].answer:
        for form in (accepted, accepted.upper(), f"  {accepted}  ", accepted.replace(" ", "  ")):
            assert check(key, form).status == CORRECT, form
    assert "is not one of the answers" in check(key, "banana").message


@pytest.mark.parametrize("key", ARRAY_KEYS)
def test_the_right_array_passes_as_an_array_a_list_or_a_tensor(key):
    from haaw.engine.tensor import Tensor

    answer = REGISTRY[key].answer
    for form in (answer, answer.tolist(), answer.astype(np.float32), Tensor(answer)):
        assert check(key, form).status == CORRECT, form


@pytest.mark.parametrize("key", ARRAY_KEYS)
def test_array_answers_get_told_about_transposes_shapes_and_the_first_wrong_entry(key):
    answer = REGISTRY[key].answer
    if answer.ndim == 2:
        assert "you have the transpose" in check(key, answer.T).message
    assert f"must have shape {answer.shape}" in check(key, np.zeros(answer.shape + (2,))).message
    off = answer.copy()
    off.flat[-1] += 1
    message = check(key, off).message
    assert "1 of" in message and f"yours {off.flat[-1]:g}, expected {answer.flat[-1]:g}" in message
    assert "wrong sign" in check(key, -answer).message


@pytest.mark.parametrize("key, wrong, why", MISTAKES)
def test_each_anticipated_mistake_gets_its_own_hint(key, wrong, why):
    feedback = check(key, wrong)
    assert feedback.status == WRONG
    assert why in feedback.message


def test_the_classic_matrix_mistakes_are_named():
    from haaw.course.exercises.nb03 import G, W, X

    assert "you have the transpose" in check("03-dW", G.T @ X).message
    assert "You averaged over the batch" in check("03-db", G.mean(axis=0)).message
    assert "one gradient per example" in check("03-db", G).message
    assert "add them up over the batch" in check("03-dW", np.einsum("bi,bj->bij", X, G)).message
    assert "wrong axis" in check("03-db", G.sum(axis=1)).message
    assert "transpose" in check("03-dX", W @ G.T).message
    # the advice works: the result transposed, or the factors swapped and each transposed
    assert "swap the two factors and transpose each" in check("03-dW", G.T @ X).message
    np.testing.assert_array_equal((G.T @ X).T, X.T @ G)


def test_the_hints_match_the_issue_examples():
    assert "stopped one link early" in check("01-dL/dw", 12).message
    assert "is y" in check("01-dL/dw", 6).message


@pytest.mark.parametrize("key", NUMBER_KEYS)
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
    # a number exercise cannot read it; an array exercise may read it as an array of the wrong shape
    assert feedback.status == UNREADABLE or (key in ARRAY_KEYS and feedback.status == WRONG)
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
    if key in WORD_KEYS:
        assert ex.answer[0] in solution(key).message
    if key in NUMBER_KEYS:
        a, text = ex.answer, solution(key).message
        assert any(form in text or form in text.replace(",", "") for form in (str(a), f"{a:,}", f"{a:.2g}"))


def test_hint_without_a_level_advances_one_tier_per_call():
    key = "01-chain"
    first, second = hint(key, level=1), hint(key)
    assert first.message.startswith("Hint 1/") and second.message.startswith("Hint 2/")


@pytest.mark.parametrize("key", NUMBER_KEYS)
def test_a_tensor_given_for_a_number_is_told_to_use_item(key):
    from haaw import Tensor

    for form in (Tensor(np.array(1.0)), Tensor(np.array([1.0]), requires_grad=True)):
        feedback = check(key, form)
        assert feedback.status == UNREADABLE and ".item()" in feedback.message
    assert "Tensor of shape (2,)" in check(key, Tensor(np.ones(2))).message


@pytest.mark.parametrize("key", NUMBER_KEYS[:3] + ARRAY_KEYS[:1])
def test_a_torch_tensor_is_read_or_told_what_to_do(key):
    torch = pytest.importorskip("torch")
    answer = REGISTRY[key].answer
    if key in ARRAY_KEYS:
        assert check(key, torch.tensor(answer, requires_grad=True)).status == CORRECT
    else:
        assert ".item()" in check(key, torch.tensor(float(answer), requires_grad=True)).message


@pytest.mark.parametrize("level", [0, 99, -1, "two", 1.5, None.__class__, True])
def test_hint_never_raises_on_a_bad_level(level):
    feedback = hint("01-chain", level)
    assert feedback.status == UNREADABLE and "takes a level from 1 to" in feedback.message


def test_numbers_are_accepted_to_the_precision_typed_and_near_misses_are_not():
    assert check("03-jacobian-bytes", 275e9).status == CORRECT  # "about 275 GB", typed as 275e9
    assert check("03-jacobian-bytes", "2.749e11").status == CORRECT
    assert check("03-jacobian-bytes", 274877906943).status == WRONG  # one byte off a count is wrong
    assert check("01-step", "1.6").status == WRONG  # two significant digits are not enough
    assert check("01-step", 1.6399999999999997).status == CORRECT  # 2 - 0.01 * 36 in floating point
    assert "complex" in check("01-step", 1.64 + 0j).message


@pytest.mark.parametrize("key", WORD_KEYS)
def test_words_are_accepted_with_or_without_articles_and_a_full_stop(key):
    accepted = REGISTRY[key].answer[0]
    for form in (f"the {accepted}", f"{accepted}.", f"The {accepted}."):
        assert check(key, form).status == CORRECT, form


@pytest.mark.parametrize("key, typed", [
    ("06-overhead", "1/3"), ("06-overhead", "33%"), ("06-overhead", "33.3 %"), ("07-scale", "2**6"),
    ("07-scale", "2^6"), ("09-accumulation-scale", "1/4"), ("03-jacobian-bytes", "275 GB"),
    ("03-jacobian-bytes", "256 GiB"), ("06-adam-bytes", "16 bytes"), ("10-which-phase", "backward()"),
    ("10-which-phase", "backwards"), ("07-dynamic", "2**9"),
])
def test_answers_are_read_in_the_forms_people_write(key, typed):
    assert check(key, typed).status == CORRECT, check(key, typed).message


@pytest.mark.parametrize("typed, words", [
    ("__import__('os').system('true')", "Expected a number"),  # never evaluated
    ("64 apples", "the unit 'apples' is not one the checker knows"), ("2**6000", "Expected a number"),
    ("1/0", "Expected a number"),
])
def test_text_that_is_not_a_number_is_refused_without_running_it(typed, words):
    feedback = check("07-scale", typed)
    assert feedback.status == UNREADABLE and words in feedback.message


def test_a_wrong_number_is_shown_with_the_digits_that_differ():
    assert "48.000048 is not it" in check("01-dL/dw", "48.000048").message
    assert "2.00200001 is not it" in check("01-step", "2.00200001").message


def test_an_answer_whose_own_code_raises_is_the_learner_s_and_a_checker_failure_is_the_course_s(monkeypatch):
    import haaw.course.exercises.core as core

    class Odd:
        def __float__(self):
            raise RuntimeError("my own bug")

        def __array__(self, *args, **kwargs):
            raise RuntimeError("my own bug")

    said = str(check("01-step", Odd()))
    assert said.startswith("Could not read that answer: reading it ran your code, which raised RuntimeError: my own bug")
    # a failure in the checker's own code (compiled as part of core.py): the course's bug, with its traceback
    namespace = {}
    exec(compile("def broken(answer):\n    return 1 / 0\n", core.__file__, "exec"), namespace)
    monkeypatch.setattr(core, "_as_number", namespace["broken"])
    said = str(check("01-step", 1.64))
    assert said.startswith("This is a bug in the course, not in your answer: the checker of '01-step' failed.")
    assert "Traceback (most recent call last)" in said and "ZeroDivisionError: division by zero" in said


def test_a_new_array_exercise_is_one_declaration_and_checks_itself(monkeypatch):
    """What a maintainer adds for a new exercise: a module with one declaration like this, imported by the
    package's __init__. Nothing else changes: the type checks the answer, check() finds it by its key."""
    from haaw.course.exercises.core import register

    monkeypatch.setitem(REGISTRY, "99-outer", None)  # removed again after the test
    A = np.array([[1.0], [2.0]])
    register(ArrayExercise(key="99-outer", question="Compute A Aᵀ for A = [[1], [2]].", answer=A @ A.T,
                           mistakes=((A.T @ A, "That is AᵀA, one number: the product the other way round."),),
                           hints=("Shape (2, 2).",), solution="A @ A.T"))
    assert check("99-outer", A @ A.T).status == CORRECT
    assert "AᵀA" in str(check("99-outer", A.T @ A))
    assert check("99-outer", ...).status == NOT_ATTEMPTED
    assert check("99-outer", "not an array").status == UNREADABLE


def test_an_answer_too_large_for_a_float_or_a_torch_bfloat16_array_is_read_as_the_learner_s():
    assert "too large for a float" in str(check("02-fan-out", [10**400]))
    assert "too large for a float" in str(check("03-dW", [[10**400, 0.0], [0.0, 0.0], [0.0, 0.0]]))
    torch = pytest.importorskip("torch")
    from haaw.course.exercises.nb03 import G, X

    as_bf16 = torch.tensor(X.T @ G).to(torch.bfloat16)  # small integers: exact in bfloat16
    assert check("03-dW", as_bf16).status == CORRECT
