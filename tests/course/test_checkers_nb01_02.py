"""The checkers of notebooks 01 and 02 against wrong code written the way learners write it: a power that loses the
sign of a negative base, a local derivative estimated by a finite difference, a recursive backward that raises
Python's recursion limit, a breadth-first backward, a backward that fills nothing. Each is refused and told what it
did, and no named mistake is named for code that did not make it. Right answers in another shape (a list or an
array of local derivatives) pass."""
import inspect
import math

import numpy as np
import pytest

from haaw import Value
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import plugins


# --- 01-pow-local: negative bases ------------------------------------------------------------------------------


def pow_local_with_abs(a, n):
    return abs(a) ** n, (n * abs(a) ** (n - 1),)


def pow_local_with_the_sign_put_back(a, n):
    return a**n, (n * abs(a) ** (n - 1) * np.sign(a),)


def pow_local_with_abs_in_the_slope_only(a, n):
    return a**n, (n * abs(a) ** (n - 1),)


def test_a_power_that_loses_the_sign_of_a_negative_base_is_refused_and_named():
    feedback = check("01-pow-local", pow_local_with_abs)
    assert feedback.status == WRONG and "This looks like |a| in place of a" in feedback.message, feedback.message

    feedback = check("01-pow-local", pow_local_with_the_sign_put_back)  # right for every even power
    assert feedback.status == WRONG, feedback.message
    assert "an odd power of a negative base" in feedback.message
    assert "This looks like the slope of |a|ⁿ given the sign of a" in feedback.message

    feedback = check("01-pow-local", pow_local_with_abs_in_the_slope_only)  # neither of the two: only the numbers
    assert feedback.status == WRONG and "a negative base" in feedback.message
    assert "This looks like" not in feedback.message, feedback.message


def pow_local_with_math_pow(a, n):
    return math.pow(a, n), (n * math.pow(a, n - 1),)


def pow_local_with_numpy(a, n):
    return np.power(a, n), (n * np.power(a, n - 1),)


@pytest.mark.parametrize("fn", [inspect.unwrap(REGISTRY["01-pow-local"].reference), pow_local_with_math_pow,
                                pow_local_with_numpy])
def test_the_power_rule_passes_at_tiny_huge_negative_and_fractional_values(fn):
    feedback = check("01-pow-local", fn)
    assert feedback.status == CORRECT, feedback.message
    for kind in ("an odd power of a negative base", "a fractional exponent", "a tiny base", "a huge base"):
        assert kind in feedback.message


# --- 01-mul-local and the others: the local derivatives in any sequence ------------------------------------------


def mul_local_list(a, b):
    return a * b, [b, a]


def mul_local_array(a, b):
    return a * b, np.array([b, a])


def mul_local_all_in_a_list(a, b):
    return [a * b, [b, a]]


def pow_local_array(a, n):
    return a**n, np.array([n * a ** (n - 1)])


@pytest.mark.parametrize("key, fn", [("01-mul-local", mul_local_list), ("01-mul-local", mul_local_array),
                                     ("01-mul-local", mul_local_all_in_a_list), ("01-pow-local", pow_local_array)])
def test_local_derivatives_in_a_list_or_an_array_pass_and_run_in_the_engine(key, fn):
    feedback = check(key, fn)
    assert feedback.status == CORRECT, feedback.message
    slot = REGISTRY[key].slot
    with plugins.use(**{slot: fn}):
        w, x = Value(2.0), Value(3.0)
        loss = (w * x) ** 2
        loss.backward()
    assert (loss.data, w.grad, x.grad) == (36.0, 36.0, 24.0)


def mul_local_three(a, b):
    return a * b, np.array([b, a, 0.0])


def mul_local_a_matrix(a, b):
    return a * b, np.array([[b, a]])


def test_a_sequence_of_the_wrong_length_or_shape_is_still_refused_with_the_reason():
    feedback = check("01-mul-local", mul_local_three)
    assert feedback.status == WRONG and "needs 2 entries, one per input; yours has 3" in feedback.message
    feedback = check("01-mul-local", mul_local_a_matrix)
    assert feedback.status == WRONG and "return two things" in feedback.message
