"""scripts/exercise_mutants.py: it reports a wrong function that a weak battery lets through, does not count a
mutant that computes what the reference computes, and writes its table in the format the page shows."""
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, CodeExercise
from haaw.course.exercises.code import Case
from haaw.course.exercises.registry import CORRECT
from haaw.engine import guard

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("exercise_mutants", ROOT / "scripts" / "exercise_mutants.py")
em = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = em  # its dataclasses look their module up
spec.loader.exec_module(em)


def planted(x):
    y = np.maximum(x, 0.0)
    return y * 2.0


@pytest.fixture
def weak(monkeypatch):
    """An exercise whose battery is one case, x = [2]: there 2·x, x + 2 and x² all give 4."""
    ex = CodeExercise(key="zz-planted", minutes=4, question="Return twice the positive part of x.", signature="planted(x) -> y",
                      reference=planted, cases=lambda: [Case("the only case", (np.array([2.0]),))], outputs=("y",))
    monkeypatch.setitem(REGISTRY, ex.key, ex)
    return ex


def test_a_survivor_of_a_weak_battery_is_reported(weak):
    result = em.measure(weak)
    survived = {m.change: m for m in result.survived}
    assert "`return y * 2.0` → `return y + 2.0`" in survived and "`return y * 2.0` → `return y ** 2.0`" in survived, list(survived)
    plus = survived["`return y * 2.0` → `return y + 2.0`"]
    assert plus.status == CORRECT and plus.operator == "arithmetic" and "perturbed" in plus.differs_on
    assert plus.where == f"{Path(__file__).name}:{guard.unguarded(planted).__code__.co_firstlineno + 2}"
    # a wrong version the one case does show is refused, and not listed as a survivor
    refused = {m.change for m in result.refused}
    assert "`return y * 2.0` → `return y * 3.0`" in refused and "`return y * 2.0` → `return y * 3.0`" not in survived


def test_an_equivalent_mutant_is_not_counted(weak):
    result = em.measure(weak)
    swapped = [m for m in result.made if m.operator == "arguments swapped"]
    assert [m.change for m in swapped] == ["`y = np.maximum(x, 0.0)` → `y = np.maximum(0.0, x)`"]
    assert swapped[0] in result.equivalent and not swapped[0].kept and not swapped[0].status
    assert swapped[0] not in result.refused + result.survived
    assert len(result.equivalent) + len(result.kept) == len(result.made) == result.possible
    assert len(result.refused) + len(result.survived) == len(result.kept)


def test_the_report_s_table_and_survivors(weak, tmp_path):
    results = [em.measure(REGISTRY[key], limit=4, seed=1) for key in ("04-relu-backward", "03-unbroadcast")]
    results.append(em.measure(weak))
    page = em.report(results, "python scripts/exercise_mutants.py --limit 4", 1.5)
    assert page.startswith("# Exercise mutants")
    assert "Written by `python scripts/exercise_mutants.py --limit 4` on " in page and "The run took 2 s in all" in page
    assert ("| exercise | possible | made | equivalent | kept | refused | survived | slowest check | battery |"
            in page)
    for r in results:
        row = re.search(rf"^\| `{re.escape(r.key)}` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) ms \| "
                        rf"(\d+) inputs: .+ \|$", page, re.M)
        assert row, r.key
        numbers = [int(n) for n in row.groups()]
        assert numbers[:6] == [r.possible, len(r.made), len(r.equivalent), len(r.kept), len(r.refused),
                               len(r.survived)]
        assert numbers[7] == r.probes
        assert r.slowest_check < 1.0  # a check stays under a second
    assert [len(r.made) for r in results[:2]] == [4, 4]
    # each survivor is one line: operator, where, the change, the input it differs on
    lines = [line for line in page.splitlines() if line.startswith("- [arithmetic] test_exercise_mutants.py:")]
    assert any(line.endswith("`return y * 2.0` → `return y + 2.0`; first differs on: the only case, perturbed (1) (gives other "
                              "numbers, off by up to " + line.rsplit("off by up to ", 1)[-1]) for line in lines)
    assert f"`zz-planted`, {len(results[2].survived)} of {len(results[2].kept)} kept:" in page


def test_the_command_line_writes_the_page(tmp_path, capsys):
    out = tmp_path / "page.md"
    em.main(["--exercise", "04-relu-backward", "--limit", "3", "--write", str(out)])
    printed = capsys.readouterr().out
    assert "04-relu-backward: 3 made of 10" in printed
    assert f"`python scripts/exercise_mutants.py --exercise 04-relu-backward --limit 3 --write {out}`" in out.read_text()


def test_a_class_is_skipped_and_said_so():
    result = em.measure(REGISTRY["06-checkpoint"])
    assert result.skipped == "its reference is a class (CheckpointSegment), not a function"
    assert "skipped: its reference is a class" in em.table([result])
