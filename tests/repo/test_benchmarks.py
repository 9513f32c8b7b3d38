"""Smoke test for benchmarks/scalar_step.py: it runs and prints its table. No timing asserted."""
import contextlib
import importlib.util
import io
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scalar_step.py"


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


def rows(output, engine):
    """The table rows of ``engine`` (collector on, then off): their columns after the name."""
    found = [line.split()[2:] for line in output.splitlines() if line.split()[1:2] == [engine]]
    assert len(found) == 2, f"expected two table rows for {engine!r} in:\n{output}"
    return found


def test_quick_run_prints_haaw_rows(quick_output):
    assert "ms/step" in quick_output and "backward ms" in quick_output
    assert "Python 3." in quick_output
    assert all(float(r[0]) > 0 and float(r[1]) > 0 for r in rows(quick_output, "haaw"))


def test_quick_run_compares_with_micrograd_with_the_collector_on_and_off(quick_output):
    pytest.importorskip("micrograd")
    assert "first-step losses agree" in quick_output
    assert all(float(r[0]) > 0 for r in rows(quick_output, "micrograd"))
    assert "with the collector on (target: at least 4x)" in quick_output
    assert "with it off (target: at least 1x)" in quick_output


def test_tensor_benchmark_runs_all_engines_on_the_same_problem(capsys, monkeypatch):
    """benchmarks/mlp_step.py --quick: both dtypes, and the engines agree on the first loss (it
    raises otherwise). No timing is asserted."""
    pytest.importorskip("threadpoolctl")  # the benchmark pins NumPy's BLAS threads with it (the test extra)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("mlp_step", SCRIPT.parent / "mlp_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--tensor-only"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("float")] == ["float32", "float64"]
    assert "target: haaw/numpy at most 1.10" in out
