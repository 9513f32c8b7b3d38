"""scripts/mutate_changed.py: it mutates the package files a change touched, and rewrites decorated functions so
mutmut mutates them without changing what they do."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mutate_changed", ROOT / "scripts" / "mutate_changed.py")
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)

SOURCE = '''\
from contextlib import contextmanager
import functools

calls = []


def refusable(name, what):
    def mark(function):
        @functools.wraps(function)
        def wrapper(*args):
            calls.append(name)
            return function(*args)
        return wrapper
    return mark


@contextmanager
def opened(log):
    log.append("in")
    yield 7
    log.append("out")


@functools.lru_cache
def cached(x):
    return x


class Adam:
    @refusable("optim.step", "the step")
    def step(self, x):
        return 2 * x


@refusable("outer", "first")
@contextmanager
def both(log):
    log.append("both")
    yield
'''


def test_decorated_functions_are_defined_plainly_and_wrapped_after_with_the_same_behaviour():
    rewritten = mc.undecorate(SOURCE)
    assert "@contextmanager" not in rewritten and "@refusable" not in rewritten
    assert "opened = contextmanager(opened)" in rewritten
    assert '    step = refusable("optim.step", "the step")(step)' in rewritten  # in the class body, indented
    assert 'both = refusable("outer", "first")(contextmanager(both))' in rewritten  # outermost decorator outside
    assert "@functools.lru_cache" in rewritten  # a decorator not in the list is left alone, with its function
    space = {}
    exec(compile(rewritten, "rewritten", "exec"), space)
    log = []
    with space["opened"](log) as got:
        assert got == 7 and log == ["in"]
    assert log == ["in", "out"]
    assert space["Adam"]().step(3) == 6 and space["calls"] == ["optim.step"]
    with space["both"](log):
        pass
    assert log[-1] == "both" and space["calls"] == ["optim.step", "outer"]


def test_every_package_file_still_compiles_and_keeps_its_names_after_the_rewrite():
    import ast
    for path in sorted((ROOT / "haaw").rglob("*.py")):
        before, after = path.read_text(), mc.undecorate(path.read_text())
        tree = ast.parse(after)
        names = lambda t: {n.name for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}  # noqa: E731
        assert names(tree) == names(ast.parse(before)), path


def test_only_files_under_mutation_that_differ_from_the_base_are_chosen(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\nonly_mutate = ["haaw/engine/*.py", "haaw/optim.py"]\n')
    for name in ["haaw/engine/ops.py", "haaw/engine/tensor.py", "haaw/optim.py", "haaw/course/x.py", "docs/a.md"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "base")
    assert mc.changed_files("HEAD", tmp_path) == []
    for name in ["haaw/engine/ops.py", "haaw/course/x.py", "docs/a.md"]:  # edited, not committed
        (tmp_path / name).write_text("x = 2\n")
    (tmp_path / "haaw/engine/new.py").write_text("y = 1\n")  # new, untracked
    (tmp_path / "haaw/optim.py").unlink()  # deleted: nothing to mutate
    assert mc.changed_files("HEAD", tmp_path) == ["haaw/engine/new.py", "haaw/engine/ops.py"]
    git("add", ".")
    git("commit", "-qm", "change")
    (tmp_path / "haaw/engine/tensor.py").write_text("x = 3\n")
    assert mc.changed_files("HEAD~1", tmp_path) == ["haaw/engine/new.py", "haaw/engine/ops.py",
                                                     "haaw/engine/tensor.py"]
    assert mc.all_files(tmp_path) == ["haaw/engine/new.py", "haaw/engine/ops.py", "haaw/engine/tensor.py"]


def test_files_named_are_mutated_whatever_changed():
    named = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutate_changed.py"), "--list",
                            "haaw/engine/ops.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert named.strip() == "Mutating: haaw/engine/ops.py"
