"""binder/ must build the same course as requirements-no-torch.txt: the course without PyTorch."""
import json
import re
from pathlib import Path

import pytest

from haaw.course.editions import course_notebooks

ROOT = Path(__file__).resolve().parents[2]


def pins(path):
    """{package: version} from a requirements file (and the files it includes with -r), ignoring
    comments, other options and -e lines."""
    found = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found.update(pins(str(Path(path).parent / line[3:].strip())))
        elif line and not line.startswith("-"):
            name, _, version = line.partition("==")
            assert version, f"{path}: {line!r} is not pinned with =="
            found[name.strip().lower()] = version.strip()
    return found


# What a learner's image runs besides the packages the notebooks and haaw import: JupyterLab, and the Jupyter
# Notebook the base image already has, pinned to the release made for that JupyterLab (notebook 7.6.5's metadata:
# jupyterlab>=4.6.6,<4.7). A new notebook pin needs its requirement here; where notebook is installed, the test
# reads its own metadata instead.
FRONTEND = {"jupyterlab", "notebook"}
NOTEBOOK_WANTS = {"7.6.5": ">=4.6.6,<4.7"}
DISTRIBUTION = {"haaw": None, "torch": None, "IPython": None, "nbformat": None, "cycler": None}  # not pinned here


def imported_packages() -> set:
    """The third-party packages the notebooks and haaw import, by distribution name; None-mapped ones dropped."""
    import ast
    import sys

    sources = [p.read_text() for p in (ROOT / "haaw").rglob("*.py")]
    sources += ["".join(line for line in c["source"] if not line.lstrip().startswith(("%", "!")))
                for p in (ROOT / "notebooks").rglob("*.ipynb")
                for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code"]
    found = set()
    for node in (n for text in sources for n in ast.walk(ast.parse(text))):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.partition(".")[0])
    return {DISTRIBUTION.get(name, name) for name in found - set(sys.stdlib_module_names)} - {None}


def test_the_learner_image_holds_what_learners_run_and_nothing_else():
    """Not the tests' tools (pytest, nbval, hypothesis, micrograd, ...): the packages imported, and the frontend."""
    binder, course = pins("binder/requirements.txt"), pins("requirements-no-torch.txt")
    assert set(binder) == imported_packages() | FRONTEND
    assert {name: binder[name] for name in binder if name in course} == {name: course[name] for name in binder
                                                                         if name in course}, "versions differ"
    assert set(binder) - set(course) <= {"notebook"}
    text = (ROOT / "binder/requirements.txt").read_text()
    assert "torch" not in binder and "--extra-index-url" not in text


def test_the_learner_image_pins_a_notebook_that_accepts_its_jupyterlab():
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    binder = pins("binder/requirements.txt")
    try:  # this machine's notebook, if it is the pinned one, says what it wants itself
        assert metadata.version("notebook") == binder["notebook"]
        wants = next(Requirement(r).specifier for r in metadata.requires("notebook")
                     if Requirement(r).name == "jupyterlab" and not Requirement(r).marker)
    except (metadata.PackageNotFoundError, AssertionError):
        assert binder["notebook"] in NOTEBOOK_WANTS, "record what this notebook release requires of jupyterlab"
        wants = SpecifierSet(NOTEBOOK_WANTS[binder["notebook"]])
    assert binder["jupyterlab"] in wants, f"notebook {binder['notebook']} wants jupyterlab{wants}"


def ignored(path: str, patterns: list) -> bool:
    """Does a .dockerignore with ``patterns`` leave ``path`` out? Docker's rules: a pattern matches the path or a
    folder above it, * and ? stay within a folder, ** crosses folders, !pattern takes back, the last match wins."""
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        glob = pattern.lstrip("!").strip("/")
        regex = "".join(".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
                        for part in re.split(r"(\*\*|\*|\?)", glob))
        parts = path.split("/")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            verdict = not keep
    return verdict


def image_files() -> list:
    """The repository's files that repo2docker copies into the image, and .git's, by .dockerignore."""
    import subprocess

    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [path for path in [*listed, ".git/HEAD"] if not ignored(path, patterns)]


