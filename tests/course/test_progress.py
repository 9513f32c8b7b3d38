"""Progress survives the kernel: each check is written to a file, and progress() reads it back."""
import json
import math
import os
import subprocess
import sys

import pytest

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


def _define(tmp_path, source: str, name: str):
    """A function defined from a file, as a notebook cell defines one (its source can be read back)."""
    import importlib.util

    path = tmp_path / f"cell_{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"cell_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_what_passed_is_kept_and_runs_again_after_a_restart(tmp_path, monkeypatch):
    """A passed function's source is kept beside its verdict; mine() in a new kernel checks it again and hands it
    back, and yours() plugs it in; a key not passed gives None and says the engine's own runs."""
    from haaw import Tensor
    from haaw.course.exercises import code, mine, yours
    from haaw.engine import plugins

    monkeypatch.setenv("HAAW_PROGRESS", str(tmp_path / "haaw-progress.json"))
    source = "import numpy as np\n\n\ndef my_tanh_backward(y, G):\n    return G * (1 - y * y)\n"
    assert check("04-tanh-backward", _define(tmp_path, source, "my_tanh_backward")).correct
    assert load()["04-tanh-backward"]["source"] == source.split("\n\n\n", 1)[1]
    monkeypatch.setattr(code, "_passed", {})  # a restarted kernel remembers nothing
    tanh_backward, relu_backward = mine("04-tanh-backward", "04-relu-backward")
    assert tanh_backward.__name__ == "my_tanh_backward" and relu_backward is None
    with yours(tanh=tanh_backward) as plugged:
        assert plugged.all and "tanh" in plugins.in_use()
        x = Tensor([0.5, -1.0], requires_grad=True)
        x.tanh().sum().backward()
    assert x.grad.tolist() == pytest.approx([1 - math.tanh(0.5) ** 2, 1 - math.tanh(-1.0) ** 2], rel=1e-12)


def test_a_kept_function_that_no_longer_runs_is_not_handed_back(tmp_path, monkeypatch, capsys):
    from haaw.course.exercises import mine

    path = tmp_path / "haaw-progress.json"
    monkeypatch.setenv("HAAW_PROGRESS", str(path))
    path.write_text(json.dumps({"course": "haaw", "exercises": {
        "04-tanh-backward": {"solved": True, "source": "def broken(y, G):\n    return helper(y) * G\n", "name": "broken"},
        "04-relu-backward": {"solved": True, "source": "def relu(y, G)\n", "name": "relu"}}}))
    assert mine("04-tanh-backward", "04-relu-backward", "99-none") == (None, None, None)
    said = capsys.readouterr().out
    assert "· 04-tanh-backward: it no longer passes" in said and "helper" in said
    assert "· 04-relu-backward: its source did not run again (SyntaxError" in said
    assert "· 99-none: there is no such exercise" in said


def test_a_companion_shares_the_progress_file_of_the_cores(tmp_path, monkeypatch):
    import sys

    progress = sys.modules["haaw.course.exercises.progress"]  # the package exports a progress() function too
    monkeypatch.delenv("HAAW_PROGRESS", raising=False)
    (tmp_path / "deeper").mkdir()
    monkeypatch.chdir(tmp_path / "deeper")
    assert progress.where() == tmp_path / "deeper" / "haaw-progress.json"  # no core beside it: its own folder
    (tmp_path / "03_matrices.ipynb").write_text("{}")
    assert progress.where() == tmp_path / "haaw-progress.json"
    monkeypatch.chdir(tmp_path)
    assert progress.where() == tmp_path / "haaw-progress.json"


def test_the_file_names_its_learner_asked_once_and_kept(tmp_path, monkeypatch, capsys):
    """The first verdict without a name says in one line how to give one, and only once (the file remembers it
    asked); progress(name=...) keeps the name in the file, where a new process and later verdicts find it."""
    progress_module = sys.modules["haaw.course.exercises.progress"]
    from haaw.course.exercises.progress import ASK_NAME, read

    path = tmp_path / "haaw-progress.json"
    monkeypatch.setenv("HAAW_PROGRESS", str(path))
    monkeypatch.delenv("HAAW_LEARNER", raising=False)
    monkeypatch.setattr(progress_module, "_asked", False)
    check("01-dL/dw", 10.0)
    said = capsys.readouterr().out
    assert said.count(ASK_NAME) == 1 and len(said.strip().splitlines()) == 1, said
    assert "learner" in read(path) and read(path)["learner"] is None
    monkeypatch.setattr(progress_module, "_asked", False)  # a new kernel: the file says it was asked already
    check("01-dL/dw", 11.0)
    assert ASK_NAME not in capsys.readouterr().out
    assert repr(progress(name="  Ada   Lovelace ")).startswith("Ada Lovelace's progress, from")
    check("01-dL/dw", REGISTRY["01-dL/dw"].answer)
    kept = json.loads(path.read_text())
    assert kept["learner"] == "Ada Lovelace" and kept["exercises"]["01-dL/dw"]["attempts"] == 3
    shown = subprocess.run([sys.executable, "-c", "from haaw.course.exercises import progress; print(progress())"],
                           env={**os.environ, "HAAW_PROGRESS": str(path)}, capture_output=True, text=True,
                           check=True).stdout
    assert shown.startswith("Ada Lovelace's progress")
    assert repr(progress(name=42)).startswith("Ada Lovelace's")  # not a name: nothing changed
    assert "nothing was kept" in capsys.readouterr().out


def test_haaw_learner_names_the_file_without_asking(tmp_path, monkeypatch, capsys):
    progress_module = sys.modules["haaw.course.exercises.progress"]
    from haaw.course.exercises.progress import ASK_NAME, read

    path = tmp_path / "haaw-progress.json"
    monkeypatch.setenv("HAAW_PROGRESS", str(path))
    monkeypatch.setenv("HAAW_LEARNER", "grace")
    monkeypatch.setattr(progress_module, "_asked", False)
    check("01-dL/dw", 10.0)
    assert ASK_NAME not in capsys.readouterr().out
    assert read(path)["learner"] == "grace"
    monkeypatch.delenv("HAAW_LEARNER")
    check("01-dL/dw", 10.0)  # kept: the variable need not stay set
    assert read(path)["learner"] == "grace" and ASK_NAME not in capsys.readouterr().out


def test_an_unwritable_file_asks_once_a_kernel(tmp_path, monkeypatch, capsys):
    progress_module = sys.modules["haaw.course.exercises.progress"]
    monkeypatch.setenv("HAAW_PROGRESS", str(tmp_path / "no such folder" / "haaw-progress.json"))
    monkeypatch.delenv("HAAW_LEARNER", raising=False)
    monkeypatch.setattr(progress_module, "_asked", False)
    for _ in range(3):
        check("01-dL/dw", 10.0)
    assert capsys.readouterr().out.count(progress_module.ASK_NAME) == 1
