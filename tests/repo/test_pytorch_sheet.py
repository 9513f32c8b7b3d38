"""docs/pytorch.md, the haaw ↔ PyTorch sheet, run row by row.

Every table in the sheet has the columns haaw | PyTorch | Difference | Test. The code spans of a
cell are its lines, run in order in a fresh namespace that holds the same named inputs on both
sides (``x``, ``w``, ``t``... made from the same NumPy arrays); the value of the last line, an
expression, is the row's result. The Test column says what is compared:

- ``value``: the two results (numbers, shapes and dtypes);
- ``grad``: the same, then backward from the result (1 for a scalar, otherwise one shared random
  upstream gradient), then the gradient of every leaf tensor of the namespace;
- ``concept``: nothing is run; the row is counted, and its names count for the coverage check.

Without torch the haaw side of every row still runs; only the comparison is skipped
(``HAAW_NO_TORCH=1`` pretends torch is absent, as elsewhere in the course).
"""
from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import haaw
import haaw.amp
import haaw.nn.functional
import haaw.nn.utils
import haaw.optim
import haaw.tools
import haaw.tools.flops
import haaw.tools.memory

SHEET = Path(__file__).resolve().parents[2] / "docs" / "pytorch.md"
HEADER = ["haaw", "PyTorch", "Difference", "Test"]
KINDS = ("value", "grad", "concept")


# --- reading the sheet ----------------------------------------------------------------------------
@dataclass
class Row:
    line: int
    section: str
    haaw: str  # the code of the haaw cell, one line per code span
    torch: str
    kind: str

    @property
    def id(self) -> str:
        first = self.haaw.splitlines()[0] if self.haaw else ""
        return f"L{self.line}:{first[:48]}"


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _code(cell: str) -> str:
    return "\n".join(span.strip() for span in re.findall(r"`([^`]+)`", cell))


def parse(text: str) -> list[Row]:
    rows, section, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-{3,}", lines[i + 1]):
            header = _cells(line)
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                if header == HEADER:
                    cells = _cells(lines[i])
                    assert len(cells) == 4, f"line {i + 1}: expected 4 cells, got {len(cells)}"
                    kind = cells[3].strip("` ")
                    assert kind in KINDS, f"line {i + 1}: the Test column says {kind!r}, not one of {KINDS}"
                    rows.append(Row(i + 1, section, _code(cells[0]), _code(cells[1]), kind))
                i += 1
            continue
        i += 1
    return rows


TEXT = SHEET.read_text(encoding="utf-8")
ROWS = parse(TEXT)
RUN = [r for r in ROWS if r.kind != "concept"]


# --- the named inputs, the same numbers on both sides ---------------------------------------------
_rng = np.random.default_rng(2024)
ARRAYS = {
    "a": _rng.standard_normal((4, 3)),
    "x": _rng.standard_normal((4, 3)),
    "y": _rng.standard_normal((4, 3)),
    "p": _rng.uniform(0.5, 2.0, (4, 3)),
    "w": _rng.standard_normal((3, 2)),
    "b": _rng.standard_normal(2),
    "c": _rng.standard_normal(3),
    "z": _rng.standard_normal((2, 3, 4)),
    "q": _rng.standard_normal((2, 5, 4)),
    "k": _rng.standard_normal((2, 5, 4)),
    "v": _rng.standard_normal((2, 5, 4)),
    "t": np.array([0, 2, 1, 2]),
    "t2": np.array([[0, 1, 2, 1], [2, 2, 0, 1]]),
    "cw": np.array([1.0, 2.0, 0.5]),
    "mask": np.array([1.0, 1.0, 0.0, 1.0]),
}
NUMPY_ONLY = {"a"}  # a plain NumPy array on both sides
NEEDS_GRAD = {"x", "y", "p", "w", "b", "c", "z", "q", "k", "v"}


def haaw_namespace() -> dict:
    ns = {"np": np, "haaw": haaw, "nn": haaw.nn, "F": haaw.nn.functional, "optim": haaw.optim, "amp": haaw.amp}
    for name, array in ARRAYS.items():
        ns[name] = array.copy() if name in NUMPY_ONLY else haaw.tensor(array, requires_grad=name in NEEDS_GRAD)
    return ns


def torch_namespace(torch) -> dict:
    import torch.utils.checkpoint
    import torch.utils.flop_counter

    ns = {"np": np, "torch": torch, "nn": torch.nn, "F": torch.nn.functional, "optim": torch.optim,
          "amp": torch.amp}
    for name, array in ARRAYS.items():
        ns[name] = array.copy() if name in NUMPY_ONLY else torch.tensor(array, requires_grad=name in NEEDS_GRAD)
    return ns