def test_the_learner_image_leaves_the_history_and_the_instructors_material_out():
    files = image_files()
    assert not [f for f in files if f.startswith((".git/", "tests/", "benchmarks/", "scripts/", "docs/results/", ".ci/"))]
    assert "docs/answer-key.md" not in files and "docs/mutation-survivors.md" not in files
    needed = ["pyproject.toml", "README.md", "LICENSE", "LICENSE-CC-BY-4.0.txt", "binder/postBuild", "binder/start",
              "binder/requirements.txt", "binder/jupyter_server_config.json", "haaw/__init__.py",
              "docs/instructor-guide.md", "notebooks/00_setup_check.ipynb"]
    assert [f for f in needed if f not in files] == []
    assert len([f for f in files if f.startswith("haaw/")]) == len([f for f in subprocess_ls("haaw")]), "all of haaw"


def subprocess_ls(folder: str) -> list:
    import subprocess

    return subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_binder_installs_haaw_itself_and_needs_no_system_binary():
    post_build = (ROOT / "binder/postBuild").read_text()
    assert "pip install --no-deps -e ." in post_build
    assert (ROOT / "binder/postBuild").stat().st_mode & 0o111, "postBuild must be executable"
    assert not (ROOT / "binder/apt.txt").exists(), "the course needs no system package (no Graphviz)"
    assert (ROOT / "binder/runtime.txt").read_text().strip() == "python-3.11"


def test_requirements_install_haaw_and_pin_everything():
    lines = (ROOT / "requirements-no-torch.txt").read_text().splitlines()
    assert "-e ." in lines and "-r requirements-no-torch.txt" in (ROOT / "requirements.txt").read_text()
    assert {"numpy", "matplotlib", "ipywidgets", "jupyterlab", "pytest", "nbval", "torch"} <= set(pins("requirements.txt"))


def test_the_no_torch_requirements_are_everything_but_torch_and_the_linter():
    """requirements.txt adds PyTorch, and ruff for whoever works on the course; nothing else differs."""
    full = pins("requirements.txt")
    assert full == pins("requirements-no-torch.txt") | {"torch": full["torch"], "ruff": full["ruff"]}
    assert "torch" not in pins("requirements-no-torch.txt")


def test_every_binder_link_uses_the_repository_set_in_one_place():
    repository = (ROOT / "binder/repository.txt").read_text().strip()
    links = [link for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for link in re.findall(r"https://mybinder\.org/v2/[^)\s]+", path.read_text())]
    assert links, "the README has a Binder link"
    for link in links:
        assert link.startswith(f"https://mybinder.org/v2/{repository}/"), link


def test_the_instructor_guide_covers_every_notebook_with_measured_times():
    guide = (ROOT / "docs/instructor-guide.md").read_text()
    generated = guide.split("<!-- generated by scripts/measure_notebooks.py: start -->")[1].split("<!-- generated: end -->")[0]
    for path in course_notebooks(ROOT / "notebooks"):
        label = path.name[:2] + (", deeper" if path.parent.name == "deeper" else "")
        assert f"| {label} | " in generated, f"no measured row for {path.name}"
        for key in re.findall(r"check\(\s*[\"']([^\"']+)", path.read_text().replace('\\"', '"')):
            assert f"`{key}`" in generated, f"{key} is missing from the guide"
    for plan in ("2-hour session", "Half a day", "One day", "Two days", "If Binder is down", "HAAW_SOLUTIONS=off",
                 "00_setup_check.ipynb"):
        assert plan in guide


