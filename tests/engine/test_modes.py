"""haaw/engine/modes.py: no_grad as a block and as a decorator, with Python's and PyTorch's rules for errors."""
import numpy as np
import pytest

from haaw import Tensor, no_grad
from haaw.engine.modes import grad_enabled


def test_an_error_inside_no_grad_reaches_the_caller_and_recording_comes_back():
    """A with-block's __exit__ that returned True would swallow the error, and the code after it would run on
    (torch.no_grad lets it through too)."""
    x = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="inside the block"):
        with no_grad():
            assert not grad_enabled()
            raise ValueError("inside the block")
    assert grad_enabled() and (x * 2).requires_grad


def test_an_error_inside_a_function_decorated_with_no_grad_reaches_the_caller():
    @no_grad()
    def fails():
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        fails()
    assert grad_enabled()
