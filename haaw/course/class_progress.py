"""A class's progress files as one table and one figure: who passed what, in how many attempts, where each
learner stopped.

    python -m haaw.course.class_progress FILES... [--out DIR]

Each learner hands in their ``haaw-progress.json`` (exercises/progress.py). This writes, in ``DIR`` (the current
folder by default), ``class-progress.md`` and ``class-progress.csv`` (a row a learner: the name the file gives,
or the file's name; exercises solved and tried; where they stopped, the last exercise they attempted in course
order; then each exercise's verdict and attempts) and ``class-progress.png`` (learners by exercises, solved,
tried or not yet tried). A file that is not a haaw progress file (unreadable, another program's JSON, a folder)
is named with the reason and skipped; exercises this version of the course does not have are named and left out.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .exercises.registry import REGISTRY

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOLVED, TRIED = "solved", "tried"


def course_order(folder: Path = NOTEBOOKS) -> list[str]:
    """Every exercise in the order a learner meets it: notebook by notebook, the core's then its companion's,
    each in the order its notebook first checks it. Without the notebooks (an installed package), the order in
    which the course defines them, notebook by notebook."""
    from .editions import course_notebooks

    found: list[str] = []
    try:
        paths = sorted(course_notebooks(folder), key=lambda p: (p.name[:2], "deeper" in p.parts))
        for path in paths:
            for cell in json.loads(path.read_text()).get("cells", []):
                if cell.get("cell_type") == "code":
                    source = "".join(cell.get("source", ""))
                    found += [k for k in re.findall(r"check\(\s*[\"']([^\"']+)", source) if k in REGISTRY]
    except (OSError, ValueError):
        found = []
    order = list(dict.fromkeys(found))
    rest = [k for k in REGISTRY if k not in order]  # not checked in any notebook found: after its notebook's
    for key in rest:
        after = [i for i, k in enumerate(order) if k[:2] <= key[:2]]
        order.insert(after[-1] + 1 if after else 0, key)
    return order


@dataclass
class Learner:
    name: str
    file: Path
    exercises: dict  # key -> {"solved": bool, "attempts": int}
    unknown: list = field(default_factory=list)  # keys this course does not have

    def stopped_at(self, order: list[str]) -> str:
        tried = [k for k in order if k in self.exercises]
        return tried[-1] if tried else ""


def read_file(path: Path) -> tuple[Learner | None, str]:
    """(the learner, "") or (None, why the file was skipped). Never raises."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except IsADirectoryError:
        return None, "a folder, not a file"
    except OSError as err:
        return None, f"cannot be read ({err.strerror or type(err).__name__})"
    except (UnicodeDecodeError, ValueError):
        return None, "not JSON (not a haaw progress file, or cut short)"
    if not isinstance(data, dict) or data.get("course") != "haaw":
        return None, 'JSON, but not a haaw progress file (no "course": "haaw")'
    kept = data.get("exercises")
    if not isinstance(kept, dict):
        return None, 'a haaw progress file without its "exercises" table'
    exercises, unknown = {}, []
    for key, entry in kept.items():
        if key not in REGISTRY:
            unknown.append(str(key))
        elif isinstance(entry, dict):
            try:
                attempts = max(int(entry.get("attempts", 0)), 1)
            except (TypeError, ValueError):
                attempts = 1
            exercises[key] = {"solved": entry.get("solved") is True, "attempts": attempts}
    name = data.get("learner")
    name = " ".join(name.split())[:80] if isinstance(name, str) and name.strip() else Path(path).name
    return Learner(name, Path(path), exercises, unknown), ""


def read_class(paths) -> tuple[list[Learner], list[str]]:
    """The learners whose files could be read, and a line for every file (or part of one) that was skipped."""
    learners, skipped = [], []
    for path in paths:
        learner, why = read_file(Path(path))
        if learner is None:
            skipped.append(f"{path}: skipped, {why}")
            continue
        if learner.unknown:
            skipped.append(f"{path}: left out {len(learner.unknown)} exercise(s) this course does not have: "
                           + ", ".join(sorted(learner.unknown)[:5]) + (" ..." if len(learner.unknown) > 5 else ""))
        learners.append(learner)
    names = [x.name for x in learners]
    for x in learners:  # two files with one name: each says which file it is
        if names.count(x.name) > 1:
            x.name = f"{x.name} ({x.file.name})"
    return learners, skipped


def cell(learner: Learner, key: str) -> str:
    entry = learner.exercises.get(key)
    if entry is None:
        return ""
    return f"{SOLVED if entry['solved'] else TRIED} ({entry['attempts']})"


def rows(learners: list[Learner], order: list[str]) -> tuple[list[str], list[list]]:
    header = ["learner", "solved", "tried, not solved", "stopped at", *order]
    table = []
    for x in learners:
        solved = sum(e["solved"] for e in x.exercises.values())
        table.append([x.name, solved, len(x.exercises) - solved, x.stopped_at(order), *(cell(x, k) for k in order)])
    return header, table


