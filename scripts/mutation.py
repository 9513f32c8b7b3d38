#!/usr/bin/env python
"""Mutation testing for haaw's engine: small deliberate bugs, and whether the tests notice them.

Each *mutant* is the package with one small change (``a + b`` becomes ``a - b``, ``<`` becomes
``<=``, a constant moves, a ``return`` returns None...). The tests are run against it: if at least
one fails (or the run hangs), the mutant is *killed*; if they all pass, it *survived*, and either a
test is missing or the change cannot alter behaviour (an *equivalent* mutant).

How to run it (from the repository root; only the standard library and pytest are needed):

    python scripts/mutation.py                       # every mutant of haaw/engine, haaw/nn, haaw/optim.py
    python scripts/mutation.py --list                # only list the mutants (file:line, before → after)
    python scripts/mutation.py --max 20              # a quick run: the first 20 mutants
    python scripts/mutation.py --files haaw/optim.py --lines 30-50
    python scripts/mutation.py --rerun mutation-report.txt   # only the survivors of an earlier run
    python scripts/mutation.py --report mutation-report.txt  # where the summary goes (this is the default)

How long it takes: a full run (about 1,000 mutants) takes about 45 minutes on the 2-core machine this
was written on, with nothing else running (see the last lines of the report for the figures of a run).

How it works:

- The repository's working tree (tracked and untracked files that git does not ignore, so uncommitted
  tests count) is copied to a temporary directory. Mutants are written into that copy only, and the
  copy is deleted at the end (``--keep`` keeps it): the files of the repository are never changed.
- The tests run in a fresh ``python -m pytest -x -q -p no:cacheprovider`` per mutant, with the copy
  first on PYTHONPATH (checked before starting), bytecode writing off (a stale .pyc could otherwise
  hide a mutant of the same size and time stamp), and the Hypothesis database of the copy emptied
  before each run, so that no run replays failures found in another mutant. Hypothesis settings stay
  as the tests define them; only its seed is fixed (``--hypothesis-seed``, default 0) so that two
  runs give the same report.
- Before the mutants, the unchanged copy is tested twice: once to time every test and check that it
  passes, once with a line tracer that records which lines of the target files each test runs.
- A mutant is first tested against the tests that run the mutated statement, fastest first (a test
  that never runs the changed code cannot see it). Every mutant that survives them, and every mutant
  outside a function (module-level code runs at import, for every test), is then run against the
  whole selection before it is counted as a survivor.
- A run longer than a few times its unchanged duration is stopped (its whole process group): the
  mutant counts as killed by timeout.

The mutations: ``+ ↔ -``, ``* ↔ /``, ``** → *``; ``< ↔ <=``, ``> ↔ >=``, ``== ↔ !=``, ``is ↔ is not``,
``in ↔ not in``; ``and ↔ or``; ``not x → x``; numbers (``0 → 1``, ``1 → 0``, ``n → n + 1``,
``0.5 → 0.25``, ``1.0 → 0.0``, ``x → x + 1``); ``True ↔ False``; ``x += y → x = y``, ``+= ↔ -=``,
``*= ↔ /=``; ``-x → x``; ``-1 ↔ -2`` (so ``[-1] ↔ [-2]``; ``[0] ↔ [1]`` come from the numbers);
``return expr → return None``. Docstrings, strings, f-strings, the arguments of ``raise`` (error
messages), ``assert`` messages, type annotations and ``if __name__ == "__main__":`` blocks are left alone.

This file is also the pytest plugin that times and traces the tests (loaded into the child pytest
with ``-p``); those hooks do nothing unless the runner asks for them through the environment.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = ["haaw/engine", "haaw/nn", "haaw/optim.py", "haaw/amp.py"]
# Every test file that runs the engine: its own tests, and those of the layers, optimizers, tools, course
# props, claims and the PyTorch sheet. Left out: the notebooks (run by nbval), the browser, the benchmarks,
# and the files that only read notebooks' text, the memory check of notebook runs, binder's pins, or the CPU
# profiles' notebook runs.
DEFAULT_TESTS = ["tests"]
DEFAULT_IGNORE = ["tests/test_notebooks.py", "tests/browser/test_in_jupyterlab.py", "tests/test_benchmarks.py",
                  "tests/test_notebook_text.py", "tests/test_memory_budget.py", "tests/test_binder.py",
                  "tests/test_cpu_profiles.py"]
PYTEST_FLAGS = ["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-p", "no:nbval", "-p", "no:benchmark",
                "-m", "not browser", "-rfE", "--no-header"]
PLUGIN = "mutation_plugin"
ENV_OUT, ENV_TRACE = "HAAW_MUTATION_OUT", "HAAW_MUTATION_TRACE"


# ==================================================================================================
# The mutants
# ==================================================================================================
@dataclass
class Mutant:
    path: str  # relative to the repository, with forward slashes
    line: int
    col: int
    rule: str
    before: str  # one line each, for the report
    after: str
    source: str  # the whole mutated file
    scope: tuple | None  # lines (first, last) whose tests may see it; None: module level, every test may
    status: str = ""  # killed, timeout, survived, error
    detail: str = ""
    seconds: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.col}:{self.rule}"

    @property
    def change(self) -> str:
        return f"{self.before}  →  {self.after}"


BINOPS = {ast.Add: [("+", "-", "add-sub")], ast.Sub: [("-", "+", "sub-add")],
          ast.Mult: [("*", "/", "mul-div")], ast.Div: [("/", "*", "div-mul")], ast.Pow: [("**", "*", "pow-mul")]}
COMPARES = {ast.Lt: ("<", "<=", "lt-le"), ast.LtE: ("<=", "<", "le-lt"), ast.Gt: (">", ">=", "gt-ge"),
            ast.GtE: (">=", ">", "ge-gt"), ast.Eq: ("==", "!=", "eq-ne"), ast.NotEq: ("!=", "==", "ne-eq"),
            ast.Is: ("is", "is not", "is-isnot"), ast.IsNot: ("is not", "is", "isnot-is"),
            ast.In: ("in", "not in", "in-notin"), ast.NotIn: ("not in", "in", "notin-in")}
AUGOPS = {ast.Add: [("+=", "=", "aug-assign"), ("+=", "-=", "aug-add-sub")],
          ast.Sub: [("-=", "=", "aug-assign"), ("-=", "+=", "aug-sub-add")],
          ast.Mult: [("*=", "=", "aug-assign"), ("*=", "/=", "aug-mul-div")],
          ast.Div: [("/=", "=", "aug-assign"), ("/=", "*=", "aug-div-mul")]}
OPERATOR_PATTERN = {"<": r"<(?!=)", ">": r">(?!=)", "*": r"(?<!\*)\*(?![*=])", "/": r"(?<!/)/(?![/=])",
                    "**": r"\*\*", "+": r"\+(?!=)", "-": r"-(?!=)", "is": r"\bis\b(?!\s+not\b)",
                    "is not": r"\bis\s+not\b", "in": r"(?<!not )\bin\b", "not in": r"\bnot\s+in\b"}


class Source:
    """A file's text, with AST positions (UTF-8 byte columns) turned into offsets in the text."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def span(self, node) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def find(self, start: int, end: int, operator: str) -> tuple[int, int] | None:
        """Where ``operator`` is written between two operands: only spaces, brackets, line breaks and
        comments can be there besides it."""
        gap = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), self.text[start:end])
        pattern = OPERATOR_PATTERN.get(operator, re.escape(operator))
        hits = [m for m in re.finditer(pattern, gap)]
        if len(hits) != 1:
            return None
        return start + hits[0].start(), start + hits[0].end()


