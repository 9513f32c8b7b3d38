"""Run the test suite as the README says, time each part, and write what was measured to docs/results/suite.md.

    python scripts/suite_times.py [--no-browser] [--write FILE]

The parts are the README's two test commands (`pytest -n auto --nbval -m "not browser"`, then `pytest -m browser`).
For each: the wall time, the CPU time of pytest and everything it started, and pytest's own summary line. The
page says on what machine and when; docs/testing.md includes it instead of retyping the numbers.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {
    "the package and every notebook under nbval": ["-n", "auto", "--nbval", "-m", "not browser"],
    "the browser tests (JupyterLab and the website)": ["-m", "browser"],
}


def run(args: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|error|skipped)", line)]
    summary = summary[-1].strip("= ") if summary else "(no summary)"
    # a part whose tests were all skipped (a missing browser, say) measured nothing: not a result to write down
    return {"wall": wall, "cpu": cpu, "summary": summary, "ok": done.returncode == 0 and " passed" in summary}


def page(results: dict) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Test suite: the last measured run", "",
             f"Written by `python scripts/suite_times.py` on {when}: Python {platform.python_version()}, "
             f"{platform.machine()}, {os.cpu_count()} cores. Wall time depends on what else the machine is doing; "
             "CPU time counts pytest and every process it started (kernels, browsers).", "",
             "| part | command | wall | CPU | pytest says |", "|---|---|---|---|---|"]
    for name, r in results.items():
        command = "pytest " + " ".join(f'"{a}"' if " " in a else a for a in PARTS[name])
        lines.append(f"| {name} | `{command}` | {r['wall']:.0f} s | {r['cpu']:.0f} s | {r['summary']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-browser", action="store_true", help="leave the browser tests out")
    parser.add_argument("--write", default=str(ROOT / "docs" / "results" / "suite.md"), help="the page to write")
    options = parser.parse_args()
    results = {}
    for name, args in PARTS.items():
        if options.no_browser and "browser" in name:
            continue
        results[name] = run(args)
        print(f"{name}: {results[name]['wall']:.0f} s wall, {results[name]['cpu']:.0f} s CPU; {results[name]['summary']}")
    if all(r["ok"] for r in results.values()):
        Path(options.write).write_text(page(results))
        print("wrote", options.write)
        return 0
    print("a part failed or ran no test: nothing written")
    return 1


if __name__ == "__main__":
    sys.exit(main())
