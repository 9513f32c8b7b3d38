"""The step-through: a fresh backward pass recorded step by step, replayed, told in words."""
import pytest

from haaw import Value
from haaw.tools.stepping import CURRENT, RECEIVING, describe_step, grads_at, step_highlights, trace_backward


def square_plus_product():
    x, w = Value(3.0, label="x"), Value(2.0, label="w")
    s = x * x
    s.label = "s"
    y = w * x
    y.label = "y"
    L = s + y
    L.label = "L"
    return L, x, w, s, y


def test_the_trace_records_every_step_and_its_grads():
    L, x, w, s, y = square_plus_product()
    start, steps = trace_backward(L)
    assert start[id(L)] == 1.0 and start[id(x)] == 0.0
    assert [st.node.label for st in steps] == ["L", "y", "s"]
    assert grads_at(start, steps, len(steps))[id(x)] == 2 * 3.0 + 2.0


def test_a_reused_value_is_shown_accumulating_with_plus_equals():
    L, *_ = square_plus_product()
    start, steps = trace_backward(L)
    text = describe_step(L, start, steps, 3)
    assert text.splitlines()[0] == "Step 3 of 3: s = x * x"
    assert "x.grad 2 += 3 → 5" in text and "x.grad 5 += 3 → 8" in text


def test_step_zero_is_the_seed():
    L, *_ = square_plus_product()
    start, steps = trace_backward(L)
    assert describe_step(L, start, steps, 0).startswith("Start: dL/dL = 1 is the seed at L")


def test_highlights_mark_the_current_node_and_the_receivers():
    L, x, w, s, y = square_plus_product()
    _, steps = trace_backward(L)
    highlight, notes = step_highlights(steps, 2)  # y = w * x
    assert highlight == {id(y): CURRENT, id(w): RECEIVING, id(x): RECEIVING}
    assert notes == {(id(w), id(y), 0): "+= 3", (id(x), id(y), 1): "+= 2"}
    assert step_highlights(steps, 0) == ({}, {})


def test_tracing_starts_fresh_and_leaves_the_graph_s_grads_as_they_were():
    L, x, w, s, y = square_plus_product()
    L.backward()
    before = (x.grad, w.grad, s.grad)
    start, steps = trace_backward(L)
    assert start[id(x)] == 0.0
    assert grads_at(start, steps, len(steps))[id(x)] == 8.0  # one pass, not added to the earlier one
    assert (x.grad, w.grad, s.grad) == before


def test_a_tensor_graph_can_be_traced_too():
    import numpy as np

    from haaw import Tensor

    x = Tensor(np.array([1.0, 2.0]), requires_grad=True, label="x")
    L = (x * x).sum()
    start, steps = trace_backward(L)
    assert [s.node._op for s in steps] == ["sum", "mul"]
    np.testing.assert_array_equal(grads_at(start, steps, 2)[id(x)], [2.0, 4.0])
    assert x.grad is None


def test_tracing_a_long_chain_keeps_one_entry_per_step_not_one_per_node_per_step():
    x = Value(0.5)
    y = x
    for _ in range(4000):
        y = y * 1.0001
    start, steps = trace_backward(y)
    assert len(steps) == 4000
    assert all(len(s.contributions) == 2 for s in steps)
    assert grads_at(start, steps, len(steps))[id(x)] == pytest.approx(1.0001**4000)
