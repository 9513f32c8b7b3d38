"""The guard's setup (benchmarks/test_targets.py): its ratios listed at the end of the run, one clock for
pytest-benchmark and the benchmarks' own turns, and a run that would time nothing refused."""
import pytest
import ratios

_RESULTS = pytest.StashKey[list]()


@pytest.fixture
def results(request) -> list:
    """(benchmark, Ratio) of every test of this run, for the summary."""
    return request.config.stash.setdefault(_RESULTS, [])


@pytest.fixture(autouse=True)
def _timing_on(request):
    """Under pytest-xdist or --benchmark-disable, ``benchmark.pedantic`` runs once, untimed: no ratio would have a
    noise, so the run stops here and says why."""
    if "benchmark" in request.fixturenames and request.getfixturevalue("benchmark").disabled:
        pytest.fail("pytest-benchmark is disabled (-n or --benchmark-disable): run `pytest benchmarks` in one process")


def pytest_configure(config):
    """The benchmarks time the other engine's turns with pytest-benchmark's timer too: ``--benchmark-timer=
    time.process_time`` makes every time of the run CPU time."""
    from pytest_benchmark.utils import load_timer

    ratios.use_clock(load_timer(config.getoption("benchmark_timer")).target)


def pytest_terminal_summary(terminalreporter, config):
    found = config.stash.get(_RESULTS, [])
    if found:
        terminalreporter.section("ratios against benchmarks/targets.toml (median ± noise)")
        for benchmark, ratio in found:
            terminalreporter.write_line(f"{benchmark:<12}{ratio}")
