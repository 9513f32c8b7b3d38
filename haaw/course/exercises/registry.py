"""The exercises' registry and the two types every checker shares: an ``Exercise`` and the ``Feedback`` on an
answer. It imports nothing else of the course, so that the checkers (core.py for answers, code.py for code)
and the progress file all build on it without importing each other in a circle."""
from __future__ import annotations

import os
from dataclasses import dataclass

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


@dataclass(kw_only=True)
class Exercise:
    """What every exercise has. Its type says what an answer is and checks it: ``NumberExercise``,
    ``ArrayExercise``, ``ChoiceExercise`` and ``BugExercise`` (core.py), ``CodeExercise`` (code.py)."""

    key: str
    question: str
    hints: tuple = ()  # tiered: each one gives a little more away

    def check(self, answer) -> Feedback:
        """The verdict on ``answer``; it may raise, and ``core.check`` turns that into a message."""
        raise NotImplementedError

    def mistake_pairs(self) -> list:
        """(a wrong answer, or a mistake's name; why it is wrong), for every mistake the checker names."""
        raise NotImplementedError

    def worked_solution(self) -> str:
        raise NotImplementedError


REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    REGISTRY[exercise.key] = exercise
    return exercise


def lookup(key) -> Exercise | None:
    """The exercise called ``key``, or None (for a key that is no exercise, or not a string)."""
    return REGISTRY.get(key) if isinstance(key, str) else None


def unknown_message(key) -> str:
    """What ``check``, ``hint`` and ``solution`` say about a key that is no exercise: the keys there are."""
    known = ", ".join(sorted(REGISTRY))
    return f"There is no exercise called {key!r}. The exercises are: {known}."


def solutions_allowed() -> bool:
    """False when an instructor has switched solutions off (HAAW_SOLUTIONS=off)."""
    return os.environ.get("HAAW_SOLUTIONS", "on").strip().lower() not in ("off", "0", "no", "false")
