import numpy as np
import pytest

from haaw import Value
from haaw.tools.crosscheck import SKIP_NOTE, compare, optional_torch, torch_check, verdict


def test_verdicts_say_agrees_at_the_tolerance_or_wrong():
    assert verdict("same", Value(2.0), 2.0) == "same         agrees (rtol 1e-07)"
    assert verdict("loose", 1.0, 1.0 + 1e-7, rtol=1e-6) == "loose        agrees (rtol 1e-06)"
    assert verdict("far", 1.0, 1.1) == "far          WRONG (max diff 0.1, more than rtol 1e-07 allows)"
    assert "shapes differ: ours (2,), reference (3,)" in verdict("shape", np.zeros(2), np.zeros(3))


def test_a_verdict_does_not_depend_on_the_last_bits():
    """Another CPU's kernels round the last bits differently: 0, 1 ulp or 10 ulps apart must read the same."""
    x = np.array([1.0, -2.5, 3e-3])
    lines = {verdict("g", x + k * np.spacing(x), x) for k in (0, 1, 10, 100)}
    assert lines == {"g            agrees (rtol 1e-07)"}


def test_compare_prints_the_verdict_and_returns_nothing(capsys):
    assert compare("same", 1.0, 1.0) is None
    assert capsys.readouterr().out.split() == ["same", "agrees", "(rtol", "1e-07)"]


def test_without_torch_the_cross_checks_say_they_skipped(monkeypatch, capsys):
    monkeypatch.setenv("HAAW_NO_TORCH", "1")
    assert optional_torch() is None
    assert torch_check(lambda x: x.exp(), np.ones(2)) is None
    assert capsys.readouterr().out.splitlines() == [SKIP_NOTE, SKIP_NOTE]


def test_torch_check_runs_one_function_in_both_libraries(capsys):
    torch = pytest.importorskip("torch")
    assert optional_torch() is torch and capsys.readouterr().out == ""
    rng = np.random.default_rng(0)
    torch_check(lambda x, w: (x @ w).tanh().sum(axis=0), rng.standard_normal((3, 2)),
                rng.standard_normal((2, 4)), names=["X", "W"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["output", "d/dX", "d/dW"]
    assert not any("WRONG" in line for line in lines)


def test_torch_check_catches_a_function_that_differs(capsys):
    pytest.importorskip("torch")
    torch_check(lambda x: x * 2.0 if type(x).__module__.startswith("haaw") else x * 2.5, np.ones(3))
    assert "WRONG" in capsys.readouterr().out
