"""Progress survives the kernel: each check is written to a file, and progress() reads it back."""
import json
import os
import subprocess
import sys

from haaw.course.exercises import REGISTRY, check, progress
from haaw.course.exercises.progress import load


def test_a_check_is_written_down_and_a_new_process_still_knows(tmp_path, monkeypatch):
    path = tmp_path / "haaw-progress.json"
    monkeypatch.setenv("HAAW_PROGRESS", str(path))
    assert check("01-dL/dw", 10.0).status == "wrong"
    assert check("01-dL/dw", REGISTRY["01-dL/dw"].answer).status == "correct"
    assert check("01-dL/dw", 10.0).status == "wrong"  # a later wrong attempt does not undo the solve
    check("02-backward", ...)  # not attempted: not written down
    kept = load(path)
    assert kept["01-dL/dw"]["solved"] and kept["01-dL/dw"]["attempts"] == 3 and kept["01-dL/dw"]["last"] == "wrong"
    assert "02-backward" not in kept
    # a new process, as after a kernel restart
    shown = subprocess.run([sys.executable, "-c", "from haaw.course.exercises import progress; print(progress())"],
                           env={**os.environ, "HAAW_PROGRESS": str(path)}, capture_output=True, text=True,
                           check=True).stdout
    row = next(line for line in shown.splitlines() if line.startswith("01 "))
    total = sum(key.startswith("01-") for key in REGISTRY)
    assert row.split()[:3] == ["01", "1", str(total)], shown


def test_progress_never_breaks_an_exercise(tmp_path, monkeypatch):
    broken = tmp_path / "haaw-progress.json"
    broken.write_text("{not json")
    monkeypatch.setenv("HAAW_PROGRESS", str(broken))
    assert check("01-dL/dw", REGISTRY["01-dL/dw"].answer).status == "correct"  # an unreadable file is started afresh
    assert json.loads(broken.read_text())["exercises"]["01-dL/dw"]["solved"]
    monkeypatch.setenv("HAAW_PROGRESS", str(tmp_path / "no such folder" / "file.json"))
    assert check("01-dL/dw", REGISTRY["01-dL/dw"].answer).status == "correct"  # unwritable: nothing kept, no error
    monkeypatch.setenv("HAAW_PROGRESS", "off")
    assert "not being kept" in repr(progress())


def test_progress_lists_every_notebook_s_exercises(tmp_path, monkeypatch):
    monkeypatch.setenv("HAAW_PROGRESS", str(tmp_path / "p.json"))
    text = repr(progress())
    for number in sorted({key[:2] for key in REGISTRY}):
        assert any(line.startswith(f"{number} ") for line in text.splitlines()), number
    assert text.splitlines()[-1].split()[:3] == ["all", "0", str(len(REGISTRY))]
