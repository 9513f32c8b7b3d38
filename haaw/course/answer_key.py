"""The answer key for instructors, written from the exercises themselves (never copied by hand).

    python -m haaw.course.answer_key docs/answer-key.md

Every exercise in notebook order: its question, the answer its checker expects (with the other forms it
accepts), and for a code exercise the reference the checker runs. A test keeps docs/answer-key.md equal to
what this writes. The Binder image, which is the learners', leaves the file out.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import numpy as np

HEADER = """# Answer key

For instructors: every exercise of the course, in notebook order, with the answer its checker expects.
Written by `python -m haaw.course.answer_key docs/answer-key.md` from the exercises themselves; do not edit
by hand (a test compares the two). Learners on Binder do not get this file.
"""


def _number(value) -> str:
    value = float(value)
    return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else repr(value)


def _answer(ex) -> list[str]:
    from .exercises.code import CodeExercise
    from .exercises.core import ArrayExercise, BugExercise, ChoiceExercise

    if isinstance(ex, BugExercise):
        return [f"Answer: line **{ex.line}**, **{ex.explanation}**: `{ex.answer!r}`."]
    if isinstance(ex, CodeExercise):
        return [f"Write `{ex.signature}`. The checker's reference:", "", "```python",
                textwrap.dedent(ex.solution).rstrip(), "```"]
    if isinstance(ex, ChoiceExercise):
        words = ex.answer if isinstance(ex.answer, (tuple, list)) else (ex.answer,)
        return [f"Answer in words: **{words[0]}**" + (f" (also read: {', '.join(words[1:])})" if len(words) > 1 else "")
                + "."]
    if isinstance(ex, ArrayExercise):
        shown = np.array2string(ex.answer, precision=6, suppress_small=True, separator=", ")
        return ["Answer (an array):", "", "```", shown, "```"]
    lines = [f"Answer: **{_number(ex.answer)}**."]
    if ex.forms:
        lines[0] += " Also accepted as typed: " + ", ".join(f"`{f}`" for f in ex.forms) + "."
    return lines


def render() -> str:
    from .exercises import REGISTRY

    parts, current = [HEADER], None
    for key in sorted(REGISTRY, key=lambda k: (k[:2], list(REGISTRY).index(k))):
        ex = REGISTRY[key]
        if key[:2] != current:
            current = key[:2]
            parts.append(f"## Notebook {current}")
        kind = "code" if hasattr(ex, "reference") else "answer"
        parts.append("\n".join([f"### `{key}` ({kind})", "", ex.question.strip(), "", *_answer(ex)]))
    return "\n\n".join(parts) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the course's answer key.")
    parser.add_argument("out", type=Path, help="the Markdown file to write (docs/answer-key.md)")
    args = parser.parse_args(argv)
    args.out.write_text(render())
    print(f"wrote the answer key to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