def markdown(learners: list[Learner], order: list[str], skipped: list[str]) -> str:
    header, table = rows(learners, order)
    lines = [f"# Class progress: {len(learners)} learner(s), {len(order)} exercises", "",
             "Each exercise cell: solved or tried (not solved), with the number of attempts; empty: not tried. "
             "\"Stopped at\" is the last exercise attempted, in course order.", ""]
    summary = header[:4]
    lines += ["| " + " | ".join(summary) + " |", "|" + "---|" * len(summary)]
    lines += ["| " + " | ".join(_md(v) for v in row[:4]) + " |" for row in table]
    lines += ["", "## Each exercise", "", "| exercise | solved | tried, not solved | " + " | ".join(
        _md(x.name) for x in learners) + " |", "|" + "---|" * (3 + len(learners))]
    for i, key in enumerate(order):
        column = [row[4 + i] for row in table]
        lines.append(f"| {key} | {sum(c.startswith(SOLVED) for c in column)} | "
                     f"{sum(c.startswith(TRIED) for c in column)} | " + " | ".join(column) + " |")
    if skipped:
        lines += ["", "## Skipped", "", *(f"- {_md(s)}" for s in skipped)]
    return "\n".join(lines) + "\n"


def _md(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def write_csv(path: Path, learners: list[Learner], order: list[str]) -> None:
    header, table = rows(learners, order)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(table)


def figure(path: Path, learners: list[Learner], order: list[str]) -> None:
    """Learners by exercises: a filled square for solved, a cross on a light square for tried, nothing for not yet
    tried; shapes as well as colours, so that no one needs the colours to read it."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure  # not pyplot: no backend is chosen, none is changed
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from .style import PALETTE, SMALLEST_TEXT, apply

    apply()
    grid = np.zeros((len(learners), len(order)))
    for i, x in enumerate(learners):
        for j, key in enumerate(order):
            entry = x.exercises.get(key)
            grid[i, j] = 0 if entry is None else (2 if entry["solved"] else 1)
    width = min(max(6.0, 0.22 * len(order) + 2.5), 30.0)
    fig = Figure(figsize=(width, 2.6 + 0.3 * max(len(learners), 1)))  # the rotated names take about 2 inches
    ax = fig.subplots()
    ax.imshow(grid, cmap=ListedColormap(["#ffffff", "#F3D9A4", PALETTE[0]]), vmin=0, vmax=2, aspect="auto",
              interpolation="nearest")
    tried = np.argwhere(grid == 1)
    ax.scatter(tried[:, 1], tried[:, 0], marker="x", color=PALETTE[3], s=20, linewidths=1.2)
    ax.set_xticks(range(len(order)), order, rotation=90, fontsize=SMALLEST_TEXT)
    ax.set_yticks(range(len(learners)), [x.name for x in learners])
    ax.set_xticks(np.arange(-0.5, len(order)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(learners)), minor=True)
    ax.grid(which="minor", color="#cccccc", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    for j in range(1, len(order)):  # a darker line where a new notebook starts
        if order[j][:2] != order[j - 1][:2]:
            ax.axvline(j - 0.5, color="#555555", linewidth=1)
    ax.legend(handles=[Patch(color=PALETTE[0], label="solved"),
                       Line2D([], [], marker="x", color=PALETTE[3], markerfacecolor="#F3D9A4", linestyle="",
                              label="tried, not solved"),
                       Patch(facecolor="#ffffff", edgecolor="#999999", label="not tried")],
              loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, frameon=False)
    ax.set_xlabel("exercise, in course order")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m haaw.course.class_progress",
                                     description="A class's haaw-progress.json files as one table and one figure.")
    parser.add_argument("files", nargs="+", type=Path, help="the learners' progress files")
    parser.add_argument("--out", type=Path, default=Path("."), help="where to write (default: this folder)")
    args = parser.parse_args(argv)
    learners, skipped = read_class(args.files)
    for line in skipped:
        print(line, file=sys.stderr)
    if not learners:
        print("No progress file could be read: nothing written.", file=sys.stderr)
        return 1
    order = course_order()
    args.out.mkdir(parents=True, exist_ok=True)
    written = [args.out / "class-progress.md", args.out / "class-progress.csv"]
    written[0].write_text(markdown(learners, order, skipped), encoding="utf-8")
    write_csv(written[1], learners, order)
    try:
        figure(args.out / "class-progress.png", learners, order)
        written.append(args.out / "class-progress.png")
    except ImportError:  # the tables need nothing but Python; the figure needs matplotlib
        print("No figure: it needs matplotlib (pip install matplotlib); the tables are written.", file=sys.stderr)
    print(f"{len(learners)} learner(s), {len(skipped)} note(s) on skipped files; wrote " + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
