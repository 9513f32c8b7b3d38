"""Smoke test for benchmarks/scalar_step.py: it runs and prints its table. No timing asserted."""
import contextlib
import importlib.util
import io
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scalar_step.py"


@pytest.fixture(scope="module")
def quick_output():
    """What ``python benchmarks/scalar_step.py --quick`` prints, run once for all the tests."""
    spec = importlib.util.spec_from_file_location("scalar_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert module.main(["--quick"]) == 0
    return out.getvalue()


def row(output, engine):
    """The table row of ``engine``: its name, then median ms/step and gc share."""
    rows = [line.split() for line in output.splitlines() if line.split()[:1] == [engine]]
    assert len(rows) == 1, f"expected one table row for {engine!r} in:\n{output}"
    return rows[0]


def test_quick_run_prints_haaw_row(quick_output):
    assert "engine" in quick_output and "median ms/step" in quick_output
    assert "Python 3." in quick_output
    assert float(row(quick_output, "haaw")[1]) > 0


def test_quick_run_compares_with_micrograd(quick_output):
    pytest.importorskip("micrograd")
    assert "first-step losses agree" in quick_output
    assert float(row(quick_output, "micrograd")[1]) > 0
    assert "micrograd/haaw:" in quick_output


def test_tensor_benchmark_runs_all_engines_on_the_same_problem(capsys, monkeypatch):
    """benchmarks/mlp_step.py --quick: both dtypes, and the engines agree on the first loss (it
    raises otherwise). No timing is asserted."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("mlp_step", SCRIPT.parent / "mlp_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--tensor-only"]) == 0
    out = capsys.readouterr().out
    assert row(out, "float32") and row(out, "float64")
    assert "targets: haaw/numpy at most 1.15" in out
