"""The package's shape: the engine in one folder that imports nothing else of haaw, PyTorch's module
names reachable from ``import haaw``, and nothing heavy loaded by it."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import haaw

PACKAGE = Path(haaw.__file__).parent


def test_haaw_holds_the_parts_and_nothing_else():
    parts = sorted(p.name for p in PACKAGE.iterdir() if not p.name.startswith((".", "__pycache__")))
    assert parts == ["__init__.py", "amp.py", "course", "engine", "nn", "optim.py", "tools"]


def haaw_imports(path: Path) -> set[str]:
    """The haaw modules that the file at ``path`` imports, as absolute dotted names."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.startswith("haaw")}


def test_the_engine_imports_no_instrument_and_no_course_prop():
    for path in (PACKAGE / "engine").glob("*.py"):
        outside = {m for m in haaw_imports(path) if not m.startswith("haaw.engine")}
        assert not outside, f"{path.name} imports {outside}"


def test_the_engine_imports_no_instrument_when_it_runs_either():
    code = ("import sys, numpy as np, haaw.engine as e; "
            "t = e.Tensor(np.ones(2), requires_grad=True); (t * t).sum().backward(); "
            "print(sorted(m for m in sys.modules if m.startswith(('haaw.tools', 'haaw.course'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_haaw_reaches_pytorch_s_module_names_and_loads_numpy_only():
    code = ("import sys, haaw; import haaw.course.exercises, haaw.tools; "
            "assert haaw.nn.functional.cross_entropy and haaw.nn.utils.clip_grad_norm_; "
            "assert haaw.optim.Adam and haaw.amp.DynamicLossScaler and haaw.nn.Linear; "
            "print([m for m in ('torch', 'matplotlib', 'ipywidgets') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_two_modules_of_haaw_import_each_other_in_a_circle():
    """Imports inside functions count too: one that only hides a circle from Python's import order still
    makes the two modules one tangle to read. The edges are module to module (a package's __init__ is left
    out as a target: every module of a package goes through it)."""
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p for p in PACKAGE.rglob("*.py")
               if p.name != "__init__.py"}
    graph = {name: {m for m in haaw_imports(path) if m in modules and m != name} for name, path in modules.items()}
    circles = []
    for start in graph:  # a path from start back to start, found by walking outwards
        seen, frontier = set(), [(start, (start,))]
        while frontier:
            node, path = frontier.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join(path + (start,)))
                elif nxt not in seen:
                    seen.add(nxt)
                    frontier.append((nxt, path + (nxt,)))
    assert not circles, "\n".join(sorted(circles))


def test_instruments_and_the_course_read_a_node_through_the_engine_s_accessors_only():
    """graph.parents, local, operation, context, is_node, tensor.changed_in_place and ``node.zero_grad()``: the
    engine may rename what it keeps without breaking the tools. Notebook 02's exercises are the exception: the
    course teaches ``node._parents`` and ``node._local`` by name, for the learner to write backward with."""
    private = re.compile(r"\.(_parents|_local|_ctx|_op|_vc|_reset_grad|_add_grad|_vjp)\b"
                         r"|hasattr\([^)]*\"_parents\"")
    found = []
    for path in [*(PACKAGE / "tools").rglob("*.py"), *(PACKAGE / "course").rglob("*.py"), *(PACKAGE / "nn").rglob("*.py"),
                 PACKAGE / "optim.py", PACKAGE / "amp.py"]:
        if path.name == "nb02.py" and path.parent.name == "exercises":  # the learner's backward and its variants
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if private.search(line) and "self._" not in line:
                found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_no_instrument_depends_on_the_course():
    """The tools observe the engine and nn; a course model's mirror (TinyGPT's) lives with the course, and no tool
    reaches into a course model's parts."""
    for path in (PACKAGE / "tools").glob("*.py"):
        assert not {m for m in haaw_imports(path) if m.startswith("haaw.course")}, path.name
        assert "model.blocks" not in path.read_text() and "model.token" not in path.read_text(), path.name


def _haaw_module_names() -> set[str]:
    """Every module and package of haaw, as dotted names."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(path: Path, modules: set[str]) -> list[str]:
    """Where the module at ``path`` takes a private name (a leading underscore, not a dunder) from another haaw
    module: ``from haaw.x import _name``, or ``x._name`` where ``x`` is a haaw module it imported."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = ".".join(parts[:-1])  # what a relative import is relative to (for __init__, the package itself)
    tree = ast.parse(path.read_text())
    found, aliases = [], {}  # aliases: a name bound in this module -> the haaw module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            if module not in modules:
                continue
            for alias in node.names:
                if f"{module}.{alias.name}" in modules:  # a module itself: `from . import code`
                    aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
                elif _is_private(alias.name):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:  # `import haaw.x.y` binds haaw, `import haaw.x.y as z` binds z
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or "haaw"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in aliases:
            module = ".".join([aliases[value.id], *chain])
            if module in modules:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_of_haaw_takes_another_s_private_names():
    """A name with a leading underscore is its module's own business: another module that needs it asks for a
    public name (``memory.arrays``, ``graph.local``, ``node.zero_grad()``), so the owner may change it freely."""
    modules = _haaw_module_names()
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in private_reaches(path, modules)]
    assert not found, "\n".join(found)