def _number(value) -> str:
    return repr(value)


def _constant_change(value):
    """The new value of a number, or None to leave it alone."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 1 if value == 0 else 0 if value == 1 else value + 1
    if isinstance(value, float):
        return {0.0: 1.0, 1.0: 0.0, 0.5: 0.25}.get(value, value + 1.0)
    return None


class Finder:
    """Walks a module's AST and collects (offsets, replacement, rule, scope) for every mutation."""

    def __init__(self, source: Source, tree: ast.Module):
        self.src, self.tree = source, tree
        self.edits: list[tuple[int, int, str, str, int, int, tuple | None]] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.skipped: set[int] = set()
        self._mark_skipped(tree)

    # --- what is never mutated --------------------------------------------------------------
    def _skip(self, node):
        if node is not None:
            for n in ast.walk(node):
                self.skipped.add(id(n))

    def _mark_skipped(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):  # f-strings: messages and labels
                self._skip(node)
            elif isinstance(node, ast.Raise):  # the exception and its message
                self._skip(node.exc)
                self._skip(node.cause)
            elif isinstance(node, ast.Assert):
                self._skip(node.msg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._skip(node.returns)
                args = node.args
                for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if a is not None:
                        self._skip(a.annotation)
            elif isinstance(node, ast.AnnAssign):
                self._skip(node.annotation)
            elif isinstance(node, ast.If) and _is_main_guard(node.test):
                self._skip(node)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # docstrings
                self._skip(node)

    # --- where a mutant can be seen -----------------------------------------------------------
    def scope(self, node) -> tuple | None:
        """The lines to look for in the tests' coverage: the innermost statement (or lambda) inside
        a function around ``node``; a default argument or decorator takes the whole function. None
        when the code runs at import (module or class level)."""
        statement, current = None, node
        while current is not None:
            if isinstance(current, ast.Lambda):
                return current.lineno, current.end_lineno
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
                target = statement if statement is not None and statement is not current else current
                return target.lineno, target.end_lineno
            if isinstance(current, ast.stmt) and statement is None:
                statement = current
            current = self.parents.get(current)
        return None

    def add(self, node, start, end, replacement, rule):
        self.edits.append((start, end, replacement, rule, node.lineno, node.col_offset, self.scope(node)))

    # --- the mutations ----------------------------------------------------------------------------
    def run(self):
        for node in ast.walk(self.tree):
            if id(node) in self.skipped:
                continue
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method:
                method(node)
        return self.edits

    def visit_BinOp(self, node):
        for written, new, rule in BINOPS.get(type(node.op), []):
            at = self.src.find(self.src.span(node.left)[1], self.src.span(node.right)[0], written)
            if at:
                self.add(node, *at, new, rule)

    def visit_Compare(self, node):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if type(op) in COMPARES:
                written, new, rule = COMPARES[type(op)]
                at = self.src.find(self.src.span(left)[1], self.src.span(right)[0], written)
                if at:
                    self.add(node, *at, new, rule)
            left = right

    def visit_BoolOp(self, node):
        written, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        spots = []
        for a, b in zip(node.values, node.values[1:]):
            gap_start, gap_end = self.src.span(a)[1], self.src.span(b)[0]
            hits = list(re.finditer(rf"\b{written}\b", self.src.text[gap_start:gap_end]))
            if len(hits) != 1:
                return
            spots.append((gap_start + hits[0].start(), gap_start + hits[0].end()))
        # one mutant per expression: every `and` of it becomes `or` (several edits, applied together)
        self.edits.append((spots, None, new, f"{written}-{new}", node.lineno, node.col_offset, self.scope(node)))

    def visit_UnaryOp(self, node):
        start, end = self.src.span(node)
        if isinstance(node.op, ast.Not):
            m = re.match(r"not\b\s*", self.src.text[start:end])
            if m:
                self.add(node, start, start + m.end(), "", "not-drop")
        elif isinstance(node.op, ast.USub):
            if self.src.text[start] == "-":
                self.add(node, start, start + 1, "", "neg-drop")
            operand = node.operand
            if isinstance(operand, ast.Constant) and type(operand.value) in (int, float):
                self.skipped.add(id(operand))  # the literal -n is one number: mutated here, not twice
                n = operand.value
                new = {1: 2, 2: 1}.get(n, n + 1) if isinstance(n, int) else (0.0 if n == 1.0 else n + 1.0)
                self.add(node, start, end, "-" + _number(new), "neg-const")

    def visit_Constant(self, node):
        new = _constant_change(node.value)
        if new is None:
            return
        start, end = self.src.span(node)
        if isinstance(node.value, bool):
            self.add(node, start, end, repr(new), "bool")
        else:
            parent = self.parents.get(node)
            rule = "index" if isinstance(parent, ast.Subscript) and parent.slice is node else "const"
            self.add(node, start, end, _number(new), rule)

    def visit_AugAssign(self, node):
        for written, new, rule in AUGOPS.get(type(node.op), []):
            at = self.src.find(self.src.span(node.target)[1], self.src.span(node.value)[0], written)
            if at:
                self.add(node, *at, new, rule)

    def visit_Return(self, node):
        value = node.value
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return
        self.add(node, *self.src.span(value), "None", "return-none")


def _is_main_guard(test) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__")


def _one_line(text: str) -> str:
    """The code on these lines, comments dropped, on one line."""
    kept = []
    for line in text.splitlines():
        cut = len(line)
        try:
            for tok in tokenize.generate_tokens(io.StringIO(line).readline):
                if tok.type == tokenize.COMMENT:
                    cut = tok.start[1]
                    break
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass
        kept.append(line[:cut])
    return " ".join(" ".join(kept).split())


def _shorten(before: str, after: str, width: int = 110) -> tuple[str, str]:
    """Both lines cut to a window around their first difference when they are long."""
    if max(len(before), len(after)) <= width:
        return before, after
    common = 0
    while common < min(len(before), len(after)) and before[common] == after[common]:
        common += 1
    lo = max(0, common - width // 2)

    def cut(s):
        piece = s[lo:lo + width]
        return ("…" if lo else "") + piece + ("…" if lo + width < len(s) else "")

    return cut(before), cut(after)


def mutants_of(path: Path, rel: str, lines: tuple | None = None) -> list[Mutant]:
    text = path.read_text(encoding="utf-8")
    src = Source(text)
    tree = ast.parse(text)
    reference = ast.dump(tree)
    found, seen = [], set()
    for spots, end, replacement, rule, line, col, scope in Finder(src, tree).run():
        if lines and not lines[0] <= line <= lines[1]:
            continue
        edits = [(s, e) for s, e in spots] if end is None else [(spots, end)]
        new = text
        for s, e in sorted(edits, reverse=True):
            new = new[:s] + replacement + new[e:]
        try:
            changed = ast.dump(ast.parse(new)) != reference
        except SyntaxError:
            continue
        if not changed or new in seen:
            continue
        seen.add(new)
        first = min(s for s, _ in edits)
        last = max(e for _, e in edits)
        line_start = text.rfind("\n", 0, first) + 1
        line_end = text.find("\n", last)
        line_end = len(text) if line_end < 0 else line_end
        delta = len(new) - len(text)
        before, after = _shorten(_one_line(text[line_start:line_end]), _one_line(new[line_start:line_end + delta]))
        at_line = text.count("\n", 0, first) + 1
        found.append(Mutant(rel, at_line, first - src.starts[at_line - 1], rule, before, after, new, scope))
    found.sort(key=lambda m: (m.line, m.col, m.rule))
    return found


def collect_mutants(root: Path, targets, lines) -> list[Mutant]:
    files = []
    for target in targets:
        p = (root / target)
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    result = []
    for f in files:
        if "__pycache__" in f.parts:
            continue
        result += mutants_of(f, f.relative_to(root).as_posix(), lines)
    return result


# ==================================================================================================
# The plugin loaded into the child pytest: times each test and, if asked, records the lines it runs
# ==================================================================================================
_record: dict = {"order": [], "tests": {}}
_trace_files: set = set()


def _function_id(nodeid: str) -> str:
    """The test function: all parametrizations of it run together (so ids never need quoting)."""
    return nodeid.split("[", 1)[0]


def _make_tracer(lines: set):
    def local(frame, event, arg):
        if event == "line":
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def global_(frame, event, arg):
        if frame.f_code.co_filename in _trace_files:
            lines.add((frame.f_code.co_filename, frame.f_lineno))
            return local
        return None

    return global_


def pytest_configure(config):
    if os.environ.get(ENV_TRACE):
        _trace_files.update(os.environ[ENV_TRACE].split(os.pathsep))


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        if not os.environ.get(ENV_OUT):
            yield
            return
        import threading

        lines: set = set()
        tracing = bool(_trace_files)
        if tracing:
            tracer = _make_tracer(lines)
            threading.settrace(tracer)
            sys.settrace(tracer)
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            if tracing:
                sys.settrace(None)
                threading.settrace(None)
            fid = _function_id(item.nodeid)
            entry = _record["tests"].get(fid)
            if entry is None:
                _record["order"].append(fid)
                entry = _record["tests"][fid] = {"seconds": 0.0, "lines": set(), "failed": False}
            entry["seconds"] += elapsed
            entry["lines"] |= lines

    def pytest_runtest_logreport(report):
        if os.environ.get(ENV_OUT) and report.failed:
            entry = _record["tests"].get(_function_id(report.nodeid))
            if entry is not None:
                entry["failed"] = True

    def pytest_sessionfinish(session, exitstatus):
        out = os.environ.get(ENV_OUT)
        if not out:
            return
        tests = {}
        for fid, entry in _record["tests"].items():
            by_file: dict = {}
            for filename, line in entry["lines"]:
                by_file.setdefault(filename, []).append(line)
            tests[fid] = {"seconds": entry["seconds"], "failed": entry["failed"],
                          "lines": {f: sorted(ls) for f, ls in by_file.items()}}
        Path(out).write_text(json.dumps({"order": _record["order"], "tests": tests}))
except ImportError:  # the runner itself does not need pytest imported
    pass


# ==================================================================================================
# The runner
# ==================================================================================================
class Workspace:
    """A temporary copy of the repository's working tree, where the mutants are written and tested."""

    def __init__(self, root: Path, seed: str, keep: bool, commit: str | None = None, overlay=()):
        self.root, self.keep = root, keep
        self.base = Path(tempfile.mkdtemp(prefix="haaw-mutation-"))
        self.repo, plugin_dir = self.base / "repo", self.base / "plugin"
        plugin_dir.mkdir()
        shutil.copy(Path(__file__).resolve(), plugin_dir / f"{PLUGIN}.py")
        if commit:
            self._export(commit, overlay)
        else:
            self._copy_tree()
        self.env = dict(os.environ)
        self.env.pop(ENV_OUT, None)
        self.env.pop(ENV_TRACE, None)
        old = self.env.get("PYTHONPATH")
        self.env["PYTHONPATH"] = os.pathsep.join([str(self.repo), str(plugin_dir)] + ([old] if old else []))
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        # pytest's start-up is most of a short run: load only the plugins the tests need (Hypothesis's)
        self.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        self.extra = ["-p", PLUGIN, "-p", "_hypothesis_pytestplugin"] + ([f"--hypothesis-seed={seed}"] if seed.lower() != "none" else [])

    def _export(self, commit: str, overlay):
        """The files of ``commit``, then the working tree's version of each path in ``overlay``."""
        self.repo.mkdir()
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=self.root, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(self.repo)], input=archive, check=True)
        for path in overlay:
            source = self.root / path
            files = [p for p in source.rglob("*") if p.is_file()] if source.is_dir() else [source]
            for f in files:
                target = self.repo / f.relative_to(self.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target)

    def _copy_tree(self):
        try:
            listed = subprocess.run(["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=self.root,
                                    capture_output=True, check=True).stdout.decode().split("\0")
            files = [f for f in listed if f and (self.root / f).is_file()]
        except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything but caches
            files = [p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                     if p.is_file() and not any(part.startswith((".git", "__pycache__", ".hypothesis", ".pytest"))
                                                for part in p.relative_to(self.root).parts)]
        for f in files:
            target = self.repo / f
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.root / f, target)

    def check_import(self):
        out = subprocess.run([sys.executable, "-c", "import haaw; print(haaw.__file__)"], cwd=self.repo,
                             env=self.env, capture_output=True, text=True)
        where = Path(out.stdout.strip() or "?").resolve()
        if self.repo.resolve() not in where.parents:
            raise SystemExit(f"the copy's haaw is not the one imported (got {where}); stopping. {out.stderr}")

    def pytest(self, args, timeout, record=None, trace=None):
        """Run pytest in the copy; (exit code or None on timeout, seconds, last lines of output)."""
        shutil.rmtree(self.repo / ".hypothesis", ignore_errors=True)
        env = dict(self.env)
        if record:
            env[ENV_OUT] = str(record)
        if trace:
            env[ENV_TRACE] = os.pathsep.join(trace)
        cmd = [sys.executable, "-m", "pytest", *PYTEST_FLAGS, *self.extra, *args]
        start = time.perf_counter()
        with tempfile.TemporaryFile(mode="w+") as log:
            proc = subprocess.Popen(cmd, cwd=self.repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it started
                proc.wait()
                code = None
            except BaseException:  # interrupted: take the child down with us
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            log.seek(0)
            output = log.read()
        return code, time.perf_counter() - start, output

    def write(self, rel: str, text: str):
        (self.repo / rel).write_text(text, encoding="utf-8")

    def close(self):
        if self.keep:
            print(f"copy kept in {self.repo}")
        else:
            shutil.rmtree(self.base, ignore_errors=True)


def _test_mutant(ws: Workspace, m: Mutant, original: str, selector: "Selector", args, startup: float,
                 flaky: dict) -> None:
    """Run the tests against one mutant and set its status: killed, timeout, survived or error.

    A kill counts only if the test that failed passes on the unchanged code: a test that fails either
    way (a time limit under load, say) is deselected and the run repeated."""
    quick = selector.quick(m)
    runs = []
    # the tests that ran the mutated code, fastest first (with -x, the first that fails ends the run)
    if quick:
        runs.append(("quick", quick))
    if not (runs and args.quick_only):
        runs.append(("full", selector.fastest_first or args.selection))
    deselected: list[str] = []
    for name, selection in runs:
        expected = selector.expected(quick) if name == "quick" else selector.total
        timeout = args.timeout_factor * (expected + startup) + 20
        while True:
            ws.write(m.path, m.source)
            try:
                code, seconds, output = ws.pytest([*selection, *(f"--deselect={d}" for d in deselected)], timeout)
            finally:
                ws.write(m.path, original)
            if code is None:
                m.status, m.detail = "timeout", f"{name} run stopped after {seconds:.0f} s"
                return
            if code == 0:
                passed = re.findall(r"(\d+) passed", output)
                m.status, m.detail = "survived", f"{name}: {passed[-1] if passed else '?'} passed"
                break
            if code not in (1, 2, 3):
                m.status, m.detail = "error", f"pytest exit code {code}: {_first_failure(output)}"
                return
            node = _failing_node(output)
            if node is None:  # no test named (an internal error): nothing to check it against
                m.status, m.detail = "killed", f"{name}: {_first_failure(output)}"
                return
            check = selector.expected([_function_id(node)]) * args.timeout_factor + startup * 2 + 30
            again, _, _ = ws.pytest([node], timeout=check)
            if again == 0:
                m.status, m.detail = "killed", f"{name}: {_first_failure(output)}"
                return
            flaky[node] = flaky.get(node, 0) + 1  # it fails on the unchanged code too
            deselected.append(node)
            if len(deselected) > 3:
                m.status, m.detail = "error", f"tests that fail on the unchanged code too: {', '.join(deselected)}"
                return


def _failing_node(output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ")[0].strip()
    return None


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0][:160]
    tail = [l for l in output.splitlines() if l.strip()]
    return tail[-1][:160] if tail else ""


class Selector:
    """Which tests to run first for a mutant, from the unchanged copy's timings and coverage."""

    def __init__(self, timing: dict, coverage: dict | None, repo: Path):
        self.seconds = {fid: t["seconds"] for fid, t in timing["tests"].items()}
        self.fastest_first = sorted(timing["order"], key=lambda fid: self.seconds[fid])
        self.total = sum(self.seconds.values())
        self.covering: dict[str, dict[int, set]] = {}
        if coverage:
            for fid, t in coverage["tests"].items():
                for filename, lines in t["lines"].items():
                    try:
                        rel = Path(filename).resolve().relative_to(repo.resolve()).as_posix()
                    except ValueError:
                        continue
                    per_line = self.covering.setdefault(rel, {})
                    for line in lines:
                        per_line.setdefault(line, set()).add(fid)

    def quick(self, mutant: Mutant) -> list[str] | None:
        """The tests that ran the mutated lines, fastest first; None: use the whole selection."""
        if mutant.scope is None or not self.covering:
            return None
        per_line = self.covering.get(mutant.path, {})
        tests = set()
        for line in range(mutant.scope[0], mutant.scope[1] + 1):
            tests |= per_line.get(line, set())
        return [fid for fid in self.fastest_first if fid in tests]

    def expected(self, fids) -> float:
        return sum(self.seconds.get(f, 0.0) for f in fids)


def _parse_lines(text: str | None):
    if not text:
        return None
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not m:
        raise argparse.ArgumentTypeError("--lines takes N or N-M")
    return int(m.group(1)), int(m.group(2) or m.group(1))


def _ids_from_report(path: Path) -> set[str]:
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.search(r"\[id ([^\]]+)\]", line)
        if m and line.lstrip().startswith("SURVIVED"):
            ids.add(m.group(1))
    return ids


def _format_duration(seconds: float) -> str:
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{seconds:.1f} s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Mutation testing of haaw's engine: generate small bugs, run the tests against each.",
        epilog="Example: python scripts/mutation.py --files haaw/optim.py --max 10")
    parser.add_argument("--files", nargs="+", metavar="PATH", default=DEFAULT_TARGETS,
                        help="files or folders to mutate, relative to the repository "
                             f"(default: {' '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--lines", type=_parse_lines, metavar="N-M", help="only mutants on these lines")
    parser.add_argument("--tests", nargs="+", metavar="PATH", default=DEFAULT_TESTS,
                        help="the pytest selection (default: %(default)s)")
    parser.add_argument("--ignore", nargs="*", metavar="PATH", default=DEFAULT_IGNORE,
                        help="test files left out of the selection (default: %(default)s)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--max", type=int, metavar="N", help="test only the first N mutants")
    parser.add_argument("--only", action="append", default=[], metavar="ID",
                        help="test only the mutant with this id (as printed in --list); repeatable")
    parser.add_argument("--rerun", type=Path, metavar="REPORT", help="test only the survivors listed in REPORT")
    parser.add_argument("--report", type=Path, default=Path("mutation-report.txt"),
                        help="where to write the summary (default: %(default)s, relative to the current directory)")
    parser.add_argument("--no-quick", action="store_true",
                        help="run the whole selection for every mutant (no coverage, slower)")
    parser.add_argument("--quick-only", action="store_true",
                        help="a mutant that survives the tests running its line is not run against the whole "
                             "selection too (faster; those tests are the only ones that can see it, unless a "
                             "test runs the code in another process)")
    parser.add_argument("--timeout-factor", type=float, default=4.0,
                        help="a run longer than this many times its unchanged duration (plus 20 s) is a timeout")
    parser.add_argument("--hypothesis-seed", default="0", metavar="SEED",
                        help="seed passed to Hypothesis (default 0, for reproducible reports; 'none' for random)")
    parser.add_argument("--commit", metavar="REV",
                        help="test this commit instead of the working tree (useful while others edit it) ...")
    parser.add_argument("--overlay", nargs="+", default=[], metavar="PATH",
                        help="... with these files or folders of the working tree on top (with --commit)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository (default: this script's parent)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)
    args.selection = [*args.tests, *(f"--ignore={path}" for path in args.ignore)]

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # `kill` cleans up like Ctrl-C: the child stops, the copy goes
    started = time.perf_counter()
    ws = Workspace(args.repo.resolve(), args.hypothesis_seed, args.keep, args.commit, args.overlay)
    try:
        # the mutants are made from the copy's files: the working tree may change while this runs
        mutants = collect_mutants(ws.repo, args.files, args.lines)
        generated = len(mutants)
        wanted = set(args.only) | (_ids_from_report(args.rerun) if args.rerun else set())
        if wanted:
            mutants = [m for m in mutants if m.id in wanted]
            for mid in sorted(wanted - {m.id for m in mutants}):
                print(f"no mutant with id {mid} (the code may have changed)", file=sys.stderr)
        if args.max is not None:
            mutants = mutants[:args.max]
        if args.list:
            for i, m in enumerate(mutants, 1):
                print(f"{i:4d} {m.path}:{m.line}  {m.change}   [id {m.id}]")
            print(f"{len(mutants)} mutants")
            return 0
        if not mutants:
            print("no mutants to test")
            return 0
        return _run(args, ws, mutants, generated, started)
    except KeyboardInterrupt:
        print("\ninterrupted")
        return 130
    finally:
        if args.list:
            ws.keep = False
        ws.close()


def _run(args, ws: Workspace, mutants: list[Mutant], generated: int, started: float) -> int:
    ws.check_import()
    targets = sorted({m.path for m in mutants})
    originals = {rel: (ws.repo / rel).read_text(encoding="utf-8") for rel in targets}

    print(f"{len(mutants)} mutants in {len(targets)} file(s); copy in {ws.repo}")
    print("timing the unchanged tests ...", flush=True)
    timing_file = ws.base / "timing.json"
    code, full_seconds, output = ws.pytest(args.selection, timeout=3600, record=timing_file)
    if code != 0:
        print(output[-3000:])
        raise SystemExit("the tests fail on the unchanged code: fix that first")
    timing = json.loads(timing_file.read_text())
    print(f"  {len(timing['order'])} test functions, {full_seconds:.1f} s for the whole selection")

    coverage = None
    if not args.no_quick:
        print("recording which tests run which lines (fastest tests first) ...", flush=True)
        selector = Selector(timing, None, ws.repo)
        coverage_file = ws.base / "coverage.json"
        trace = [str(ws.repo / rel) for rel in targets]
        code, seconds, output = ws.pytest([*selector.fastest_first], timeout=3600 + 10 * full_seconds,
                                          record=coverage_file, trace=trace)
        coverage = json.loads(coverage_file.read_text())
        print(f"  done in {seconds:.1f} s")
        if code != 0:  # tracing slows tests down (a Hypothesis deadline may fire): check the order alone
            code, _, output = ws.pytest([*selector.fastest_first], timeout=3 * full_seconds + 60)
            if code != 0:
                print(output[-3000:])
                raise SystemExit("the tests fail when run fastest first: the quick selection cannot be trusted; "
                                 "use --no-quick")
    selector = Selector(timing, coverage, ws.repo)
    startup = max(1.0, full_seconds - selector.total)

    counts = {"killed": 0, "timeout": 0, "survived": 0, "error": 0}
    flaky: dict[str, int] = {}
    width = len(str(len(mutants)))
    for i, m in enumerate(mutants, 1):
        t0 = time.perf_counter()
        _test_mutant(ws, m, originals[m.path], selector, args, startup, flaky)
        m.seconds = time.perf_counter() - t0
        counts[m.status] += 1
        print(f"[{i:{width}d}/{len(mutants)}] {m.status:8s} {m.path}:{m.line}  {m.change}"
              f"  ({m.seconds:.1f} s{'; ' + m.detail if m.detail else ''})", flush=True)

    elapsed = time.perf_counter() - started
    lines = [
        "Mutation run of haaw: " + " ".join(["python scripts/mutation.py", *sys.argv[1:]]),
        f"files: {', '.join(targets)}",
        f"tests: {' '.join(args.selection)}",
        f"mutants generated: {generated}; tested: {len(mutants)}",
        f"killed: {counts['killed'] + counts['timeout']} (by a failing test: {counts['killed']}, "
        f"by timeout: {counts['timeout']})",
        f"survived: {counts['survived']}",
    ]
    if counts["error"]:
        lines.append(f"errors (not counted as killed): {counts['error']}")
    lines.append(f"time: {_format_duration(elapsed)} (the unchanged selection alone: {full_seconds:.1f} s)")
    for node, times in sorted(flaky.items()):
        lines.append(f"a test that also failed on the unchanged code, deselected and the mutant re-run ({times}x): {node}")
    lines.append("")
    for m in mutants:
        if m.status in ("survived", "error"):
            lines.append(f"{m.status.upper()}  {m.path}:{m.line}  {m.change}   [id {m.id}]"
                         + (f"  ({m.detail})" if m.detail else ""))
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    args.report.write_text(report, encoding="utf-8")
    print(f"report written to {args.report}")
    return 0 if not counts["survived"] and not counts["error"] else 1


if __name__ == "__main__":
    sys.exit(main())
