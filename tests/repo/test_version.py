"""The version is written once, in pyproject.toml: ``haaw.__version__`` reads it (from the installed metadata, or
from pyproject.toml in a source tree never installed), and CITATION.cff, which cannot read it, must agree."""
import importlib.metadata
import re
import tomllib
from pathlib import Path

import haaw

ROOT = Path(haaw.__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_haaw_version_is_pyproject_s():
    assert haaw.__version__ == VERSION, "the installed metadata is stale: install again (pip install -e .)"


def test_a_source_tree_never_installed_reads_pyproject(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert haaw.__version__ == VERSION


def test_the_citation_gives_pyproject_s_version():
    citation = ROOT / "CITATION.cff"
    if not citation.exists():
        return
    found = re.findall(r"^version:\s*[\"']?([^\"'\s#]+)", citation.read_text(), flags=re.MULTILINE)
    assert found == [VERSION], f"CITATION.cff says version {found}, pyproject.toml {VERSION}"


def test_no_module_of_haaw_writes_the_version_again():
    again = [str(p.relative_to(ROOT)) for p in (ROOT / "haaw").rglob("*.py") if f'"{VERSION}"' in p.read_text()
             or f"'{VERSION}'" in p.read_text()]
    assert not again, f"the version {VERSION} is written again in {again}: read haaw.__version__ instead"
