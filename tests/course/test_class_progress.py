"""A class's progress files become one table and one figure; a file that is not one is named and skipped."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from haaw.course import class_progress
from haaw.course.exercises import REGISTRY

ROOT = Path(__file__).resolve().parents[2]


def _file(path: Path, learner, exercises: dict) -> Path:
    path.write_text(json.dumps({"course": "haaw", "learner": learner, "exercises": exercises}))
    return path


def _class(tmp_path: Path) -> list[Path]:
    order = class_progress.course_order()
    ada = _file(tmp_path / "a.json", "Ada", {  # the file's order is not the course's: stopped at order[3]
        order[3]: {"solved": False, "attempts": 4, "last": "wrong"},
        order[0]: {"solved": True, "attempts": 1, "last": "correct"},
        "99-from-another-version": {"solved": True, "attempts": 1}})
    grace = _file(tmp_path / "g.json", None, {order[1]: {"solved": True, "attempts": 2, "last": "correct"}})
    (tmp_path / "broken.json").write_text('{"course": "haaw", "exercises": {')  # cut short
    (tmp_path / "other.json").write_text(json.dumps({"name": "a notebook's settings"}))  # another program's
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00junk")
    (tmp_path / "no-table.json").write_text(json.dumps({"course": "haaw", "exercises": [1]}))
    (tmp_path / "folder.json").mkdir()
    return [ada, grace, *(tmp_path / n for n in ("broken.json", "other.json", "list.json", "binary.json",
                                                  "no-table.json", "folder.json", "missing.json"))]


def test_the_course_order_is_every_exercise_once_notebook_by_notebook():
    order = class_progress.course_order()
    assert sorted(order) == sorted(REGISTRY)
    assert [k[:2] for k in order] == sorted(k[:2] for k in order)
    assert order.index("01-step") < order.index("01-chain")  # the core's before its companion's
    assert sorted(class_progress.course_order(ROOT / "no such folder")) == sorted(REGISTRY)


def test_a_class_becomes_a_table_and_a_figure_and_bad_files_are_skipped(tmp_path):
    order = class_progress.course_order()
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "haaw.course.class_progress", *map(str, _class(tmp_path)),
                          "--out", str(out)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    for name in ("broken.json", "other.json", "list.json", "binary.json", "no-table.json", "folder.json",
                 "missing.json"):
        assert any(line.startswith(str(tmp_path / name)) and "skipped" in line for line in run.stderr.splitlines()), name
    assert "99-from-another-version" in run.stderr and "Traceback" not in run.stderr
    with open(out / "class-progress.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["learner"] for r in table] == ["Ada", "g.json"]  # no name kept: the file's name
    ada, grace = table
    assert (ada["solved"], ada["tried, not solved"], ada["stopped at"]) == ("1", "1", order[3])
    assert ada[order[0]] == "solved (1)" and ada[order[3]] == "tried (4)" and ada[order[2]] == ""
    assert (grace["solved"], grace["stopped at"], grace[order[1]]) == ("1", order[1], "solved (2)")
    assert "99-from-another-version" not in table[0]
    text = (out / "class-progress.md").read_text()
    assert f"| Ada | 1 | 1 | {order[3]} |" in text and "## Skipped" in text and "broken.json" in text
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # a minimal install: the tables, and a line that says why there is no figure
        assert "No figure: it needs matplotlib" in run.stderr and not (out / "class-progress.png").exists()
    else:
        assert (out / "class-progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_readable_file_writes_nothing_and_says_so(tmp_path, capsys):
    (tmp_path / "x.json").write_text("not json")
    assert class_progress.main([str(tmp_path / "x.json"), "--out", str(tmp_path / "out")]) == 1
    assert "No progress file could be read" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_two_files_with_one_name_are_told_apart(tmp_path):
    files = [_file(tmp_path / f"{n}.json", "Sam", {}) for n in ("one", "two")]
    learners, skipped = class_progress.read_class(files)
    assert [x.name for x in learners] == ["Sam (one.json)", "Sam (two.json)"] and not skipped


@pytest.mark.parametrize("entry", [None, "solved", {"solved": "yes", "attempts": "many"}, {"attempts": -3}])
def test_an_odd_entry_is_never_counted_as_solved(tmp_path, entry):
    key = next(iter(REGISTRY))
    (learner,), _ = class_progress.read_class([_file(tmp_path / "p.json", "Kim", {key: entry})])
    assert not learner.exercises.get(key, {}).get("solved")
