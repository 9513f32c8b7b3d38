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
