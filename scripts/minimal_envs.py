"""Every test file, alone, in the smallest environments the project promises to run in.

    python scripts/minimal_envs.py                 # both environments, every file
    python scripts/minimal_envs.py --env base      # one of them
    python scripts/minimal_envs.py --keep DIR      # build the environments in DIR, reuse them there next time

- base: haaw's own dependencies (pyproject.toml) and pytest, what bare `pytest` promises to need. Every test file
  under tests/ runs in it: a test that needs anything more must skip, never fail or stop its file's collection.
- course: base and the course extra but JupyterLab (matplotlib, ipywidgets, ipython, nbformat): tests/course.

Each environment is a new virtual environment in a temporary folder, installed by pip with this machine's own index
settings, at the versions requirements-no-torch.txt pins (a package it does not pin: pip's choice), with haaw
installed editable from this checkout and without its dependencies. Each file runs in a pytest process of its own
(`-x -q`, its folder's conftest.py as always), several at once; one line per file says what passed and skipped, or
what failed. The exit status is 1 if any file failed or did not collect, 2 if an environment could not be built.
tests/repo/test_minimal_envs.py is the suite's cheap guard for the same promise: no environment built, only
collection, with the undeclared packages hidden.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = {"jupyterlab"}  # of the course extra: a browser's, no test file under tests/course needs it


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised as pip compares names: "ml_dtypes>=0.4" -> "ml-dtypes"."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)).lower()


def environments() -> dict[str, tuple[list[str], list[Path]]]:
    """name -> (the distributions it installs, the test files it runs), read from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [_name(r) for r in project["dependencies"]] + ["pytest"]
    course = base + [_name(r) for r in project["optional-dependencies"]["course"] if _name(r) not in LEFT_OUT]
    every_file = sorted(p for p in (ROOT / "tests").rglob("test_*.py") if "plugins" not in p.parts)
    return {"base": (base, every_file),
            "course": (course, [p for p in every_file if p.parent == ROOT / "tests" / "course"])}


def pins() -> dict[str, str]:
    """distribution -> version, from requirements-no-torch.txt's `name==version` lines."""
    found = {}
    for line in (ROOT / "requirements-no-torch.txt").read_text().splitlines():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)", line)
        if match:
            found[_name(match.group(1))] = match.group(2)
    return found


def build(folder: Path, packages: list[str], versions: dict[str, str]) -> Path:
    """A virtual environment in ``folder`` (made unless it is there already) with ``packages`` and haaw: its python."""
    python = folder / "bin" / "python"
    specs = [f"{p}=={versions[p]}" if p in versions else p for p in packages]
    if (folder / "installed.txt").is_file() and (folder / "installed.txt").read_text() == "\n".join(specs):
        return python
    shutil.rmtree(folder, ignore_errors=True)
    steps = [[sys.executable, "-m", "venv", str(folder)],
             [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *specs],
             [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "-e", str(ROOT)]]
    for step in steps:
        run = subprocess.run(step, capture_output=True, text=True, cwd=ROOT)
        if run.returncode:
            raise RuntimeError(f"{' '.join(step)} exited {run.returncode}:\n{run.stdout}{run.stderr}")
    (folder / "installed.txt").write_text("\n".join(specs))
    return python


COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b")


def run_file(python: Path, path: Path) -> tuple[bool, str, float]:
    """Run one test file alone: (whether it passed, one line saying what happened, seconds)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CI")}
    # CI unset: the browser test fails instead of skipping in CI, where a missing browser is a missing install;
    # here what is missing is missing on purpose
    start = time.monotonic()
    try:
        run = subprocess.run([str(python), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", str(path)],
                             capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return False, "did not finish in 900 s", time.monotonic() - start
    seconds = time.monotonic() - start
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in COUNTS.findall(lines[-1] if lines else "")}
    ok = run.returncode in (0, 5) and not counts.get("failed") and not counts.get("error")
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or (lines[-1] if lines else "no output")
    if not ok:
        why = [line for line in lines if line.startswith(("FAILED ", "ERROR ", "E   "))]
        summary += f" (exit {run.returncode}): " + (why[0] if why else "\n" + (run.stdout + run.stderr)[-2000:])
    return ok, summary, seconds


def main(argv=None) -> int:
    known = environments()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", choices=sorted(known), help="only this environment (repeatable)")
    parser.add_argument("--keep", type=Path, help="build the environments in this folder and keep them there")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="test files run at once")
    args = parser.parse_args(argv)
    chosen = {name: known[name] for name in (args.env or known)}
    started = time.monotonic()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="haaw-minimal-envs-"))
    versions = pins()
    try:
        with ThreadPoolExecutor(len(chosen)) as pool:
            futures = {name: pool.submit(build, folder / name, packages, versions)
                       for name, (packages, _) in chosen.items()}
            try:
                pythons = {name: future.result() for name, future in futures.items()}
            except RuntimeError as err:
                print(f"could not build an environment: {err}", file=sys.stderr)
                return 2
        for name, (packages, _) in chosen.items():
            print(f"{name}: {' '.join(f'{p}=={versions[p]}' if p in versions else p for p in packages)}")
        print(f"built in {time.monotonic() - started:.0f} s", flush=True)
        jobs = [(name, path) for name, (_, paths) in chosen.items() for path in paths]
        failed = []
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for (name, path), (ok, summary, seconds) in zip(
                    jobs, pool.map(lambda job: run_file(pythons[job[0]], job[1]), jobs)):
                where = path.relative_to(ROOT).as_posix()
                print(f"{'ok  ' if ok else 'FAIL'} {name:<7}{where:<46}{summary}  ({seconds:.1f} s)", flush=True)
                if not ok:
                    failed.append(f"{name}: {where}")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{len(jobs) - len(failed)} of {len(jobs)} files ran clean in {time.monotonic() - started:.0f} s"
          + ("" if not failed else "; failed or did not collect: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
