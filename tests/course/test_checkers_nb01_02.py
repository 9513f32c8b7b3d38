"""The checkers of notebooks 01 and 02 against wrong code written the way learners write it: a power that loses the
sign of a negative base, a local derivative estimated by a finite difference, a recursive backward that raises
Python's recursion limit, a breadth-first backward, a backward that fills nothing. Each is refused and told what it
did, and no named mistake is named for code that did not make it. Right answers in another shape (a list or an
array of local derivatives) pass."""
import math
import sys
from collections import deque

import numpy as np
import pytest

from haaw import Value
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import plugins
from haaw.engine.forward_mode import Dual
from haaw.engine import guard

NUMERICAL = "This looks like a numerical estimate of the slope"
WRITE_THE_FORMULA = "write the derivative's formula"


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


@pytest.mark.parametrize("fn", [guard.unguarded(REGISTRY["01-pow-local"].reference), pow_local_with_math_pow,
                                pow_local_with_numpy])
def test_the_power_rule_passes_at_tiny_huge_negative_and_fractional_values(fn):
    feedback = check("01-pow-local", fn)
    assert feedback.status == CORRECT, feedback.message
    for kind in ("an odd power of a negative base", "a fractional exponent", "a tiny base", "a huge base"):
        assert kind in feedback.message


# --- a finite difference in place of the derivative --------------------------------------------------------------


def stencil(f, a, h, kind):
    """The slope of f at a, estimated from its values, the way a learner who read about gradcheck would."""
    if kind == "forward":
        return (f(a + h) - f(a)) / h
    if kind == "backward":
        return (f(a) - f(a - h)) / h
    if kind == "central":
        return (f(a + h) - f(a - h)) / (2 * h)
    return (-f(a + 2 * h) + 8 * f(a + h) - 8 * f(a - h) + f(a - 2 * h)) / (12 * h)  # five points, Richardson's


def estimated(key, kind, h):
    """The learner's local function for ``key``, its derivative a finite difference of step h."""
    if key == "01-pow-local":
        def pow_local(a, n):
            return a**n, (stencil(lambda x: x**n, a, h, kind),)
        return pow_local
    if key == "02-tanh-local":
        def tanh_local(a):
            return math.tanh(a), (stencil(math.tanh, a, h, kind),)
        return tanh_local

    def exp_local(a):
        return math.exp(a), (stencil(math.exp, a, h, kind),)
    return exp_local


STEPS = np.logspace(-3, -8, 26)  # 1e-3 to 1e-8, five a decade


@pytest.mark.parametrize("key", ["01-pow-local", "02-tanh-local", "02-exp-local"])
@pytest.mark.parametrize("kind", ["forward", "backward", "central", "five-point"])
def test_every_finite_difference_is_refused_and_called_a_numerical_estimate(key, kind):
    for h in STEPS:
        feedback = check(key, estimated(key, kind, h))
        assert feedback.status == WRONG, (h, feedback.message)
        assert NUMERICAL in feedback.message and WRITE_THE_FORMULA in feedback.message, (h, feedback.message)
        assert "your function also computes at a + " in feedback.message  # the step it took, seen


def tanh_local_estimated_on_numpy(a):
    x, h = np.float64(a), 1e-5
    return np.tanh(x), ((np.tanh(x + h) - np.tanh(x - h)) / (2 * h),)


def exp_local_estimated_relatively(a):
    h = 1e-7
    return math.exp(a), ((math.exp(a * (1 + h)) - math.exp(a)) / (a * h) if a else 1.0,)


def test_an_estimate_is_named_whether_or_not_its_step_is_seen():
    feedback = check("02-tanh-local", tanh_local_estimated_on_numpy)  # the step is taken from a NumPy copy of a
    assert feedback.status == WRONG and NUMERICAL in feedback.message and WRITE_THE_FORMULA in feedback.message
    assert "about what a finite difference is off by" in feedback.message
    feedback = check("02-exp-local", exp_local_estimated_relatively)  # a step a·(1 + h)
    assert feedback.status == WRONG and NUMERICAL in feedback.message and "also computes at a" in feedback.message


