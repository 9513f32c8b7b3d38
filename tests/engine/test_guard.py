"""haaw/engine/guard.py, in the engine's own tests (the refusals of the exercises are in tests/course/test_shortcuts.py):
a function marked refusable at run time, refused inside ``refusing`` with its message written out by hand, and
still itself outside; its signature and ``unguarded`` see through the mark."""
import functools
import inspect
import sys
import sysconfig
from pathlib import Path

import pytest

import haaw
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


# --- who is calling: the guard reads where the calling code is written (a learner's file, haaw's, a library's) -----
# Code written "in" another file: compiled under that file's name, as the guard sees a frame of it. The tests' own
# file is a learner's (neither haaw's nor a library's).
HAAW = str(Path(haaw.__file__).resolve().parent)
LIBRARY = str(Path(sysconfig.get_paths()["stdlib"]).resolve())
COURSE = "/srv/a-course"  # a folder of course code, as except_from names one


def _calls_in(filename):
    """A function ``call(f, *args)`` that calls ``f(*args)``, written in ``filename``."""
    namespace = {}
    exec(compile("def call(f, *args):\n    return f(*args)\n", filename, "exec"), namespace)
    return namespace["call"]


def test_only_haaw_s_own_code_unwraps_while_something_is_refused():
    add, marked = _marked()
    from_haaw, from_a_library = _calls_in(f"{HAAW}/course/reader.py"), _calls_in(f"{LIBRARY}/somewhere.py")
    from_a_package = _calls_in("/opt/env/lib/python3.11/site-packages/tool/run.py")
    from_importlib = _calls_in("<frozen importlib._bootstrap>")
    with guard.refusing(["tests.other"]):
        with pytest.raises(guard.ShortcutRefused) as refused:
            guard.unguarded(marked)
        assert str(refused.value) == ("it unwraps the course's own code (guard.unguarded), to call what it was meant "
                                      "to compute itself: compute the result from the inputs you are given")
        assert from_haaw(guard.unguarded, marked) is add
        # a library between acts for the code that called it: haaw's, or the learner's
        assert from_haaw(from_a_library, guard.unguarded, marked) is add
        assert from_haaw(from_importlib, guard.unguarded, marked) is add
        assert from_haaw(from_a_package, guard.unguarded, marked) is add  # a package outside this environment's too
        for through in (from_a_library, from_a_package, from_importlib):
            with pytest.raises(guard.ShortcutRefused):
                through(guard.unguarded, marked)
    assert guard.unguarded(marked) is add  # nothing refused: anyone may


def test_unguarded_sees_through_a_bound_method_a_wrapper_and_stops_at_a_loop():
    class Optimizer:
        @guard.refusable("tests.step", "the test's own step (tests.step)")
        def step(self):
            return self

    optimizer = Optimizer()
    step = guard.unguarded(optimizer.step)
    with guard.refusing(["tests.step"]):
        with pytest.raises(guard.ShortcutRefused, match=r"the test's own step \(tests.step\)"):
            optimizer.step()
        assert step() is optimizer  # the method itself, bound to the same optimizer
    add, marked = _marked()
    assert guard.unguarded(functools.wraps(marked)(lambda *a: marked(*a))) is add  # through __wrapped__, then the mark
    assert inspect.unwrap(marked) is marked  # the mark keeps no __wrapped__ that would call the function unrefused

    class Loop:
        pass

    loop = Loop()
    loop.__wrapped__ = loop
    assert guard.unguarded(loop) is loop


def test_a_mark_keeps_the_name_and_marks_a_built_in_without_a_signature():
    add, marked = _marked()
    assert (marked.__name__, marked.__doc__) == ("add", None)
    marked_print = guard.refusable("tests.print", "the test's print")(print)
    assert marked_print.__name__ == "print" and guard.unguarded(marked_print) is print


def test_the_course_s_own_code_may_call_what_it_refuses_unless_a_learner_s_code_called_it():
    """``except_from``: a course's wrong version calls the reference with a mistake switched on; called by haaw's
    code (the checker, the engine) it may, called by a learner's it may not, and nothing else may, haaw's included."""
    def reference(x):
        return 2 * x

    marked = guard.refusable("tests.reference", "the test's reference", except_from=COURSE)(reference)
    in_the_course, deeper_in_the_course = _calls_in(f"{COURSE}/wrong.py"), _calls_in(f"{COURSE}/nb/wrong.py")
    from_haaw = _calls_in(f"{HAAW}/course/exercises/code.py")
    with guard.refusing(["tests.reference"]):
        assert from_haaw(in_the_course, marked, 3) == 6
        assert from_haaw(in_the_course, deeper_in_the_course, marked, 3) == 6
        for refused in ([marked, 3], [in_the_course, marked, 3], [in_the_course, deeper_in_the_course, marked, 3],
                        [from_haaw, marked, 3]):
            with pytest.raises(guard.ShortcutRefused, match="the test's reference"):
                refused[0](*refused[1:])
    assert marked(3) == 6


# --- refusing: a block, nested, undone ---------------------------------------------------------------------------
def test_blocks_add_up_and_each_takes_back_only_what_it_added_even_on_an_error():
    guard.refusable("tests.a", "the test's a")(len)
    guard.refusable("tests.b", "the test's b")(len)

    def refused():
        return {n for n in ("tests.a", "tests.b") if _is_refused(n)}

    with guard.refusing(n for n in ["tests.a"]):  # any iterable of names
        with pytest.raises(KeyError), guard.refusing(["tests.b"]):
            assert refused() == {"tests.a", "tests.b"}
            raise KeyError
        assert refused() == {"tests.a"}
    assert refused() == set()


