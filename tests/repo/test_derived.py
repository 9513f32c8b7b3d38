"""Files derived from the repository's own sources are never stale: scripts/regenerate.py --check says which are,
and what to run. A notebook's words change its section's minutes, so an edited notebook fails here until the
pages are rewritten."""
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("nbformat", reason="the sections page is counted from the notebooks, read with nbformat")
ROOT = Path(__file__).resolve().parents[2]


def check(root: Path, capsys) -> tuple[int, str]:
    """scripts/regenerate.py --check of the repository at root, in this process: (exit code, what it printed)."""
    spec = importlib.util.spec_from_file_location(f"regenerate_{abs(hash(root))}", root / "scripts" / "regenerate.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    capsys.readouterr()
    code = script.main(["--check"])
    return code, capsys.readouterr().out


def test_every_derived_file_is_up_to_date(capsys):
    code, said = check(ROOT, capsys)
    assert code == 0, said


def test_a_notebook_edited_without_regenerating_is_named_with_the_command(tmp_path, capsys):
    for part in ("scripts", "docs", "notebooks"):
        shutil.copytree(ROOT / part, tmp_path / part)
    path = tmp_path / "notebooks" / "01_chain_rule.ipynb"
    nb = json.loads(path.read_text())
    markdown = next(c for c in nb["cells"][1:] if c["cell_type"] == "markdown")
    markdown["source"] = "".join(markdown["source"]) + " A few more words make a section a little longer to read."
    path.write_text(json.dumps(nb))
    code, said = check(tmp_path, capsys)
    assert code == 1
    assert "stale: docs/sections.md (run: python scripts/regenerate.py)" in said
