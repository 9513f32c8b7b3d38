"""Notebook 09's real all-reduce: it gives up on time and leaves no worker behind."""
import multiprocessing
import socket

import pytest

from haaw.course.nb09 import all_reduce_with_torch, initial_weights, make_data


def test_a_timeout_stops_every_worker_and_says_so():
    pytest.importorskip("torch")
    x, y = make_data(8)
    with pytest.raises(TimeoutError, match=r"the 2 workers did not finish within 0.01 s"):
        all_reduce_with_torch([(x[:4], y[:4]), (x[4:], y[4:])], initial_weights(), timeout=0.01)
    assert multiprocessing.active_children() == []


def test_the_loopback_interface_is_found_by_name_on_this_machine():
    assert any(name.startswith("lo") for _, name in socket.if_nameindex())


def test_flat_and_set_grads_are_inverse_and_put_each_piece_in_its_parameter_s_grad():
    import numpy as np

    from haaw.course.nb09 import flat, model_with, set_grads

    model = model_with(initial_weights())
    shapes = [p.shape for p in model.parameters()]
    vector = np.arange(sum(int(np.prod(s)) for s in shapes), dtype=np.float64)
    set_grads(model, vector)
    assert [p.grad.shape for p in model.parameters()] == shapes
    assert model.parameters()[0].grad.ravel()[:3].tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(flat([p.grad for p in model.parameters()]), vector)
