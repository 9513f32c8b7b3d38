"""Files derived from the repository's own sources are never stale: scripts/regenerate.py --check says which are,
and what to run. A notebook's words change its section's minutes, so an edited notebook fails here until the
pages are rewritten."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check(root: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("nbformat")  # the course extra: scripts/measure_notebooks.py reads the notebooks with it
    return subprocess.run([sys.executable, str(root / "scripts" / "regenerate.py"), "--check"],
                          capture_output=True, text=True, timeout=120)


def test_every_derived_file_is_up_to_date():
    result = check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_notebook_edited_without_regenerating_is_named_with_the_command(tmp_path):
    for part in ("scripts", "docs", "notebooks"):
        shutil.copytree(ROOT / part, tmp_path / part)
    path = tmp_path / "notebooks" / "01_chain_rule.ipynb"
    nb = json.loads(path.read_text())
    markdown = next(c for c in nb["cells"][1:] if c["cell_type"] == "markdown")
    markdown["source"] = "".join(markdown["source"]) + " A few more words make a section a little longer to read."
    path.write_text(json.dumps(nb))
    result = check(tmp_path)
    assert result.returncode == 1
    assert "stale: docs/sections.md (run: python scripts/regenerate.py)" in result.stdout