def tanh_local_with_cosh(a):
    return math.tanh(a), (1 / math.cosh(a) ** 2,)


def tanh_local_factored(a):
    t = np.tanh(a)
    return t, ((1 - t) * (1 + t),)


def tanh_local_from_exponentials(a):
    return (math.exp(2 * a) - 1) / (math.exp(2 * a) + 1), (4 / (math.exp(a) + math.exp(-a)) ** 2,)


def exp_local_as_a_power_of_e(a):
    e = math.e**a
    return e, (e,)


@pytest.mark.parametrize("key, fn", [("02-tanh-local", tanh_local_with_cosh), ("02-tanh-local", tanh_local_factored),
                                     ("02-tanh-local", tanh_local_from_exponentials),
                                     ("02-exp-local", exp_local_as_a_power_of_e), ("02-exp-local", np.exp)])
def test_a_formula_written_another_way_still_passes_the_tighter_tolerance(key, fn):
    if fn is np.exp:
        def fn(a):
            return np.exp(a), (np.exp(a),)
    feedback = check(key, fn)
    assert feedback.status == CORRECT, feedback.message


def tanh_local_sech_not_squared(a):
    return math.tanh(a), (1 / math.cosh(a),)


def exp_local_one_lower(a):
    return math.exp(a), (math.exp(a - 1),)


@pytest.mark.parametrize("key, fn", [("02-tanh-local", tanh_local_sech_not_squared),
                                     ("02-exp-local", exp_local_one_lower), ("01-pow-local", pow_local_with_abs),
                                     *[(key, m.code) for key in ("01-pow-local", "02-tanh-local", "02-exp-local")
                                       for m in REGISTRY[key].mistakes]])
def test_a_wrong_formula_is_not_called_a_numerical_estimate(key, fn):
    feedback = check(key, fn)
    assert feedback.status == WRONG and "numerical estimate" not in feedback.message, feedback.message
    assert not feedback.message.endswith("\n")  # a diagnosis with nothing to say adds nothing


# --- 02-backward: recursion with a raised limit -------------------------------------------------------------------


def backward_recursive_with_a_raised_limit(root):
    sys.setrecursionlimit(100_000)  # "the chain is deep, so let Python go deeper"
    order, visited = [], set()

    def visit(node):
        if id(node) not in visited:
            visited.add(id(node))
            for parent in node._parents:
                visit(parent)
            order.append(node)

    visit(root)
    root.grad = 1.0
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def backward_recursive(root):
    order, visited = [], set()

    def visit(node):
        if id(node) not in visited:
            visited.add(id(node))
            for parent in node._parents:
                visit(parent)
            order.append(node)

    visit(root)
    root.grad = 1.0
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def test_a_recursive_backward_that_raises_the_limit_is_refused_and_the_limit_restored():
    before = sys.getrecursionlimit()
    feedback = check("02-backward", backward_recursive_with_a_raised_limit)
    assert sys.getrecursionlimit() == before
    assert feedback.status == WRONG, feedback.message
    assert "use a loop with a stack of your own, not recursion with a raised limit" in feedback.message
    assert "from 1,000 to 100,000" in feedback.message


def test_a_limit_raised_in_an_earlier_cell_does_not_let_recursion_pass():
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)  # the learner's cell before the check
    try:
        feedback = check("02-backward", backward_recursive)
        assert sys.getrecursionlimit() == 100_000  # the session's own limit, as the check found it
    finally:
        sys.setrecursionlimit(before)
    assert feedback.status == WRONG and "a chain of 10,000 nodes" in feedback.message, feedback.message
    assert "use a loop with a stack of your own, not recursion with a raised limit" in feedback.message
    assert "raised to 100,000" in feedback.message

    feedback = check("02-backward", backward_recursive)  # at Python's default: as before, deeper than it allows
    assert feedback.status == WRONG and "went deeper than Python allows" in feedback.message


