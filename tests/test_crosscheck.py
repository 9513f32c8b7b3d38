import numpy as np

from haaw import Value
from haaw.crosscheck import SKIP_NOTE, compare, optional_torch


def test_compare_says_exact_close_or_wrong(capsys):
    assert compare("same", Value(2.0), 2.0)
    assert compare("near", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))
    assert not compare("far", 1.0, 1.1)
    assert not compare("shape", np.zeros(2), np.zeros(3))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["same", "exact"]
    assert "close (max diff" in lines[1]
    assert "WRONG (max diff 0.1)" in lines[2]
    assert "shapes differ: ours (2,), reference (3,)" in lines[3]


def test_without_torch_the_cross_check_says_it_skipped(monkeypatch, capsys):
    monkeypatch.setenv("HAAW_NO_TORCH", "1")
    assert optional_torch() is None
    assert capsys.readouterr().out.strip() == SKIP_NOTE


def test_with_torch_it_is_returned_quietly(capsys):
    import pytest

    torch = pytest.importorskip("torch")
    assert optional_torch() is torch
    assert capsys.readouterr().out == ""