RESULT = "_sheet_result_"


def run(code: str, ns: dict):
    """Run the lines of a cell in ``ns``; return the value of the last one, an expression."""
    tree = ast.parse(code)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr), f"the last line of {code!r} should be an expression: the row's result"
    tree.body[-1] = ast.copy_location(ast.Assign([ast.Name(RESULT, ast.Store())], last.value), last)
    ast.fix_missing_locations(tree)
    ns.pop(RESULT, None)
    exec(compile(tree, "<docs/pytorch.md>", "exec"), ns)
    return ns.get(RESULT)


# --- backward and the leaves' gradients -------------------------------------------------------------
def upstream(shape) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape)


def haaw_backward(out, ns) -> dict:
    assert isinstance(out, haaw.Tensor) and out.requires_grad, "a grad row must end in a tensor that requires grad"
    if out.data.size == 1:
        out.backward()
    else:
        out.backward(upstream(out.shape).astype(out.dtype))
    return {name: t.grad for name, t in ns.items()
            if isinstance(t, haaw.Tensor) and t.requires_grad and not t._parents}


def torch_backward(out, ns, torch) -> dict:
    assert isinstance(out, torch.Tensor) and out.requires_grad, "a grad row must end in a tensor that requires grad"
    if out.numel() == 1:
        out.backward()
    else:
        out.backward(torch.from_numpy(upstream(tuple(out.shape))).to(out.dtype))
    return {name: t.grad for name, t in ns.items()
            if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf}


# --- comparing what the two sides returned ----------------------------------------------------------
@dataclass
class Plain:
    """A result as an array, with the name of its dtype; ``strict`` unless it was a Python number."""
    array: np.ndarray
    dtype: str
    strict: bool


def plain(obj, torch=None):
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, haaw.Tensor):
        return Plain(obj.data, obj.dtype.name, True)
    if isinstance(obj, haaw.Value):
        return Plain(np.asarray(obj.data), "float64", False)
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        name = str(t.dtype).removeprefix("torch.")
        array = t.double().numpy() if t.is_floating_point() and t.element_size() < 4 else t.numpy()
        return Plain(array, name, True)
    if torch is not None and isinstance(obj, torch.dtype):
        return ("dtype", str(obj).removeprefix("torch."))
    if isinstance(obj, np.dtype):
        return ("dtype", obj.name)
    if isinstance(obj, (np.ndarray, np.generic)):
        return Plain(np.asarray(obj), obj.dtype.name, True)
    if isinstance(obj, (bool, int, float)):
        return Plain(np.asarray(obj), np.asarray(obj).dtype.name, False)
    if isinstance(obj, (list, tuple)):
        return [plain(o, torch) for o in obj]
    raise TypeError(f"the sheet's test cannot compare a {type(obj).__name__}: end the row in a number, "
                    f"an array, a tensor, a dtype or a list of them")


def _tolerance(ours: Plain, theirs: Plain):
    sizes = [np.dtype(p.array.dtype).itemsize if p.array.dtype.kind == "f" else 8 for p in (ours, theirs)]
    if any(p.dtype in ("bfloat16", "float16") or p.dtype.startswith("float8") for p in (ours, theirs)):
        return 1e-2, 1e-3
    return (1e-10, 1e-12) if min(sizes) >= 8 else (1e-5, 1e-7)


def assert_same(ours, theirs, what: str) -> None:
    if isinstance(ours, list) or isinstance(theirs, list):
        assert isinstance(ours, list) and isinstance(theirs, list), f"{what}: {ours!r} against {theirs!r}"
        assert len(ours) == len(theirs), f"{what}: {len(ours)} items against {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{what}[{i}]")
        return
    if not isinstance(ours, Plain) or not isinstance(theirs, Plain):
        assert ours == theirs, f"{what}: haaw gives {ours!r}, PyTorch {theirs!r}"
        return
    assert ours.array.shape == theirs.array.shape, \
        f"{what}: shape {ours.array.shape} in haaw, {theirs.array.shape} in PyTorch"
    if ours.strict and theirs.strict:
        assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} in haaw, {theirs.dtype} in PyTorch"
    a, b = ours.array, theirs.array
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        assert np.array_equal(a, b), f"{what}: haaw {a}, PyTorch {b}"
        return
    rtol, atol = _tolerance(ours, theirs)
    a, b = a.astype(np.float64), b.astype(np.float64)
    assert np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True), \
        f"{what}: max difference {np.max(np.abs(a - b), initial=0.0):.3g}\nhaaw:    {a}\nPyTorch: {b}"


