"""binder/ must build the same course as requirements.txt, with a CPU-only torch."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


def test_binder_pins_the_same_versions_as_requirements():
    course, binder = pins("requirements.txt"), pins("binder/requirements.txt")
    assert binder.pop("torch") == course.pop("torch") + "+cpu"
    assert binder == course


def test_binder_takes_torch_from_the_cpu_wheel_index():
    text = (ROOT / "binder/requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()


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


def test_the_no_torch_requirements_are_everything_but_torch():
    assert pins("requirements.txt") == pins("requirements-no-torch.txt") | {"torch": pins("requirements.txt")["torch"]}
    assert "torch" not in pins("requirements-no-torch.txt")
