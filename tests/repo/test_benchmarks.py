"""The benchmarks (benchmarks/): each runs and prints its ratios against benchmarks/targets.toml, and the guard's
logic (benchmarks/ratios.py) passes and fails on synthetic timings. No timing is asserted."""
import contextlib
import importlib
import io
import math
import random
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name):
    """A module of benchmarks/, imported as the scripts import each other: their folder on the path."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


ratios = load("ratios")


@pytest.fixture(scope="module")
def quick_output():
    """What ``python benchmarks/scalar_step.py --quick`` prints, run once for all the tests."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert load("scalar_step").main(["--quick"]) == 0
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
    for name in ratios.targets("scalar_step"):  # every ratio of targets.toml, with its target
        assert f"{name} " in quick_output and f"target at most {ratios.targets('scalar_step')[name]:.2f}" in quick_output


def test_tensor_benchmark_runs_all_engines_on_the_same_problem(capsys):
    """benchmarks/mlp_step.py --quick: both dtypes, and the engines agree on the first loss (it raises otherwise).
    No timing is asserted."""
    pytest.importorskip("threadpoolctl")  # the benchmark pins NumPy's BLAS threads with it (the test extra)
    assert load("mlp_step").main(["--quick", "--tensor-only"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("float")] == ["float32", "float64"]
    assert "haaw/numpy float32" in out and "target at most 1.15" in out


# --- the guard's logic, on timings made up here -----------------------------------------------------------------

def turns(ms: float, n: int = 21, spread: float = 0.02, seed: int = 0) -> list:
    """``n`` made-up step times around ``ms`` milliseconds, in seconds, each off by up to ``spread`` (relative)."""
    rng = random.Random(seed)
    return [ms / 1000 * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_median_s_noise_is_a_box_plot_s_notch():
    samples = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]  # IQR 4 (inclusive quartiles 3 and 7), n 9
    assert ratios.notch(samples) == pytest.approx(1.57 * 4 / 3)
    with pytest.raises(ValueError, match="at least 4"):
        ratios.notch([1.0, 2.0, 3.0])


def test_a_ratio_of_turns_is_the_median_of_each_turn_s_ratio_and_hardly_moves_when_both_slow_down():
    ours, theirs = turns(40), turns(60, seed=1)
    slow_spell = [1.0] * 10 + [3.0] * 11  # the machine triples both engines' times for half the run
    r = ratios.paired("step", [t * s for t, s in zip(ours, slow_spell)], [t * s for t, s in zip(theirs, slow_spell)])
    assert r.value == pytest.approx(40 / 60, rel=0.03) and r.noise < 0.02


def test_the_current_timings_pass_and_a_backward_30_percent_slower_fails():
    """The planted slowdown of docs/performance.md, on made-up timings: a step of 20 ms forward and 20 ms backward
    against micrograd's 56 ms passes 0.8; its backward 30% slower (26 ms) makes the step 0.82 and fails."""
    backward, theirs = turns(20, seed=2), turns(56, seed=3)
    now = [f + b for f, b in zip(turns(20, seed=4), backward)]
    slowed = [f + 1.3 * b for f, b in zip(turns(20, seed=4), backward)]
    passes, fails = (ratios.paired("step, collector off", ours, theirs) for ours in (now, slowed))
    passes, fails = (ratios.Ratio(r.name, r.value, r.noise, target=0.8) for r in (passes, fails))
    assert not passes.fails and fails.fails, (passes, fails)


def test_a_ratio_above_its_target_by_less_than_its_noise_passes_and_by_more_fails():
    assert not ratios.Ratio("r", 0.84, 0.05, 0.80).fails
    assert ratios.Ratio("r", 0.86, 0.05, 0.80).fails
    assert not ratios.Ratio("r", 0.70, 0.0, 0.80).fails


def test_a_wider_spread_is_more_noise_and_the_same_slowdown_is_then_forgiven():
    """The same medians, measured on a quiet machine and on a busy one: the busy run's interval is wider."""
    quiet = ratios.paired("step", turns(46, spread=0.01), turns(56, spread=0.01, seed=1))
    busy = ratios.paired("step", turns(46, spread=0.4), turns(56, spread=0.4, seed=1))
    assert quiet.noise < 0.01 < 0.05 < busy.noise
    assert ratios.Ratio("step", quiet.value, quiet.noise, 0.8).fails
    assert not ratios.Ratio("step", busy.value, busy.noise, 0.8).fails


def test_a_ratio_of_blocks_adds_the_two_medians_relative_noise_in_quadrature():
    ours, theirs = turns(80, spread=0.1), turns(600, spread=0.1, seed=1)
    r = ratios.of_medians("step, collector on", ours, theirs)
    a, b = sorted(ours)[10], sorted(theirs)[10]
    assert r.value == pytest.approx(a / b)
    assert r.noise == pytest.approx(a / b * math.hypot(ratios.notch(ours) / a, ratios.notch(theirs) / b))


def test_the_scalar_benchmark_s_ratios_from_its_measurements():
    """scalar_step.ratios on made-up turns: step and backward per node (the node counts divide each engine's
    backward), and the collector-on step as a ratio of medians."""
    scalar_step = load("scalar_step")
    off = {"haaw": (turns(46), turns(21), 0.0), "micrograd": (turns(58, seed=1), turns(27, seed=2), 0.0)}
    on = {"haaw": (turns(70), turns(21), 0.3), "micrograd": (turns(600, seed=1), turns(27), 0.9)}
    found = {r.name: r for r in scalar_step.ratios(off, on, {"haaw": 42_000, "micrograd": 42_000 * 1.1})}
    assert found["step, collector off"].value == pytest.approx(46 / 58, rel=0.03)
    assert found["backward per node"].value == pytest.approx(21 / 27 * 1.1, rel=0.03)
    assert found["step, collector on"].value == pytest.approx(70 / 600, rel=0.03)
    assert set(found) == set(ratios.targets("scalar_step"))


def test_every_ratio_needs_a_target_and_every_target_a_ratio():
    r = ratios.Ratio("step, collector off", 0.7, 0.01)
    with pytest.raises(KeyError, match="each ratio needs one target"):
        ratios.judged("scalar_step", [r, ratios.Ratio("a renamed ratio", 0.7, 0.01)])
    with pytest.raises(KeyError, match="each target a ratio"):
        ratios.judged("scalar_step", [r])  # the other two targets were not measured
    assert ratios.judged("scalar_step", [r], every=False)[0].target == ratios.targets("scalar_step")[r.name]
