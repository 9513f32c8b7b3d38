"""No term before its definition: docs/glossary.md names, for each of the course's terms, the core and the section
that define it, and the prose of the course is read in order to find any use that comes earlier.

What counts as a use: a word of a markdown cell's text, outside inline code, in a core before the section that
defines the term (or in an earlier core), or in a companion whose core comes before the defining one. What
does not: a notebook's "You will learn" list (it names what is coming), and the sections that point ahead on
purpose ("Checkpoint", "Going deeper", "Going further"). A notebook's introduction, under its title, is a part
like a section: it may define a term (its anchor is the title's), and it may name the topics its own sections
define.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from haaw.course.editions import course_notebooks

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
GLOSSARY = ROOT / "docs" / "glossary.md"
POINTING_AHEAD = ("Checkpoint", "Going deeper", "Going further")
ROW = re.compile(r"^\| \*\*(?P<term>[^*]+)\*\*(?: \((?P<also>[^)]*)\))? \| (?P<meaning>.+?) \| "
                 r"\[(?P<where>[^\]]+)\]\(\.\./notebooks/(?P<file>[^)#]+)#(?P<anchor>[^)]+)\) \|$")


def glossary(text: str) -> list[dict]:
    rows = [m.groupdict() for m in map(ROW.match, text.splitlines()) if m]
    for row in rows:
        row["forms"] = [row["term"], *[f.strip() for f in (row["also"] or "").split(",") if f.strip()]]
    return rows


def pattern(forms: list[str]) -> re.Pattern:
    """A term matches as a whole word, in the singular or plural; case matters only for names written with two or
    more capitals (MLP, LayerNorm, ZeRO)."""
    parts = []
    for form in forms:
        exact = sum(ch.isupper() for ch in form) >= 2
        words = r"\s+".join(map(re.escape, form.split()))  # a term may break across lines
        parts.append(("" if exact else "(?i:") + words + ("" if exact else ")"))
    return re.compile(r"(?<![\w-])(?:" + "|".join(parts) + r")(?:s|es)?(?![\w-])")


def sections(path: Path) -> list[tuple[str, str]]:
    """(heading, prose) of each part of a notebook, in order: its introduction (under the notebook's title, without
    the "You will learn" list) and then each "## " section; without inline code."""
    nb = nbformat.read(path, as_version=4)
    found = [("", "")]
    goals = False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in re.sub(r"`[^`]*`", " ", cell.source).splitlines():
            title, heading = re.match(r"^# (.+)$", line), re.match(r"^## (.+)$", line)
            goals = goals and (line.startswith(("- ", "  ")) or not line.strip())
            if "**You will learn**" in line:
                goals = True
            if title and found == [("", "")]:
                found = [(title.group(1).strip(), "")]  # a title names the topic; the introduction defines
            elif heading:
                found.append((heading.group(1).strip(), heading.group(1) + "\n"))  # a heading is a use too
            elif not goals:
                found[-1] = (found[-1][0], found[-1][1] + line + "\n")
    return found


def anchor(heading: str) -> str:
    return re.sub(r"\s", "-", heading.strip())


def early_uses(rows: list[dict], notebooks: list[Path]) -> list[str]:
    """Every use of a term before the section that defines it, as "where: term".

    A term a companion defines (its row points into deeper/) is one no core may use, outside the sections that
    point ahead; its own companion may use it from its section on, and any other companion only where it says
    what it means, in bold."""
    order = {p.name: i for i, p in enumerate(p for p in notebooks if p.parent.name != "deeper")}
    found = []
    for row in rows:
        in_companion = row["file"].startswith("deeper/")
        defining = row["file"].removeprefix("deeper/")
        match = pattern(row["forms"])
        for path in notebooks:
            core = path.name.replace("_deeper", "")
            if not in_companion and order[core] >= order[defining] + (path.parent.name != "deeper"):
                continue  # a core's term: the cores after it, and the companions of it and after it, may use it
            for i, (heading, prose) in enumerate(sections(path)):
                if path.name == defining and anchor(heading) == row["anchor"]:
                    break  # the definition: uses from here on are fine
                if path.parent.name == "deeper" and _defined_in_place(match, prose):
                    break  # a companion that needs a later core's term says what it means, in bold, where it uses it
                if path.name == defining and i == 0:
                    continue  # the defining notebook's introduction announces its topics
                if heading.startswith(POINTING_AHEAD) or not match.search(prose):
                    continue
                found.append(f"{path.name}, section {heading or '(before the first)'!r}: {row['term']!r} "
                             f"(defined in {row['file']}, {row['anchor']})")
    return found


def _defined_in_place(match: re.Pattern, prose: str) -> bool:
    """Does this part define the term, in bold or italics (**term**, *words around the term*)?"""
    marked = re.findall(r"\*\*(.+?)\*\*", prose, re.S) + re.findall(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", prose)
    return any(match.search(words) for words in marked)


def test_every_glossary_entry_points_to_a_section_of_a_core_that_uses_the_term():
    """Or of a companion, for the few terms only a companion needs (BatchNorm): early_uses keeps them out of the
    cores."""
    rows = glossary(GLOSSARY.read_text())
    assert len(rows) >= 30
    cores = {str(p.relative_to(NOTEBOOKS)): p for p in course_notebooks(NOTEBOOKS)}
    for row in rows:
        assert row["file"] in cores, f"{row['term']}: {row['file']} is not a notebook of the course"
        found = dict((anchor(h), prose) for h, prose in sections(cores[row["file"]]))
        assert row["anchor"] in found, f"{row['term']}: no section {row['anchor']} in {row['file']}"
        assert pattern(row["forms"]).search(found[row["anchor"]]), \
            f"{row['term']}: section {row['anchor']} of {row['file']} does not use the term it defines"


def test_no_term_is_used_before_a_core_defines_it():
    assert early_uses(glossary(GLOSSARY.read_text()), course_notebooks(NOTEBOOKS)) == []


def test_a_planted_forward_reference_is_found(tmp_path):
    (tmp_path / "deeper").mkdir()
    md = nbformat.v4.new_markdown_cell
    first = [md("# 01 · One"), md("## 1. Start\n\nA plain start."), md("## 2. Later\n\nHere a **frobnicator** is defined.")]
    later = [md("# 02 · Two"), md("## 1. More\n\nThe frobnicators again.")]
    for name, cells in (("01_one.ipynb", first), ("02_two.ipynb", later)):
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / name)
    rows = glossary("| **frobnicator** | a thing | [01 · 2. Later](../notebooks/01_one.ipynb#2.-Later) |")
    assert early_uses(rows, course_notebooks(tmp_path)) == []
    first[1] = md("## 1. Start\n\nA frobnicator, too soon.")  # planted: used one section before its definition
    nbformat.write(nbformat.v4.new_notebook(cells=first), tmp_path / "01_one.ipynb")
    assert early_uses(rows, course_notebooks(tmp_path)) == [
        "01_one.ipynb, section '1. Start': 'frobnicator' (defined in 01_one.ipynb, 2.-Later)"]
    first[1] = md("## 1. Start\n\nA plain start, and `frobnicator` as code.")  # inline code is not prose
    nbformat.write(nbformat.v4.new_notebook(cells=first), tmp_path / "01_one.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[md("# 00+"), md("## A\n\nA frobnicator.")]),
                   tmp_path / "deeper" / "00_zero_deeper.ipynb")  # a companion before the defining core
    (tmp_path / "00_zero.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[md("# 00")])))
    assert early_uses(rows, course_notebooks(tmp_path)) == [
        "00_zero_deeper.ipynb, section 'A': 'frobnicator' (defined in 01_one.ipynb, 2.-Later)"]
    nbformat.write(nbformat.v4.new_notebook(cells=[md("# 00+"), md("## A\n\nA **frobnicator** is a thing."),
                                                   md("## B\n\nThe frobnicator again.")]),
                   tmp_path / "deeper" / "00_zero_deeper.ipynb")  # a companion may define it in place, in bold
    assert early_uses(rows, course_notebooks(tmp_path)) == []


def test_a_term_a_companion_defines_is_kept_out_of_the_cores(tmp_path):
    """A companion's own term (BatchNorm, in 05+): no core may use it, nor another companion without defining it
    in place; its companion may, from the section that defines it."""
    (tmp_path / "deeper").mkdir()
    md = nbformat.v4.new_markdown_cell
    companion = [md("# 01+"), md("## Early\n\nNothing yet."), md("## Here\n\nA **widget** is a thing; widgets again.")]
    files = {"01_one.ipynb": [md("# 01 · One"), md("## 1. Start\n\nA plain start.")],
             "02_two.ipynb": [md("# 02 · Two"), md("## 1. More\n\nNo such thing here.")],
             "deeper/01_one_deeper.ipynb": companion}
    for name, cells in files.items():
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / name)
    rows = glossary("| **widget** | a thing | [01+ · Here](../notebooks/deeper/01_one_deeper.ipynb#Here) |")
    assert early_uses(rows, course_notebooks(tmp_path)) == []
    files["02_two.ipynb"][1] = md("## 1. More\n\nA widget, in a later core.")  # planted: a core uses it
    companion[1] = md("## Early\n\nA widget, before its section.")  # planted: too soon in its own companion
    for name in ("02_two.ipynb", "deeper/01_one_deeper.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(cells=files[name]), tmp_path / name)
    assert sorted(early_uses(rows, course_notebooks(tmp_path))) == [
        "01_one_deeper.ipynb, section 'Early': 'widget' (defined in deeper/01_one_deeper.ipynb, Here)",
        "02_two.ipynb, section '1. More': 'widget' (defined in deeper/01_one_deeper.ipynb, Here)"]