def test_a_binder_session_runs_the_student_edition_with_solutions_off(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("nbformat")  # the student edition is written with it
    pytest.importorskip("jupyter_server")  # the culling settings are read by JupyterLab's server
    pytest.importorskip("jupyterlab")  # and the news setting by JupyterLab
    start = ROOT / "binder/start"
    assert start.stat().st_mode & 0o111, "binder/start must be executable"
    shown = subprocess.run([str(start), sys.executable, "-c", "import os; print(os.environ['HAAW_SOLUTIONS'])"],
                           capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "off"
    # postBuild in a copy of the repository, with pip stubbed out (haaw is installed already here)
    repo, home, bin_dir = tmp_path / "repo", tmp_path / "home", tmp_path / "bin"
    for name in image_files():  # what repo2docker copies in, .dockerignore applied
        if not name.startswith(".git/"):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    bin_dir.mkdir()
    (bin_dir / "pip").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "pip").chmod(0o755)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # not a symlink: a venv's
    (bin_dir / "python").chmod(0o755)  # python finds its packages from the path it was started by
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(repo / "binder/postBuild")], cwd=repo, env=env, check=True, capture_output=True)
    notebooks = course_notebooks(repo / "notebooks")
    assert len(notebooks) == len(course_notebooks(ROOT / "notebooks"))
    for path in notebooks:
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert 'os.environ["HAAW_SOLUTIONS"] = "off"' in "".join(cells[0]["source"]), path.name
        for cell in cells:
            if re.search(r"\bcheck\(\s*[\"']", "".join(cell["source"])):  # an exercise's check
                assert cell["outputs"] == [], f"{path.name}: an exercise's stored output is left"
    assert not (repo / "docs/answer-key.md").exists() and (repo / "docs/instructor-guide.md").exists()
    config = json.loads((home / ".jupyter/jupyter_server_config.json").read_text())
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
    from traitlets.config import Config

    manager = AsyncMappingKernelManager(config=Config(config))
    # a kernel is culled only when idle for an hour or more, with no tab connected: a class that listens to a talk
    # keeps its kernels
    assert manager.cull_idle_timeout >= 3600 and not manager.cull_connected and not manager.cull_busy
    assert 0 < manager.cull_interval <= manager.cull_idle_timeout
    from jupyterlab.labapp import LabApp

    lab = LabApp(config=Config(config))
    assert lab.news_url is None, "JupyterLab would ask about Jupyter news"
    assert lab.check_for_updates_class.__name__ == "NeverCheckForUpdate", "JupyterLab would look for updates"


def test_the_licences_are_in_place_and_named_in_the_package():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT AND CC-BY-4.0"
    for name in project["license-files"]:
        assert (ROOT / name).is_file(), name
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Creative Commons Attribution 4.0 International Public License" in (ROOT / "LICENSE-CC-BY-4.0.txt").read_text()
    citation = (ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and f'version: "{project["version"]}"' in citation


def test_the_holder_is_named_and_the_repository_is_the_one_binder_uses():
    """The repository is one setting (binder/repository.txt), as for the Binder links: the citation and the
    package say the same. The holder the licence names is the citation's author; the guide shows how a fork
    attributes the course."""
    import tomllib

    host, _, repository = (ROOT / "binder/repository.txt").read_text().strip().partition("/")
    assert host == "gh", "binder/repository.txt names a GitHub repository: gh/owner/name"
    url = f"https://github.com/{repository}"
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.findall(r'^(?:repository-code|url): "([^"]+)"$', citation, re.M) == [url, url]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"] == url
    holder = re.search(r'^authors:\n  - name: "([^"]+)"', citation, re.M).group(1)
    assert "authors" not in holder.lower(), f"the holder is a name, not {holder!r}"
    copyright_line = next(line for line in (ROOT / "LICENSE").read_text().splitlines() if line.startswith("Copyright"))
    assert re.fullmatch(rf"Copyright \(c\) 20\d\d {re.escape(holder)}\b.*", copyright_line), copyright_line
    assert f"© 2026\n{holder}" in (ROOT / "README.md").read_text() or f"© 2026 {holder}" in (ROOT / "README.md").read_text()
    guide = (ROOT / "docs/instructor-guide.md").read_text()
    fork = guide.split("## Teaching from a fork", 1)[1].split("\n## ", 1)[0]
    for needed in ("binder/repository.txt", "CITATION.cff", "LICENSE", "CC BY 4.0", "MIT", holder, url):
        assert needed in fork, f"the guide's fork section does not say {needed!r}"


def test_the_answer_key_is_complete():
    from haaw.course.answer_key import render
    from haaw.course.exercises import REGISTRY

    key = render()  # that the committed key is this text: tests/repo/test_derived.py
    for name, ex in REGISTRY.items():
        assert f"### `{name}`" in key
        if hasattr(ex, "reference"):
            assert ex.solution.strip().splitlines()[0] in key, name  # the code solution() shows, first line
    assert "an array, an array" not in (ROOT / "docs/instructor-guide.md").read_text()
