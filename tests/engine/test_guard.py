"""haaw/engine/guard.py, in the engine's own tests (the refusals of the exercises are in tests/course/test_shortcuts.py):
a function marked refusable at run time, refused inside ``refusing`` with its message written out by hand, and
still itself outside; its signature and ``unguarded`` see through the mark."""
import inspect

import pytest

from haaw.engine import guard


def _marked():
    def add(a, b=2):
        return a + b

    return add, guard.refusable("tests.add", "the test's own add (tests.add)")(add)


def test_a_marked_function_is_refused_in_the_block_with_the_message_that_names_it_and_runs_outside():
    add, marked = _marked()
    assert marked(1) == 3
    with guard.refusing(["tests.add"]), pytest.raises(guard.ShortcutRefused) as refused:
        marked(1)
    assert str(refused.value) == (
        "it calls the test's own add (tests.add), which computes what this code is meant to compute. Calling it is "
        "not writing it (and from inside the engine it would call your function again): compute the result from the "
        "inputs you are given")
    assert marked(1, b=5) == 6  # the block is over


def test_the_mark_keeps_the_signature_and_unguarded_gives_the_function_back():
    add, marked = _marked()
    assert str(inspect.signature(marked)) == "(a, b=2)"
    assert guard.unguarded(marked) is add
    assert guard.unguarded(len) is len  # a built-in (no weak reference can be made to it) is returned as it is


def test_while_refusing_returns_a_class_or_a_function_with_nothing_to_refuse_as_it_is():
    class Layer:
        pass

    def f(x):
        return x

    assert guard.while_refusing(Layer, ["tests.add"]) is Layer
    assert guard.while_refusing(f, []) is f
    add, marked = _marked()
    calls_it = guard.while_refusing(lambda: marked(1), ["tests.add"])
    with pytest.raises(guard.ShortcutRefused):
        calls_it()
