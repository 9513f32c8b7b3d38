"""Exercises with instant, targeted feedback: ``check(key, answer)``, ``hint(key)``, ``solution(key)``; and
``progress()``, the table of what you solved, kept in a file that survives a restart; ``mine(key, ...)``, your own
functions that passed, read back from that file (in a later notebook, or after a restart).

An answer is a number, an array, a few words, or, for code exercises, your function itself;
``yours(...)`` then runs a function that passed inside the engine.
"""
from . import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10  # noqa: F401  (registers the exercises)
from .code import CodeExercise, mine, passed, pick, yours
from .core import REGISTRY, ArrayExercise, BugExercise, ChoiceExercise, Feedback, NumberExercise, check, hint, solution
from .progress import progress

__all__ = ["REGISTRY", "ArrayExercise", "BugExercise", "ChoiceExercise", "CodeExercise", "Feedback", "NumberExercise", "check", "hint", "mine", "passed", "pick", "progress", "solution", "yours"]
