"""Wrong code written the way learners write it, none of it from the checkers' lists of named mistakes: each
is rejected, and an in-place change of an input stops at the learner's line, in check() and in the engine."""
import inspect
import math

import numpy as np
import pytest

from haaw import Tensor
from haaw.course.editions import course_notebooks
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import plugins
from haaw.engine import guard


UNBROADCAST = guard.unguarded(REGISTRY["03-unbroadcast"].reference)  # fetched here: refused inside check


def pow_divides_by_a(a, n):
    out = a**n
    return out, (n * out / a,)  # right everywhere but a = 0


def backward_by_the_engine(root):
    root.backward()


def unbroadcast_first_stretched_axis_only(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, (want, have) in enumerate(zip(shape, g.shape)):
        if want == 1 and have != 1:
            return g.sum(axis=axis, keepdims=True)
    return g


def unbroadcast_in_place(g, shape):
    g -= 0.0  # "just to be sure it is a float array"
    return UNBROADCAST(g, shape)


def tanh_backward_in_place(y, G):
    G *= 1 - y * y
    return G


def softmax_backward_in_place(s, G):
    G -= np.sum(G * s, axis=-1, keepdims=True)
    G *= s
    return G


def attention_scaled_by_the_values(Q, K, V, mask, G):
    source = REGISTRY["05-attention-backward"].solution  # the solution learners see, with 1/√d_v for 1/√d_k
    assert "scale = Q.shape[-1] ** -0.5" in source
    namespace = {"np": np}
    exec(source.replace("scale = Q.shape[-1] ** -0.5", "scale = V.shape[-1] ** -0.5"), namespace)
    return namespace["attention_backward"](Q, K, V, mask, G)


def update_scale_never_below_one(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        return max(scale * backoff_factor, 1.0), 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


def add_flat(a, b):
    return a + b, 1.0, 1.0  # the derivatives not in a tuple of their own


def add_like_subtraction(a, b):
    return a + b, (1.0, -1.0)


def add_counts_both_inputs_twice(a, b):
    return a + b, (2.0, 2.0)


def tanh_sech_not_squared(a):
    return math.tanh(a), (1 / math.cosh(a),)


def tanh_is_tan(a):
    t = math.tan(a)
    return t, (1 + t * t,)


def tanh_of_the_square(a):
    return math.tanh(a), (1 - math.tanh(a * a),)


def exp_one_lower(a):
    return math.exp(a), (math.exp(a - 1),)


def exp_with_a_rounded_e(a):
    e = 2.718**a
    return e, (e,)


def exp_no_tuple(a):
    e = math.exp(a)
    return e, e


@pytest.mark.parametrize("key, fn, words", [
    ("01-pow-local", pow_divides_by_a, "a = 0"),
    ("02-add-local", add_flat, "return two things"),
    ("02-add-local", add_like_subtraction, "d(a+b)/db: wrong values"),
    ("02-add-local", add_counts_both_inputs_twice, "d(a+b)/da: wrong values"),
    ("02-tanh-local", tanh_sech_not_squared, "d(tanh a)/da: wrong values"),
    ("02-tanh-local", tanh_is_tan, "tanh a: wrong values"),
    ("02-tanh-local", tanh_of_the_square, "d(tanh a)/da: wrong values"),
    ("02-exp-local", exp_one_lower, "d(eᵃ)/da: wrong values"),
    ("02-exp-local", exp_with_a_rounded_e, "eᵃ: wrong values"),
    ("02-exp-local", exp_no_tuple, "a tuple of 1 local derivative"),
    ("02-backward", backward_by_the_engine, "it calls the engine's backward"),
    ("03-unbroadcast", unbroadcast_first_stretched_axis_only, "two stretched axes"),
    ("03-unbroadcast", unbroadcast_in_place, "changes one of its inputs in place, at line"),
    ("04-tanh-backward", tanh_backward_in_place, "G = G * ..., not G *= ..."),
    ("05-softmax-backward", softmax_backward_in_place, "changes one of its inputs in place"),
    ("05-attention-backward", attention_scaled_by_the_values, "d_k = 4, values of d_v = 2"),
    ("07-update-scale", update_scale_never_below_one, "below 1"),
])
def test_wrong_code_is_rejected_and_says_where(key, fn, words):
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message  # none of these is one of the named mistakes


def test_the_references_still_pass_with_read_only_inputs():
    for key, ex in REGISTRY.items():
        if hasattr(ex, "reference"):
            assert check(key, guard.unguarded(ex.reference)).status == CORRECT, key


def test_in_the_engine_an_in_place_change_of_an_input_is_refused_not_spread():
    """Plugged in without its check (haaw.use), in-place code stops with the slot's name, and the engine's own
    upstream gradient is left as it was."""
    x = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    with plugins.use(tanh=tanh_backward_in_place):  # the slot in use at the forward pass is the one backward calls
        y = x.tanh()
        with pytest.raises(RuntimeError, match=r"your tanh_backward_in_place \(in the engine's 'tanh' slot\) changed "
                                               r"one of its inputs in place"):
            (y * 3.0).sum().backward()
    np.testing.assert_array_equal(y.data, np.tanh(x.data))  # what its backward saved was not changed
    y = x.tanh()
    (y * 3.0).sum().backward()  # afterwards the engine's own: nothing was corrupted
    np.testing.assert_allclose(x.grad, 3.0 * (1 - np.tanh(x.data) ** 2), rtol=1e-15)


def test_a_named_mistake_is_not_accepted_because_of_how_it_was_typed():
    for typed in ("2.00", 2.0, "2"):
        feedback = check("04-residual", typed)
        assert feedback.status == WRONG and "only the skip path" in feedback.message, typed
    assert check("04-residual", "2.002").status == CORRECT


def backward_that_never_walks(root):
    root.grad = 1.0  # the seed is there; the order stays empty
    order = []
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def backward_peeking(root):
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack[-1]  # looked at, never popped
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node._parents)
        order.append(node)
    root.grad = 1.0


def test_a_diagnosis_looks_at_its_premise_before_naming_it():
    feedback = check("02-backward", backward_that_never_walks)
    assert feedback.status == WRONG and "no seed" not in feedback.message, feedback.message


@pytest.mark.slow  # it waits for the time limit
def test_the_time_limit_says_what_it_saw_without_guessing_one_cause(monkeypatch):
    from haaw.course.exercises import code as code_module

    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    message = check("02-backward", backward_peeking).message
    assert "took longer than 0.3 s" in message and "never ends" in message and "or each step is slow" in message


def _checkpoint_variant(old, new):
    from haaw import Tensor, no_grad  # noqa: F401  (the class's source uses them)
    from haaw.engine import Function  # noqa: F401

    source = inspect.getsource(guard.unguarded(REGISTRY["06-checkpoint"].reference)).replace(old, new)
    namespace = {"Tensor": Tensor, "no_grad": no_grad, "Function": Function, "np": np}
    exec(source, namespace)
    return namespace["CheckpointSegment"]


def test_a_checkpoint_backward_with_its_gradients_swapped_is_told_so_not_misnamed():
    swapped = _checkpoint_variant("return None, x.grad", "return x.grad, None")
    feedback = check("06-checkpoint", swapped)
    assert feedback.status == WRONG and "argument 0 of forward, which is not a Tensor" in feedback.message, \
        feedback.message
    assert "This looks like" not in feedback.message


def test_a_checkpoint_forward_that_returns_nothing_is_told_so():
    nothing = _checkpoint_variant("return out.data", "out.data")
    feedback = check("06-checkpoint", nothing)
    assert feedback.status == WRONG and "forward returned None" in feedback.message, feedback.message


@pytest.mark.parametrize("keep", ["[x, out.data]", "{'x': x, 'out': out.data}"])
def test_a_checkpoint_that_keeps_its_output_in_a_list_or_dict_is_caught_and_counted(keep):
    keeps = _checkpoint_variant("ctx.fn, ctx.x = fn, x ", f"ctx.fn, ctx.x, ctx.kept = fn, x, {keep}\n        #")
    feedback = check("06-checkpoint", keeps)
    assert feedback.status == WRONG and "bytes kept by the forward pass" in feedback.message, feedback.message


def test_the_memory_tracker_counts_arrays_inside_lists_and_dicts_once_each():
    from haaw.tools.memory import saved_arrays

    a, b, c = np.ones(3), np.ones(4), np.ones(5)
    assert [x.size for x in saved_arrays([a, [b, {"k": c}], (a,)])] == [3, 4, 5]


def ring_that_sends_but_sums_locally(buffers, send):
    n = len(buffers)
    chunks = [np.array_split(b, n) for b in buffers]
    for step in range(2 * (n - 1)):  # the right traffic on the wire...
        send([chunks[i][(i - step) % n] for i in range(n)])
    total = np.sum(buffers, axis=0)  # ...and a sum no worker could make
    return [total.copy() for _ in buffers]


def test_a_ring_whose_workers_ignore_what_they_receive_is_refused():
    feedback = check("09-ring-all-reduce", ring_that_sends_but_sums_locally)
    assert feedback.status == WRONG and "does not depend on what it received" in feedback.message, feedback.message


def test_a_cell_that_compares_a_learner_s_function_uses_its_exercise_s_tolerance():
    """"✓ Correct" from check() is never followed by "WRONG" for the same function in a later cell."""
    import json
    import re
    from pathlib import Path

    from haaw.course.exercises.code import _exercise_for

    seen = 0
    for path in course_notebooks(Path(__file__).resolve().parents[2] / "notebooks"):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            keys = re.findall(r"pick\(\"([^\"]+)\"", source) + [
                _exercise_for(slot).key for slot in re.findall(r"yours\((\w+)=", source) if _exercise_for(slot)]
            for key in keys:
                for call in re.findall(r"compare\((?:[^()]|\([^()]*(?:\([^()]*\))?[^()]*\))*\)", source):
                    seen += 1
                    rtol = re.search(r"rtol=([0-9.e-]+)", call)
                    assert rtol and float(rtol.group(1)) == REGISTRY[key].rtol, (path.name, key, call)
    assert seen >= 4


def test_the_audit_accepts_what_the_exercise_accepts():
    from haaw.course import nb08
    from haaw.tools.audit import audit

    def off_by_a_little(losses, mask):  # within the exercise's 1e-6, as a float32 step can be
        return (losses * mask).sum() / mask.sum() * (1 + 5e-7)

    assert check("08-repair-step", off_by_a_little).status == CORRECT
    assert audit(nb08.make_model(), nb08.token_losses, off_by_a_little, nb08.padded_batch()).ok


def test_calling_the_course_s_own_version_is_not_writing_it():
    import haaw.engine.ops as ops
    from haaw.course import nb08, nb09

    cases = [("03-unbroadcast", lambda g, shape: ops.unbroadcast(g, shape), "the engine's unbroadcast"),
             ("08-repair-step", lambda losses, mask: nb08.masked_mean(losses, mask), "the course's own masked_mean"),
             ("09-ring-all-reduce", lambda buffers, send: nb09.ring_all_reduce(buffers)[0],
              "the course's ring_all_reduce")]
    for key, fn, name in cases:
        feedback = check(key, fn)
        assert feedback.status == WRONG and f"is not its own work: it calls {name}" in feedback.message, key
    assert ops.unbroadcast(np.ones((2, 3)), (3,)).tolist() == [2.0, 2.0, 2.0]  # outside a check it runs as ever


def test_a_mistyped_slot_says_it_does_not_exist():
    from haaw.course.exercises import yours

    with pytest.raises(TypeError, match="yours\\(\\): there is no slot called 'tanhh'; the slots are: .*tanh"):
        with yours(tanhh=tanh_backward_in_place):
            pass


def test_a_norm_returned_as_an_array_of_one_is_told_to_be_a_number():
    def clip(grads, max_norm):
        grads = list(grads)
        norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
        return [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads], np.array([norm])

    message = check("04-clip-grad-norm", clip).message
    assert "return one plain number" in message and "a gradient has the shape" not in message


def test_clipped_gradients_returned_as_a_generator_are_told_to_be_a_list():
    def clip(grads, max_norm):
        norm = float(np.sqrt(sum(np.sum(g**2) for g in grads)))
        return (g * min(1.0, max_norm / (norm + 1e-6)) for g in grads), norm

    message = check("04-clip-grad-norm", clip).message
    assert "a generator: put the expression in [ ] to make a list" in message and "got tuple" not in message


# --- the initialisation rule: wrong code of our own, rejected and never misnamed; right code in its usual forms ---


def init_std_len_for_fan_in(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / len(shape))  # the number of axes, not of inputs


def init_std_over_every_weight(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / (shape[0] * shape[1]))


def init_std_integer_division(shape, nonlinearity):
    return ((2 if nonlinearity == "relu" else 1) // shape[0]) ** 0.5  # 0 for every fan-in above 2


def init_std_mixed_fans(shape, nonlinearity):
    if nonlinearity == "relu":
        return np.sqrt(2.0 / shape[0])
    return np.sqrt(1.0 / shape[1])  # right for ReLU, fan-out for the linear layer


def init_std_draws_the_matrix(shape, nonlinearity):
    return np.random.default_rng(0).normal(0.0, np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / shape[0]), shape)


def init_std_measured_from_a_draw(shape, nonlinearity):
    return init_std_draws_the_matrix(shape, nonlinearity).std()  # close, but a sample is not the rule


@pytest.mark.parametrize("fn, words", [
    (init_std_len_for_fan_in, "std: wrong values"),
    (init_std_over_every_weight, "std: wrong values"),
    (init_std_integer_division, "std: wrong values"),
    (init_std_mixed_fans, "'linear'"),
    (init_std_draws_the_matrix, "must have shape ()"),
    (init_std_measured_from_a_draw, "std: wrong values"),
])
def test_wrong_initialisation_code_is_rejected_and_not_misnamed(fn, words):
    feedback = check("04-init-std", fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message


def test_a_case_sensitive_nonlinearity_is_named_as_the_forgotten_2():
    def init_std(shape, nonlinearity):  # "ReLU" never matches "relu": every layer gets the linear rule
        return np.sqrt((2.0 if nonlinearity == "ReLU" else 1.0) / shape[0])

    feedback = check("04-init-std", init_std)
    assert feedback.status == WRONG and "This looks like the 2 for ReLU forgotten" in feedback.message


def test_the_initialisation_rule_is_accepted_in_the_forms_people_write():
    import math

    def with_math(shape, nonlinearity):
        fan_in, fan_out = shape
        gain = math.sqrt(2) if nonlinearity == "relu" else 1
        return gain / math.sqrt(fan_in)

    def in_float32(shape, nonlinearity):
        return np.float32(np.sqrt((2 if nonlinearity == "relu" else 1) / shape[0]))

    def as_an_array(shape, nonlinearity):
        return np.asarray((2.0 if nonlinearity == "relu" else 1.0) / shape[0]) ** 0.5

    def as_a_power(shape, nonlinearity):
        return ({"relu": 2, "linear": 1}[nonlinearity] / shape[0]) ** 0.5

    forms = [with_math, in_float32, as_an_array, as_a_power]
    torch = None
    try:
        import torch
    except ImportError:
        pass
    if torch is not None:
        def with_torch_gain(shape, nonlinearity):
            return torch.nn.init.calculate_gain(nonlinearity) / math.sqrt(shape[0])

        def as_a_torch_tensor(shape, nonlinearity):
            return torch.tensor((2.0 if nonlinearity == "relu" else 1.0) / shape[0], dtype=torch.float64).sqrt()

        forms += [with_torch_gain, as_a_torch_tensor]
    for fn in forms:
        feedback = check("04-init-std", fn)
        assert feedback.status == CORRECT, (fn.__name__, feedback.message)
