import numpy as np
import pytest

from haaw import Value
from haaw.tools.crosscheck import SKIP_NOTE, compare, optional_torch, torch_check, verdict


def test_verdicts_say_exact_close_or_wrong():
    assert verdict("same", Value(2.0), 2.0).split() == ["same", "exact"]
    assert verdict("near", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 3e-13])).split()[1:] == ["close", "(max", "diff", "≤", "1e-12)"]
    assert "WRONG (max diff 0.1)" in verdict("far", 1.0, 1.1)
    assert "shapes differ: ours (2,), reference (3,)" in verdict("shape", np.zeros(2), np.zeros(3))


def test_compare_prints_the_verdict_and_returns_nothing(capsys):
    assert compare("same", 1.0, 1.0) is None
    assert capsys.readouterr().out.split() == ["same", "exact"]


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
