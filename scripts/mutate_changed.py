"""Run mutmut on the files a change touched, and nothing else (docs/mutation-survivors.md, "One module at a time").

    python scripts/mutate_changed.py                  # the package files changed since main (committed or not)
    python scripts/mutate_changed.py --base HEAD~3    # ... since another commit
    python scripts/mutate_changed.py haaw/engine/ops.py haaw/optim.py   # these files, changed or not
    python scripts/mutate_changed.py --all --children 2   # every file under mutation, decorated functions too
    python scripts/mutate_changed.py --list           # only say which files it would mutate
    python scripts/mutate_changed.py haaw/engine/tensor.py --mutants "haaw.engine.tensor.xǁTensorǁflatten*"
                                                      # only the mutants mutmut's pattern names, in those files

The run happens in a copy of the working tree (tracked files, as they are on disk) in a temporary folder, so the
repository is never edited. In the copy, `[tool.mutmut] only_mutate` is narrowed to the files, and every function
decorated with `@contextmanager` or `@refusable(...)` in them is rewritten as a plain definition wrapped on the next
line (`name = contextmanager(name)`): mutmut 3.8.1 mutates no decorated function, and this is the rewrite the
page describes doing by hand. The tests and their selection are pyproject.toml's. At the end the script prints,
for each module, how many mutants were killed and which survived (`mutmut show NAME` in the folder it names shows
one), and how long the run took.
"""
from __future__ import annotations

import argparse
import ast
import collections
import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REWRITTEN = {"contextmanager", "refusable", "guard.refusable"}  # decorators moved below their function


def mutated_patterns(root: Path = ROOT) -> list[str]:
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]


def changed_files(base: str, root: Path = ROOT) -> list[str]:
    """The files under mutation (pyproject's patterns) that differ from ``base`` in the working tree, or are new;
    not those deleted."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    patterns = mutated_patterns(root)
    touched = git("diff", "--name-only", base, "--") + git("ls-files", "--others", "--exclude-standard")
    return sorted({f for f in touched if (root / f).exists() and any(fnmatch.fnmatch(f, p) for p in patterns)})


def all_files(root: Path = ROOT) -> list[str]:
    """Every tracked file pyproject's patterns name."""
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    return sorted(f for f in tracked if any(fnmatch.fnmatch(f, p) for p in mutated_patterns(root)))


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target)


def undecorate(source: str) -> str:
    """``source`` with each function whose decorators are all in REWRITTEN defined plainly and wrapped after it."""
    lines = source.splitlines(keepends=True)
    edits = []  # (first decorator line, def line, end line, indent, name, decorators' source), 1-based
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list and all(
                _decorator_name(d) in REWRITTEN for d in node.decorator_list):
            first = min(d.lineno for d in node.decorator_list)
            wrapped = node.name
            for decorator in reversed(node.decorator_list):
                wrapped = f"{ast.get_source_segment(source, decorator)}({wrapped})"
            indent = re.match(r"\s*", lines[node.lineno - 1]).group()
            edits.append((first, node.lineno, node.end_lineno, indent, node.name, wrapped))
    for first, start, end, indent, name, wrapped in sorted(edits, reverse=True):
        lines.insert(end, f"{indent}{name} = {wrapped}\n")
        del lines[first - 1:start - 1]
    return "".join(lines)


def copy_tree(files: list[str]) -> Path:
    """A copy of the tracked files as they are on disk, with only_mutate narrowed to ``files`` and their decorated
    functions rewritten."""
    folder = Path(tempfile.mkdtemp(prefix="haaw-mutate-"))
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.splitlines()
    for name in tracked:
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    for name in files:
        path = folder / name
        path.write_text(undecorate(path.read_text()))
    pyproject = folder / "pyproject.toml"
    narrowed = "only_mutate = [" + ", ".join(f'"{f}"' for f in files) + "]"
    text, count = re.subn(r"^only_mutate = \[.*?\]", narrowed, pyproject.read_text(), flags=re.M | re.S)
    assert count == 1, "pyproject.toml has no one-line [tool.mutmut] only_mutate to narrow"
    pyproject.write_text(text)
    return folder


def report(folder: Path, seconds: float) -> None:
    listed = subprocess.run(["mutmut", "results", "--all", "true"], cwd=folder, capture_output=True, text=True,
                            check=True).stdout
    rows = [line.strip().rsplit(": ", 1) for line in listed.splitlines() if ": " in line]
    rows = [(name, status) for name, status in rows if status != "not checked"]  # outside --mutants' patterns
    counts = collections.defaultdict(collections.Counter)
    for name, status in rows:
        counts[re.sub(r"\.x[ǁ_].*$", "", name)][status] += 1
    print(f"\n{len(rows)} mutants in {seconds / 60:.1f} min (results kept in {folder}):")
    for module, by_status in sorted(counts.items()):
        total = sum(by_status.values())
        others = [f"{n} {s}" for s, n in by_status.most_common() if s != "killed"]
        print(f"  {module}: {by_status['killed']} of {total} killed ({100 * by_status['killed'] / total:.1f}%)"
              + "".join(f", {other}" for other in others))
    left = [name for name, status in rows if status not in ("killed", "timeout")]
    if left:
        print("Not killed (explain each in docs/mutation-survivors.md, or kill it with a test):")
        print("\n".join(f"  {name}: {dict(rows)[name]}" for name in left))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="files to mutate (default: those changed since --base)")
    parser.add_argument("--base", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--children", type=int, default=1, help="mutmut's --max-children (default 1)")
    parser.add_argument("--all", action="store_true", help="every file under mutation, changed or not")
    parser.add_argument("--list", action="store_true", help="only print the files that would be mutated")
    parser.add_argument("--mutants", nargs="+", default=[], help="run only the mutants these names or globs match")
    args = parser.parse_args(argv)
    files = args.files or (all_files() if args.all else changed_files(args.base))
    if not files:
        print(f"No file under mutation ({', '.join(mutated_patterns())}) differs from {args.base}.")
        return 0
    print("Mutating:", " ".join(files))
    if args.list:
        return 0
    folder = copy_tree(files)
    started = time.perf_counter()
    run = subprocess.run(["mutmut", "run", "--max-children", str(args.children), *args.mutants], cwd=folder)
    report(folder, time.perf_counter() - started)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