# --- 02-backward: diagnoses that must not name what the code did not do -----------------------------------------


def backward_breadth_first(root):
    order, seen, queue = [], {id(root)}, deque([root])
    while queue:
        node = queue.popleft()
        order.append(node)
        for parent in node._parents:
            if id(parent) not in seen:
                seen.add(id(parent))
                queue.append(parent)
    root.grad = 1.0
    for node in order:  # root first
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def backward_breadth_first_on_a_list(root):
    order, seen, queue = [], set(), [root]
    while queue:
        node = queue.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        queue.extend(node._parents)
    root.grad = 1.0
    for node in order:
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


@pytest.mark.parametrize("fn", [backward_breadth_first, backward_breadth_first_on_a_list])
def test_a_breadth_first_backward_is_named_as_one_not_as_marking_nodes_when_pushed(fn):
    feedback = check("02-backward", fn)
    assert feedback.status == WRONG, feedback.message
    assert "visited when it is pushed" not in feedback.message, feedback.message
    assert "This looks like a breadth-first order" in feedback.message


def backward_that_returns_at_once(root):
    return


def backward_that_forgets_the_seed(root):
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((parent, False) for parent in node._parents)
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def test_a_backward_that_fills_nothing_is_told_so_and_only_a_walk_without_a_seed_is_told_no_seed():
    feedback = check("02-backward", backward_that_returns_at_once)
    assert feedback.status == WRONG and "no gradient was filled at all" in feedback.message, feedback.message
    assert "This looks like no seed" not in feedback.message

    feedback = check("02-backward", backward_that_forgets_the_seed)
    assert feedback.status == WRONG and "This looks like no seed" in feedback.message, feedback.message
    assert "no gradient was filled at all" not in feedback.message


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


# --- 02-hvp: forward over reverse, written as learners write it --------------------------------------------


def hvp_with_a_loop(grad, x, v):  # right: Duals built one by one, the tangents read into an array
    duals = []
    for i in range(len(x)):
        duals.append(Dual(float(x[i]), float(v[i])))
    return np.array([g.tangent for g in grad(*duals)])


def hvp_twice(grad, x, v):  # two passes, the second along 2v, halved: right, if wasteful
    return [g.tangent / 2 for g in grad(*[Dual(a, 2 * b) for a, b in zip(x, v)])]


def hvp_of_the_values(grad, x, v):  # the gradient along v, not the gradient's change: a dot product
    g = grad(*[Dual(a, b) for a, b in zip(x, v)])
    return [sum(gi.data * vi for gi, vi in zip(g, v))] * len(x)


def hvp_forgot_the_tangent(grad, x, v):  # Duals built with the default tangent 0
    return [g.tangent for g in grad(*[Dual(a) for a in x])]


def hvp_one_sided(grad, x, v, h=1e-6):  # a forward difference of gradients
    base, moved = grad(*x), grad(*[a + h * b for a, b in zip(x, v)])
    return [(m.data - b.data) / h for m, b in zip(moved, base)]


def hvp_tangents_summed(grad, x, v):  # one number where each input has its own
    return sum(g.tangent for g in grad(*[Dual(a, b) for a, b in zip(x, v)]))


@pytest.mark.parametrize("fn", [hvp_with_a_loop, hvp_twice])
def test_a_hessian_vector_product_written_another_right_way_passes(fn):
    assert check("02-hvp", fn).status == CORRECT


@pytest.mark.parametrize("fn", [hvp_of_the_values, hvp_forgot_the_tangent, hvp_one_sided, hvp_tangents_summed])
def test_wrong_hessian_vector_products_are_refused(fn):
    feedback = check("02-hvp", fn)
    assert feedback.status == WRONG, feedback.message


def test_a_zero_tangent_is_not_called_a_named_mistake_it_did_not_make():
    feedback = check("02-hvp", hvp_forgot_the_tangent)
    assert "This looks like" not in feedback.message or "H·x" not in feedback.message, feedback.message
