"""Exercises with instant, targeted feedback: ``check(key, answer)``, ``hint(key)``, ``solution(key)``."""
from . import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10  # noqa: F401  (registers the exercises)
from .core import REGISTRY, Feedback, check, hint, solution

__all__ = ["REGISTRY", "Feedback", "check", "hint", "solution"]
