"""The repository stands on its own: no tracked file points a reader at something they cannot open, such as the
maintainers' issue tracker by number ("issue 33") or a folder outside the repository."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\bissues? #?\d+\b|\bissues show\b|\.\./shared\b", re.IGNORECASE)


def places(text: str) -> list[str]:
    return [match.group(0) for match in OUTSIDE.finditer(text)]


@pytest.mark.parametrize("text, found", [
    ("Its targets come from issue 36: a step", ["issue 36"]),
    ("# --- the kinks (mutation testing, Issue 33) ---", ["Issue 33"]),
    ("see ../shared/STYLE.md", ["../shared"]),
    ("an issue tracker, 12 issues in all", []),
])
def test_a_reference_to_an_issue_or_an_outside_folder_is_found(text, found):
    assert places(text) == found


def test_no_tracked_file_refers_to_an_issue_by_number_or_to_a_folder_outside():
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".ipynb", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".sh", ""} \
                or not path.is_file() or name == "tests/repo/test_standalone.py":
            continue
        text = path.read_text(errors="replace")
        found += [f"{name}: {where!r}" for where in places(text)]
    assert found == []
