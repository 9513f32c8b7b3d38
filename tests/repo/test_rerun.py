"""A learner runs cells again. Every notebook's cells are run once more after nbval has run the whole notebook,
last first, in nbval's own kernel: that is tests/plugins/haaw_notebooks.py (one test per notebook, "every cell
again, last first"), tested here on a planted notebook. Below, the same hazard read from the code, without a
kernel."""
import ast
from pathlib import Path

import pytest

from haaw.course.editions import course_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = course_notebooks(ROOT / "notebooks")
pytest_plugins = ["pytester"]


def test_a_cell_that_fails_when_run_again_after_the_notebook_is_named(pytester):
    """A later cell rebinds X from a list to an array: the whole notebook passes under nbval, and running the
    cells again, last first, fails at cell 1 (the second code cell), named with its source."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbval")
    out = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in ("1\n", "3.0\n")]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import numpy as np\nX = [1.0, 2.0]", execution_count=1),
        nbformat.v4.new_code_cell("print(X.count(1.0))", execution_count=2, outputs=[out[0]]),
        nbformat.v4.new_markdown_cell("Later, X becomes an array."),
        nbformat.v4.new_code_cell("X = np.array(X)\nprint(X.sum())", execution_count=3, outputs=[out[1]]),
    ])
    nbformat.write(nb, pytester.path / "99_rebinds.ipynb")
    result = pytester.runpytest_inprocess("--nbval", "-p", "haaw_notebooks", "-p", "no:cacheprovider",
                                          "-p", "no:randomly", "99_rebinds.ipynb")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*every cell again, last first*",
                                 "*99_rebinds.ipynb, cell 1 (*), run again after the whole notebook*",
                                 "*'numpy.ndarray' object has no attribute 'count'*"])


# --- the same hazard read from the code, without a kernel ------------------------------------------------------
# A name bound by two cells (not by an import of the same module) and read from outside by a third cell after the
# first binding: run the whole notebook, then that third cell again, or the first binder then the reader, and
# the reader meets a value it was not written for. Reading order within a cell is by position: `x = x + 1` reads x
# from outside, `x = 1; print(x)` does not.
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def names_of(source: str):
    """(names the cell binds, names it binds only by import, names it reads that it has not bound first)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    tree = ast.parse("\n".join(lines))
    bound, imported, reads = {}, set(), []
    later = (float("inf"), 0)  # a function's body runs when it is called, after its cell

    def walk(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):  # a scope of its own: only what it reads from outside counts
                defined = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                if defined and top:
                    bound.setdefault(child.name, (child.lineno, child.col_offset))
                own = {a.arg for a in ast.walk(child) if isinstance(a, ast.arg)}
                own |= {n.id for n in ast.walk(child) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                reads.extend((n.id, later if defined else (n.lineno, n.col_offset)) for n in ast.walk(child)
                             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)) and top:
                for alias in child.names:
                    name = (alias.asname or alias.name).split(".")[0]
                    bound.setdefault(name, (child.lineno, child.col_offset))
                    imported.add(name)
            elif isinstance(child, ast.Name):
                where = (child.lineno, child.col_offset)
                if isinstance(child.ctx, ast.Store):
                    if top:
                        bound.setdefault(child.id, where)
                else:
                    reads.append((child.id, where))
            walk(child, top)

    walk(tree, True)
    outside = {name for name, where in reads if name not in bound or where <= bound[name]}
    return set(bound), imported, outside


def rebound_names(path: Path) -> list[str]:
    nbformat = pytest.importorskip("nbformat")
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    found = [names_of(c.source) for c in cells]
    problems = []
    for name in sorted(set().union(*(b for b, _, _ in found)) - {"_"}):
        binders = [k for k, (b, imported, _) in enumerate(found) if name in b and name not in imported]
        readers = [k for k, (_, _, outside) in enumerate(found)
                   if name in outside and k not in binders and binders and k > binders[0]]
        if len(binders) > 1 and readers:
            problems.append(f"{name!r} is bound by code cells {binders} and read by code cells {readers}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_rebinds_a_name_another_cell_reads(path):
    assert rebound_names(path) == []


def test_the_rebinding_check_names_the_name_and_the_cells(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import numpy as np\nfrom numpy import pi\nX = [1.0, 2.0]"),
        nbformat.v4.new_code_cell("print(X.count(1.0))\nfig = 1\nprint(fig)"),
        nbformat.v4.new_code_cell("import numpy as np\nfig = 2\nprint(fig, pi)\nX = np.array(X)"),
        nbformat.v4.new_code_cell("def total():\n    return Y.sum()\nY = np.zeros(2)"),
        nbformat.v4.new_code_cell("Y = 3\nY = Y + 1\nprint([k for k in range(Y)], (lambda X: X)(1))"),
    ])
    path = tmp_path / "99_rebinds.ipynb"
    nbformat.write(nb, path)
    assert rebound_names(path) == ["'X' is bound by code cells [0, 2] and read by code cells [1]"]
