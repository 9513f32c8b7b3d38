"""Run the test suite's tiers as the README says, time each, and write what was measured to docs/results/suite.md.

    python scripts/suite_times.py [--no-browser] [--write FILE]

The tiers are the README's three test commands: bare `pytest` (the everyday loop, one process), `pytest -n auto
--nbval -m "not browser"` (everything but the browser), `pytest -m browser`. For each: the wall time against its
target, the CPU time of pytest and everything it started, and pytest's own summary line; for the second, the
test time of each kind of test in it, summed over the workers. The page says on what machine and when;
docs/testing.md points to it instead of retyping the numbers.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {  # name: (pytest's arguments, the target wall time in seconds on a quiet 2-core machine)
    "the everyday loop": ([], 20),
    "everything but the browser": (["-n", "auto", "--nbval", "-m", "not browser"], 90),
    "the browser tests (JupyterLab and the website)": (["-m", "browser"], 75),
}
KINDS = [  # (kind, how its test ids start), first match wins
    ("notebooks under nbval, each run again", ("notebooks/",)),
    ("claims", ("tests/claims/",)),
    ("repository policies", ("tests/repo/",)),
    ("differential programs", ("tests/test_differential.py",)),
    ("the package's unit tests", ("tests/",)),
]


def kind_times(junit: Path) -> dict:
    """Seconds of test time per kind, from pytest's JUnit XML (summed over workers)."""
    import xml.etree.ElementTree as ET

    times = dict.fromkeys((k for k, _ in KINDS), 0.0)
    for case in ET.parse(junit).getroot().iter("testcase"):
        where = case.get("file") or case.get("classname", "").replace(".", "/")
        if not where.startswith(("tests/", "notebooks/")) and case.get("classname", "").startswith("notebooks"):
            where = "notebooks/"
        for kind, starts in KINDS:
            if where.startswith(starts):
                times[kind] += float(case.get("time", 0))
                break
    return times


def run(args: list[str], junit: Path | None = None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    extra = [f"--junitxml={junit}", "-o", "junit_family=xunit1"] if junit else []
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEw", *args, *extra], cwd=ROOT, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|error|skipped)", line)]
    summary = summary[-1].strip("= ") if summary else "(no summary)"
    # a part whose tests were all skipped (a missing browser, say) measured nothing: not a result to write down
    for line in done.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")) or "Warning:" in line:
            print("   ", line[:300])  # what went wrong, or warned, so that a failed run says why
    kinds = kind_times(junit) if junit and junit.exists() else {}
    return {"wall": wall, "cpu": cpu, "summary": summary, "kinds": kinds,
            "ok": done.returncode == 0 and " passed" in summary}


def page(results: dict) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Test suite: the last measured run", "",
             f"Written by `python scripts/suite_times.py` on {when}: Python {platform.python_version()}, "
             f"{platform.machine()}, {os.cpu_count()} cores. Wall time depends on what else the machine is doing; "
             "CPU time counts pytest and every process it started (kernels, browsers).", "",
             "| tier | command | wall | target | CPU | pytest says |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        args, target = PARTS[name]
        command = " ".join(["pytest", *(f'"{a}"' if " " in a else a for a in args)])
        met = "met" if r["wall"] <= target else "**over**"
        lines.append(f"| {name} | `{command}` | {r['wall']:.0f} s | {target} s, {met} | {r['cpu']:.0f} s | "
                     f"{r['summary']} |")
    for name, r in results.items():
        if r["kinds"]:
            lines += ["", f"Test time in {name}, by kind (seconds, summed over the workers, setup included):", "",
                      "| kind | seconds |", "|---|---|"]
            lines += [f"| {kind} | {seconds:.0f} |" for kind, seconds in r["kinds"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-browser", action="store_true", help="leave the browser tests out")
    parser.add_argument("--write", default=str(ROOT / "docs" / "results" / "suite.md"), help="the page to write")
    options = parser.parse_args()
    results = {}
    junit = Path(tempfile.mkdtemp()) / "junit.xml"
    for name, (args, _) in PARTS.items():
        if options.no_browser and args == ["-m", "browser"]:
            continue
        results[name] = run(args, junit if "--nbval" in args else None)
        print(f"{name}: {results[name]['wall']:.0f} s wall, {results[name]['cpu']:.0f} s CPU; {results[name]['summary']}")
    if all(r["ok"] for r in results.values()):
        Path(options.write).write_text(page(results))
        print("wrote", options.write)
        return 0
    print("a part failed or ran no test: nothing written")
    return 1


if __name__ == "__main__":
    sys.exit(main())
