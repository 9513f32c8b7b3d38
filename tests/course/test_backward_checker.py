"""The checker of notebook 02's backward against sorts that are wrong in ways a learner writes them: a node
marked visited when it is pushed, no visited set, a search through a list (right, but quadratic)."""
import math

import pytest

from haaw import Value
from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.nb02 import backward as _course_backward
from haaw.engine import guard

backward = guard.unguarded(_course_backward)  # the course's code, as a learner would have typed it


def _pass(root, order):
    """The backward pass over an order already built: root first, each node's share with +=."""
    root.grad = 1.0
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def _backward_marking_visited_on_push(root, parents_in_order=True):
    """The broken sort the check must catch: a node is marked visited when pushed, not when popped."""
    order, visited, stack = [], {id(root)}, [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
            continue
        stack.append((node, True))
        for parent in (node._parents if parents_in_order else reversed(node._parents)):
            if id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, False))
    _pass(root, order)


@pytest.mark.parametrize("parents_in_order", [True, False])
def test_the_backward_check_catches_a_sort_that_marks_nodes_visited_when_pushed(parents_in_order):
    def graphs():
        w = Value(0.5)
        a = w * 2.0
        yield w, a * a.tanh(), 1.0 * math.tanh(1.0) * 2 + 1.0 * (1 - math.tanh(1.0) ** 2) * 2
        w = Value(0.5)
        a = w * 2.0
        yield w, a.tanh() * a, None

    for w, root, exact in graphs():
        root.backward()
        if exact is not None:
            assert w.grad == pytest.approx(exact) and f"{w.grad:.3f}" == "2.363"
    wrong = {True: [], False: []}
    for flag in (True, False):
        for w, root, _ in graphs():
            _backward_marking_visited_on_push(root, parents_in_order=flag)
            wrong[flag].append(w.grad)
    assert f"{wrong[True][0]:.3f}" == "1.523"  # the tanh path lost: 2·tanh(1)
    assert any(abs(g - 2.363) > 0.1 for g in wrong[parents_in_order])  # one of the two graphs exposes it
    feedback = check("02-backward", lambda root: _backward_marking_visited_on_push(root, parents_in_order))
    assert feedback.status == WRONG and "reused intermediate" in feedback.message
    if parents_in_order:
        assert "marking a node visited when it is pushed" in feedback.message
    assert check("02-backward", backward).status == CORRECT


def _order_without_a_visited_set(root, search_the_order=False):
    """Parents after children, walked with no set of visited nodes: a node reached along two paths is placed
    twice, unless ``search_the_order`` looks it up in the order first (right, but quadratic in the nodes)."""
    order, stack = [], [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            if not (search_the_order and node in order):
                order.append(node)
        else:
            stack.append((node, True))
            stack.extend((parent, False) for parent in node._parents)
    return order


def _backward_searching_a_list(root):
    """A correct backward whose order is built with `node not in order`: quadratic in the nodes."""
    _pass(root, _order_without_a_visited_set(root, search_the_order=True))


def test_the_backward_check_says_why_a_list_search_is_too_slow_and_names_a_missing_visited_set():
    feedback = check("02-backward", _backward_searching_a_list)  # stopped by its count of comparisons, not by the time
    assert feedback.status == WRONG and "a chain of 10,000 nodes" in feedback.message
    assert "compared nodes with ==" in feedback.message and "set" in feedback.message
    assert "took longer than" not in feedback.message

    def no_visited_set(root):
        _pass(root, _order_without_a_visited_set(root))

    feedback = check("02-backward", no_visited_set)
    assert feedback.status == WRONG and "This looks like no visited set: a node placed twice" in feedback.message
    # on small graphs the list search is right: only the long chain's size makes it a problem
    x = Value(0.7)
    root = x * x + x * 3.0 + x.exp()
    _backward_searching_a_list(root)
    assert x.grad == pytest.approx(2 * 0.7 + 3.0 + math.exp(0.7))
