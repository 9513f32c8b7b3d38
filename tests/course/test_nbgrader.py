"""The course as an nbgrader course (haaw/course/nbgrader_course.py): every exercise a solution region and a test
cell with its points; and nbgrader's own round trip, generate -> autograde -> feedback, on a right submission, a
wrong one and one that calls the engine's own version, its grades read from the gradebook."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from haaw.course import nbgrader_course as ng  # noqa: E402
from haaw.course.exercises import REGISTRY, CodeExercise  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    out = tmp_path_factory.mktemp("nbgrader")
    written = ng.write_course(out, NOTEBOOKS, companions=True)
    return out, {p.stem: nbformat.read(p, as_version=4) for p in written}


def _graded(nb):
    return [c for c in nb.cells if c.metadata["nbgrader"]["grade"]]


def test_every_exercise_is_one_solution_region_and_one_locked_test_with_its_points(course):
    out, notebooks = course
    assert len(notebooks) == 20 and (out / "nbgrader_config.py").exists()  # 10 cores, 10 companions; not 00
    seen = []
    for stem, nb in notebooks.items():
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells]
        assert len(ids) == len(set(ids)), stem
        for i, cell in enumerate(nb.cells):
            meta = cell.metadata["nbgrader"]
            if meta["grade"]:
                key = re.search(r'verdict = check\("([^"]+)", (\w+)\)', cell.source).group(1)
                seen.append(key)
                assert meta["locked"] and not meta["solution"] and meta["points"] == ng.points(REGISTRY[key])
                assert "assert verdict.correct" in cell.source and "print(verdict)" in cell.source
                answer = nb.cells[i - 1]
                assert answer.metadata["nbgrader"]["solution"] and not answer.metadata["nbgrader"]["locked"]
                name = re.search(r'verdict = check\("[^"]+", (\w+)\)', cell.source).group(1)
                region = answer.source.split(ng.BEGIN + "\n")[1].split("\n" + ng.END)[0]
                assert region == ng.answer_code(REGISTRY[key], name)  # the course's own answer, nothing else
                assert "..." in answer.source.split(ng.BEGIN)[0], "the learner's stub stays above the region"
            elif not meta["solution"]:
                assert meta["locked"], (stem, i)
                assert cell.cell_type != "code" or not re.search(r"\bcheck\(", cell.source), (stem, i)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert 'os.environ["HAAW_SOLUTIONS"] = "off"' in first.source
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code") and "widgets" not in nb.metadata
    assert sorted(seen) == sorted(REGISTRY), "every exercise graded once"


def test_points_follow_the_time_model():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import measure_notebooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert ng.POINTS_PER_ANSWER == measure_notebooks.MINUTES_PER_ANSWER
    assert {ng.points(ex) for ex in REGISTRY.values() if isinstance(ex, CodeExercise)} == {
        ex.minutes for ex in REGISTRY.values() if isinstance(ex, CodeExercise)}
    assert ng.points(REGISTRY["01-dL/dw"]) == 4 and ng.points(REGISTRY["05-attention-backward"]) == 30


@pytest.mark.slow  # a process of its own
def test_an_answer_typed_into_the_call_gets_a_name_and_the_cli_says_what_it_wrote(tmp_path):
    solution, test, key = ng.exercise_cells('check("08-bug-a", ...)', "08")
    assert key == "08-bug-a" and solution.startswith("my_answer = ...\n")
    assert "my_answer = (4, 'per example')" in solution and 'check("08-bug-a", my_answer)' in test
    assert ng.exercise_cells("print(1)", "01") is None
    result = subprocess.run([sys.executable, "-m", "haaw.course.nbgrader_course", str(tmp_path), "--only", "01"],
                            capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert "wrote 1 assignment, 4 graded exercises worth 18 points" in result.stdout
    assert [p.name for p in (tmp_path / "source").iterdir()] == ["01_chain_rule"]


# --- nbgrader's round trip ----------------------------------------------------------------------------------------
# A subset, to stay fast: core 01 (two answers typed as numbers, two code exercises; its run takes 2 s) for three
# learners, in three nbgrader processes (each about 2 s of CPU to start).
ASSIGNMENT = "01_chain_rule"
RIGHT = {key: ng.answer_code(REGISTRY[key], name) for key, name in
         [("01-dL/dw", "my_dL_dw"), ("01-mul-local", "mul_local"), ("01-pow-local", "pow_local"),
          ("01-step", "my_new_w")]}
WRONG = {
    # dL/dy: one link early (a named mistake); and a check of its own, which the test cell does not use
    "01-dL/dw": "my_dL_dw = 12\ncheck = lambda key, answer: type('Verdict', (), {'correct': True})()",
    "01-mul-local": "def mul_local(a, b):\n    return a * b, (a, b)",  # the derivatives swapped
    "01-pow-local": "def pow_local(a, n):\n    return a**n, (a ** (n - 1),)",  # the factor n forgotten
    # 01-step: left as given, not attempted
}
ENGINE = {  # the engine's own version: Value's multiplication and backward compute the answer, not the learner
    "01-mul-local": ("def mul_local(a, b):\n    from haaw import Value\n    x, y = Value(a), Value(b)\n"
                     "    out = x * y\n    out.backward()\n    return out.data, (x.grad, y.grad)"),
}


def _nbgrader(course_dir: Path, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "HAAW_PROGRESS": "off",  # nbgrader runs the `alembic` command by name: the one beside this Python
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course_dir, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _submit(course_dir: Path, learner: str, answers: dict):
    """The released notebook as ``learner`` hands it in: each region's stub replaced by that learner's answer."""
    nb = nbformat.read(course_dir / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade"):
            key = re.search(r'verdict = check\("([^"]+)"', cell.source).group(1)
            answer = nb.cells[i - 1]
            assert ng.STUB in answer.source and ng.BEGIN not in answer.source, "the release hides the answer"
            assert "..." in answer.source.split(ng.STUB)[0], "the learner's stub is there to fill in"
            if key in answers:
                answer.source = answer.source.replace(ng.STUB, answers[key])
    folder = course_dir / "submitted" / learner / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_generates_autogrades_and_gives_feedback(tmp_path):
    try:
        from nbgrader.api import Gradebook
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("nbgrader is not installed: .ci/run should have installed it (requirements-no-torch.txt)")
        pytest.skip("nbgrader is not installed (pip install -r requirements-no-torch.txt)")

    ng.write_course(tmp_path, NOTEBOOKS, only=("01",))
    _nbgrader(tmp_path, "generate_assignment", ASSIGNMENT, "--force")
    released = (tmp_path / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "return a * b, (b, a)" not in released and "= 24" not in released

    _submit(tmp_path, "right", RIGHT)
    _submit(tmp_path, "wrong", WRONG)
    _submit(tmp_path, "engine", {**RIGHT, **ENGINE})
    _nbgrader(tmp_path, "autograde", ASSIGNMENT, "--force")  # every learner in submitted/, one process
    _nbgrader(tmp_path, "generate_feedback", ASSIGNMENT, "--force")

    total = sum(ng.points(REGISTRY[k]) for k in RIGHT)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        def scores(learner):
            return {g.name: g.score for g in gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, learner).grades}

        assert gradebook.find_submission(ASSIGNMENT, "right").max_score == total == 18
        assert scores("right") == {ng.grade_id(k): ng.points(REGISTRY[k]) for k in RIGHT}
        assert scores("wrong") == {ng.grade_id(k): 0 for k in RIGHT}
        assert scores("engine") == {**scores("right"), "01-mul-local": 0}
        assert gradebook.find_submission(ASSIGNMENT, "engine").score == total - ng.points(REGISTRY["01-mul-local"])

    feedback = {who: (tmp_path / "feedback" / who / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
                for who in ("right", "wrong", "engine")}
    assert "Score: 18.0 / 18.0" in feedback["right"].replace("\n", " ") or "18.0 / 18.0" in feedback["right"]
    assert "0.0 / 18.0" in feedback["wrong"]
    assert "one link early" not in feedback["right"] and "Not quite" in feedback["wrong"]  # the checker's words
    assert "not its own work" in feedback["engine"]
