"""The exercises' registry and the two types every checker shares: an ``Exercise`` and the ``Feedback`` on an
answer. It imports nothing else of the course, so that the checkers (core.py for answers, code.py for code)
and the progress file all build on it without importing each other in a circle."""
from __future__ import annotations

from dataclasses import dataclass, field

CORRECT, WRONG, NOT_ATTEMPTED, UNREADABLE = "correct", "wrong", "not attempted", "unreadable"


@dataclass(frozen=True)
class Feedback:
    """What ``check`` says: a status for code, a message for the learner (and a table, in JupyterLab)."""

    status: str
    message: str
    html: str = ""

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self):
        return self.html or None


@dataclass
class Exercise:
    key: str
    question: str
    answer: object  # a number, or a NumPy array
    mistakes: object = field(default_factory=dict)  # {wrong number: hint}, or ((wrong array, hint), ...)
    hints: tuple = ()  # tiered: each one gives a little more away
    solution: str = ""
    rtol: float = 1e-9  # relative: a count of 1,000,000 is not 999,999
    data: dict = field(default_factory=dict)  # arrays the question is about, for the notebook
    choices: tuple = ()  # for an answer in words: every word the checker understands
    forms: tuple = ()  # other ways a learner may correctly write the answer (all must be accepted)

    def mistake_pairs(self) -> list:
        return list(self.mistakes.items() if isinstance(self.mistakes, dict) else self.mistakes)


REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    REGISTRY[exercise.key] = exercise
    return exercise


def _lookup(key) -> Exercise | None:
    return REGISTRY.get(key) if isinstance(key, str) else None


def _unknown(key) -> str:
    known = ", ".join(sorted(REGISTRY))
    return f"There is no exercise called {key!r}. The exercises are: {known}."
