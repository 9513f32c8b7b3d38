"""Progress a learner keeps: every ``check`` is written down in a small file beside the notebooks.

Passing an exercise is otherwise remembered only by the kernel, which a restart, a crash or Binder's
shutting down of idle kernels forgets. The file, ``haaw-progress.json`` in the folder the notebook
runs in (for a companion in ``deeper/``, the cores' folder), holds for each exercise its last verdict, whether it was ever solved and how many attempts
it took; ``progress()`` prints the table across notebooks. Beside a code exercise's verdict it keeps the
source of the function that passed, so that a later notebook, or the same one after a restart, can run your
own pieces again (``mine`` in code.py). Nothing leaves the machine: to hand it in,
download the file (in JupyterLab: right-click it in the file browser, Download).

The file names its learner, so that an instructor who collects a class's files knows whose each one is
(``python -m haaw.course.class_progress``): ``progress(name="Ada")`` once, or ``HAAW_LEARNER`` set where the
kernels run; the name is kept in the file. The first verdict written without a name says so, in one line, once.

``HAAW_PROGRESS`` names another file, or ``off`` to keep nothing (the test suite sets it).
"""
from __future__ import annotations

import inspect
import json
import os
import tempfile
import textwrap
import time
from pathlib import Path

from .registry import REGISTRY

FILE_NAME = "haaw-progress.json"
ASK_NAME = ('Whose progress is this? Say once: progress(name="Your Name") (or set HAAW_LEARNER); '
            "the name is kept in the progress file.")
_asked = False  # this kernel has said ASK_NAME (once, even where the file cannot be written)


def where() -> Path | None:
    """The progress file, or None when progress is switched off."""
    setting = os.environ.get("HAAW_PROGRESS", "")
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting)
    here = Path.cwd()
    if here.name == "deeper" and any(here.parent.glob("[0-9][0-9]_*.ipynb")):
        here = here.parent  # a companion shares its core's file: what passed in the core counts in both
    return here / FILE_NAME


def read(path: Path | None = None) -> dict:
    """The whole file: {"course": "haaw", "learner": name or None, "exercises": {...}}; {} if none or unreadable."""
    path = path or where()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("exercises", {}), dict) else {}


def load(path: Path | None = None) -> dict:
    """{exercise key: {"last": verdict, "solved": bool, "attempts": n, "when": unix time}}; {} if none or unreadable."""
    return read(path).get("exercises", {})


def _clean_name(name) -> str | None:
    """A learner's name as kept: one line of at most 80 characters, or None for no name."""
    if not isinstance(name, str):
        return None
    name = " ".join(name.split())[:80]
    return name or None


def learner(path: Path | None = None) -> str | None:
    """Whose progress this is: ``HAAW_LEARNER`` where set, else the name kept in the file, else None."""
    return _clean_name(os.environ.get("HAAW_LEARNER")) or _clean_name(read(path).get("learner"))


def record(key: str, status: str) -> None:
    """Write down one verdict. Never raises: a read-only folder must not break an exercise."""
    global _asked
    path = where()
    if path is None:
        return
    try:
        kept = read(path)
        exercises = kept.get("exercises", {})
        entry = exercises.get(key, {"solved": False, "attempts": 0})
        entry.update(last=status, solved=bool(entry.get("solved")) or status == "correct",
                     attempts=int(entry.get("attempts", 0)) + 1, when=round(time.time()))
        exercises[key] = entry
        name = learner(path)
        if name is None and "learner" not in kept and not _asked:
            print(ASK_NAME)  # once: the file then says "learner": null, which means "asked"
            _asked = True
        _write(path, exercises, name)
    except (OSError, ValueError, TypeError, AttributeError):
        pass


def _write(path: Path, exercises: dict, name: str | None) -> None:
    text = json.dumps({"course": "haaw", "learner": name, "exercises": dict(sorted(exercises.items()))}, indent=1)
    # written whole, then renamed over the old file: a kernel stopped halfway leaves the old file intact
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".haaw-progress-", suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    os.replace(temporary, path)


def keep_source(key: str, fn) -> None:
    """Beside a passed code exercise's verdict, the source of the function (or class) that passed. Never raises."""
    path = where()
    if path is None:
        return
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):  # typed at a prompt without a cell: nothing to keep
        return
    try:
        exercises = load(path)
        exercises.setdefault(key, {"solved": True, "attempts": 1, "last": "correct"})
        exercises[key].update(source=source, name=fn.__name__)
        _write(path, exercises, learner(path))
    except (OSError, ValueError, TypeError, AttributeError):
        pass


class Progress:
    """What ``progress()`` returns: a table, printed as text (and as HTML in JupyterLab)."""

    def __init__(self, rows: list, path: Path | None, name: str | None = None):
        self.rows, self.path, self.name = rows, path, name  # rows: (notebook, solved keys, tried keys, untouched keys)

    def __repr__(self) -> str:
        if self.path is None:
            return "Progress is not being kept (HAAW_PROGRESS=off)."
        whose = f"{self.name}'s progress" if self.name else 'Your progress (no name yet: progress(name="Your Name"))'
        lines = [f"{whose}, from {self.path}:",
                 f"{'notebook':<10}{'solved':>8}{'of':>4}   still open"]
        for notebook, solved, tried, untouched in self.rows:
            total = len(solved) + len(tried) + len(untouched)
            still = ", ".join([*(f"{k} (tried)" for k in tried), *untouched]) or "none: done"
            lines.append(f"{notebook:<10}{len(solved):>8}{total:>4}   {still}")
        done = sum(len(r[1]) for r in self.rows)
        lines.append(f"{'all':<10}{done:>8}{sum(len(r[1]) + len(r[2]) + len(r[3]) for r in self.rows):>4}")
        return "\n".join(lines)


def progress(name: str | None = None) -> Progress:
    """Every notebook's exercises: solved, tried, not yet tried (read from the progress file).

    ``name``, given once, is kept in the file: it says whose file it is when an instructor collects a class's."""
    path = where()
    if path is not None and _clean_name(name) is not None:
        try:
            _write(path, load(path), _clean_name(name))
        except (OSError, ValueError, TypeError):
            print(f"Could not keep the name: {path} cannot be written.")
    elif name is not None and path is not None:
        print("A name is a few words of text, e.g. progress(name=\"Ada Lovelace\"); nothing was kept.")
    kept = load(path) if path else {}
    notebooks: dict[str, list] = {}
    for key in REGISTRY:
        notebooks.setdefault(key[:2], []).append(key)
    rows = []
    for number, keys in sorted(notebooks.items()):
        solved = [k for k in keys if kept.get(k, {}).get("solved")]
        tried = [k for k in keys if k in kept and k not in solved]
        untouched = [k for k in keys if k not in kept]
        rows.append((f"{number}", solved, tried, untouched))
    return Progress(rows, path, learner(path) if path else None)