# --- the tests --------------------------------------------------------------------------------------
def test_the_sheet_has_rows_of_every_kind_and_states_their_numbers():
    assert len(ROWS) > 100 and len(RUN) > 80
    concepts = [r for r in ROWS if r.kind == "concept"]
    for r in ROWS:
        assert r.haaw, f"line {r.line}: the haaw cell names nothing in backticks"
        if r.kind != "concept":
            assert r.torch, f"line {r.line}: a {r.kind} row needs PyTorch code too"
    stated = re.search(r"Of its (\d+) rows, (\d+) are run on both sides .*? and (\d+) are concepts", TEXT, re.S)
    assert stated, "the sheet should say how many of its rows are run and how many are concepts"
    assert tuple(map(int, stated.groups())) == (len(ROWS), len(RUN), len(concepts)), \
        f"update the sheet: it has {len(ROWS)} rows, {len(RUN)} run and {len(concepts)} concepts"


def _defined_here(module) -> list[str]:
    """The public names of a module: its __all__, or else what its own source defines at the top
    level (functions, classes, constants), not what it imports."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for node in ast.parse(Path(module.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def public_names() -> dict[str, list[str]]:
    import haaw.amp as amp
    import haaw.optim as optim

    names = {m.__name__: _defined_here(m) for m in
             (haaw, haaw.nn, haaw.nn.functional, haaw.optim, haaw.nn.utils, haaw.amp, haaw.tools)}
    names["haaw.tools (counters)"] = ["count_flops", "track_memory"]
    for cls in (haaw.Tensor, haaw.Value, haaw.nn.Module, optim.Optimizer, optim.SGD, optim.Adam,
                amp.StaticLossScaler, amp.DynamicLossScaler, amp.MasterWeights):
        names[cls.__name__] = [n for n in dir(cls) if not n.startswith("_")]
    return names


def test_every_public_name_of_haaw_has_a_row():
    code = "\n".join(r.haaw for r in ROWS)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    attributes = set(re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)", code))  # x.name: a method or attribute used
    missing = {owner: [n for n in names if n not in (words if owner.startswith("haaw") else attributes)]
               for owner, names in public_names().items()}
    missing = {owner: names for owner, names in missing.items() if names}
    assert not missing, f"names without a row in docs/pytorch.md (add one to its haaw column): {missing}"


def test_the_deliberate_differences_are_explained():
    section = TEXT.split("## Where haaw differs on purpose", 1)
    assert len(section) == 2, "the sheet needs its section 'Where haaw differs on purpose'"
    for topic in ["(in_features, out_features)", "x @ W.T", "NumPy array", "retain_graph=True", "retain_grad()",
                  "float64", "tanh", "at least 2-D", "in place", "mask=", "return_weights=",
                  "freeze()", "zero_grad()", "Value", "MLP", "causal_mask", "GradScaler", "nn.Parameter", "seed="]:
        assert topic in section[1], f"'Where haaw differs on purpose' does not mention {topic}"


@pytest.mark.parametrize("row", RUN, ids=[r.id for r in RUN])
def test_row(row: Row):
    ours_ns = haaw_namespace()
    ours = run(row.haaw, ours_ns)
    ours_grads = haaw_backward(ours, ours_ns) if row.kind == "grad" else {}
    if row.kind == "grad":
        assert any(g is not None for g in ours_grads.values()), f"line {row.line}: no input received a gradient"

    if os.environ.get("HAAW_NO_TORCH"):
        pytest.skip("HAAW_NO_TORCH is set: the haaw side ran, the PyTorch side is skipped")
    torch = pytest.importorskip("torch")
    theirs_ns = torch_namespace(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations and notices of PyTorch's own
        theirs = run(row.torch, theirs_ns)
        theirs_grads = torch_backward(theirs, theirs_ns, torch) if row.kind == "grad" else {}

    where = f"line {row.line} ({row.section})"
    assert_same(plain(ours, torch), plain(theirs, torch), f"{where}, result")
    for name in sorted(set(ours_grads) | set(theirs_grads)):
        assert name in ours_grads and name in theirs_grads, \
            f"{where}: '{name}' is a leaf that requires grad on one side only"
        assert_same(plain(ours_grads[name], torch), plain(theirs_grads[name], torch), f"{where}, {name}.grad")
