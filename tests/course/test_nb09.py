"""Notebook 09's props: the real all-reduce gives up on time and leaves no worker behind; the pipeline schedule."""
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


# --- the pipeline schedule (09+) -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages, micro", [(1, 3), (2, 1), (2, 5), (4, 4), (4, 9), (6, 3)])
def test_a_pipeline_s_bubble_is_p_minus_1_over_m_plus_p_minus_1_and_every_piece_waits_for_its_input(kind, stages, micro):
    from haaw.course.nb09 import pipeline_schedule

    plan = pipeline_schedule(stages, micro, kind, forward=1.0, backward=2.0)
    assert plan["bubble"] == pytest.approx((stages - 1) / (micro + stages - 1), abs=1e-12)
    assert plan["step"] == pytest.approx((micro + stages - 1) * 3.0)
    end = {(s, what, j): e for s, what, j, _, e in plan["work"]}
    assert len(end) == 2 * stages * micro
    for s, what, j, start, _ in plan["work"]:
        needs = (s - 1, "F", j) if what == "F" else ((s + 1, "B", j) if s < stages - 1 else (s, "F", j))
        if not (what == "F" and s == 0):
            assert start >= end[needs] - 1e-12
    for s in range(stages):  # a stage does one thing at a time
        spans = sorted((start, finish) for t, _, _, start, finish in plan["work"] if t == s)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:]))
    expected = [micro] * stages if kind == "gpipe" else [min(stages - s, micro) for s in range(stages)]
    assert plan["in_flight"] == expected


def test_pipeline_schedule_names_the_kinds_it_knows():
    from haaw.course.nb09 import pipeline_schedule

    with pytest.raises(ValueError, match="gpipe"):
        pipeline_schedule(2, 2, "interleaved")
