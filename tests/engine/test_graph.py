"""haaw.engine.graph: what instruments and the course may read of a node, without its private attributes."""
import numpy as np
import pytest

from haaw import Tensor, Value
from haaw.engine.graph import context, is_node, local, operation, parents


def test_a_value_s_parents_and_local_derivatives_come_in_the_same_order():
    a, b = Value(2.0), Value(3.0)
    y = a * b
    assert parents(y) == (a, b) and local(y) == (3.0, 2.0) and operation(y) == "*"
    assert parents(a) == () and local(a) == () and operation(a) == ""


def test_a_tensor_has_parents_and_a_context_but_no_local_derivatives():
    x = Tensor(np.ones(3), requires_grad=True)
    y = x * 2.0
    assert parents(y)[0] is x and context(y) is not None and context(x) is None and is_node(y)
    with pytest.raises(TypeError, match="only a Value"):
        local(y)


def test_a_value_has_no_context_and_a_tensor_no_local_derivatives_by_the_whole_message():
    assert context(Value(1.0)) is None and context(Value(1.0) * 2) is None  # the docstring: None for a Value
    with pytest.raises(TypeError) as err:
        local(Tensor(np.ones(2)))
    assert str(err.value) == "local(): only a Value keeps its local derivatives, not a Tensor"