def _is_refused(name):
    try:
        guard.check(name)
    except guard.ShortcutRefused:
        return True
    return False


# --- PyTorch's versions ------------------------------------------------------------------------------------------
def test_without_pytorch_imported_its_versions_refused_are_nothing_to_do(monkeypatch):
    """Every check refuses PyTorch's autograd (guard.BACKWARD); a learner who never imported PyTorch has none to
    refuse, and the check neither imports it nor needs it."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with guard.refusing(guard.BACKWARD):
        assert "torch" not in sys.modules and _is_refused("torch.autograd")
    assert "torch" not in sys.modules


@pytest.fixture
def torch(monkeypatch):
    """PyTorch, with the guard's two modes built afresh for the test, as the first check of a process builds them
    (else the classes a process keeps would be the ones tested, whichever test built them)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(guard, "_function_mode", guard._make_function_mode)
    monkeypatch.setattr(guard, "_kernel_mode", guard._make_kernel_mode)
    return torch


def test_pytorch_s_autograd_refused_means_gradients_off_and_its_backward_refused_but_arithmetic_runs(torch):
    a, b = torch.ones(2), torch.full((2,), 3.0)
    with guard.refusing(["tests.other", "torch.autograd"]):
        assert not torch.is_grad_enabled()
        assert torch.add(a, b, alpha=2).tolist() == [7.0, 7.0]  # keyword arguments reach the operator
        assert torch.sum(torch.stack([a, b]), dim=0).tolist() == [4.0, 4.0]
        x = torch.ones(2, requires_grad=True)
        for backward in (lambda: (x * 2).sum().backward(), lambda: torch.autograd.grad((x * 2).sum(), x),
                         lambda: torch.ops.aten.tanh_backward(a, b)):  # a kernel called by name
            with pytest.raises(guard.ShortcutRefused, match="it calls PyTorch's autograd"):
                backward()
        with pytest.raises(guard.ShortcutRefused, match="it calls PyTorch's autograd"), torch.enable_grad():
            torch.tanh(x)  # switched back on: every graph recorded is for autograd
    assert torch.is_grad_enabled()
    x = torch.ones(2, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_another_part_of_pytorch_refused_leaves_gradients_and_kernels_alone(torch):
    x = torch.ones(2, requires_grad=True)
    with guard.refusing(["torch.clip_grad_norm_"]):
        assert torch.is_grad_enabled()
        (x * 2).sum().backward()
        assert torch.ops.aten.tanh_backward(torch.ones(1), torch.zeros(1)).tolist() == [1.0]
        x.grad = torch.full((2,), 3.0)
        with pytest.raises(guard.ShortcutRefused, match=r"it calls PyTorch's clip_grad_norm_ \(torch.nn.utils\)"):
            torch.nn.utils.clip_grad_norm_([x], 1.0)
    assert float(torch.nn.utils.clip_grad_norm_([x], 1.0)) == pytest.approx(18 ** 0.5)


def test_one_of_pytorch_s_kernels_called_by_its_name_is_refused(torch):
    scale, steps = torch.tensor([8.0]), torch.tensor([0], dtype=torch.int32)
    with guard.refusing(["torch.amp.GradScaler"]), pytest.raises(guard.ShortcutRefused, match="PyTorch's GradScaler"):
        torch._amp_update_scale_(scale, steps, torch.tensor([0.0]), 2.0, 0.5, 1)


def test_a_torch_call_is_refused_from_inside_the_refused_part_of_pytorch_but_not_from_above_the_block(torch):
    """The part of PyTorch a torch call is made from is read from the frames between it and the block; what called
    the block is not the learner's code."""
    root = str(Path(torch.__file__).resolve().parent)
    from_clip_grad, from_clip_grad_on_windows = (_calls_in(f"{root}/nn/utils/clip_grad.py"),
                                                 _calls_in(f"{root}/nn\\utils\\clip_grad.py"))

    def arithmetic_in_a_block():
        with guard.refusing(["torch.clip_grad_norm_"]):
            return (torch.ones(2) * 3).tolist()

    assert from_clip_grad(arithmetic_in_a_block) == [3.0, 3.0]
    with guard.refusing(["torch.clip_grad_norm_"]):
        assert (torch.ones(2) * 3).tolist() == [3.0, 3.0]
        for inside in (from_clip_grad, from_clip_grad_on_windows):
            with pytest.raises(guard.ShortcutRefused, match="PyTorch's clip_grad_norm_"):
                inside(lambda: torch.ones(2) * 3)
    with guard.refusing(["torch.func"]):  # another part refused: clip_grad.py may call torch
        assert from_clip_grad(lambda: (torch.ones(2) * 3).tolist()) == [3.0, 3.0]


def test_pytorch_s_does_not_require_grad_error_says_its_autograd_is_refused(torch):
    """A backward PyTorch runs without the mode seeing it fails for want of gradients (they are off): the learner
    is told why they were off, at their own line."""
    def backward_without_gradients():
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")

    with pytest.raises(guard.ShortcutRefused) as refused, guard.refusing(["torch.autograd"]):
        backward_without_gradients()
    assert str(refused.value) == guard._message("torch.autograd")
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
    assert "backward_without_gradients" in {entry.name for entry in refused.traceback}
    for names in (["torch.func"], ["tests.other"]):  # PyTorch's autograd not refused: the error is the learner's own
        with pytest.raises(RuntimeError, match="does not require grad") as error, guard.refusing(names):
            backward_without_gradients()
        assert type(error.value) is RuntimeError
    other = RuntimeError("mat1 and mat2 shapes cannot be multiplied")
    with pytest.raises(RuntimeError) as error, guard.refusing(["torch.autograd"]):
        raise other
    assert error.value is other
