"""Exercises of notebook 02: computation graphs and reverse mode."""
import collections
import math
import sys

import numpy as np

from ...engine import Value
from ...engine.forward_mode import Dual, gradient
from ...engine.graph import parents
from ...engine import guard
from .code import Case, CodeExercise, LearnerError, Mistake, learner_line
from .core import NumberExercise, register
from .domain import DRAWN, VALUES, Domain, scalar
from .nb01 import draws_two_numbers, numerical_slope, value_and_locals

register(NumberExercise(
    key="02-fan-out",
    question="x = 3, L = x·x + 4·x. What is dL/dx?",
    answer=10,
    mistakes={
        7: "7 counts x·x once. x enters that multiplication twice, and each entry contributes the other factor (3): 3 + 3 + 4.",
        6: "6 counts only the path through x·x. x also reaches L through 4·x, which contributes 4.",
        4: "4 counts only the path through 4·x. x·x contributes too.",
        21: "21 is L itself, the forward value.",
        9: "9 is x·x, a forward value, not a derivative.",
    },
    hints=("x is used three times: twice in x·x, once in 4·x. Each use sends its own contribution back.",
           "In x·x, each of the two entries contributes the other factor, x = 3. In 4·x, x contributes 4.",
           "Contributions from several uses are added."),
    solution="x·x contributes x + x = 6 (one per entry), 4·x contributes 4: dL/dx = 6 + 4 = 10 (= 2x + 4).",
))

register(NumberExercise(
    key="02-shared",
    question="A shared weight: w = 3, x = 2, h = w·x, L = w·h (the same w in both layers). dL/dw?",
    answer=12,
    mistakes={
        6: "6 is one use's contribution. w is used in both multiplications: add both (6 + 6).",
        18: "18 is L itself, the forward value.",
        36: "36 multiplies the two contributions; contributions from several uses are added.",
        2: "2 is x. Follow both uses of w back from L.",
    },
    hints=("L = w·h uses w directly (contribution h) and through h = w·x (contribution w·x).",
           "Evaluate each contribution at w = 3, x = 2 (h is what the forward pass computed), then add them.",),
    solution="Direct use: h = 6; through h: w · x = 6; the sum is 12 (check: L = w²x, dL/dw = 2wx = 12).",
))

register(NumberExercise(
    key="02-passes",
    question="A neuron has 8 weights and a bias, and one scalar loss. How many forward-mode passes "
             "give its whole gradient?",
    answer=9,
    mistakes={
        1: "1 is the number of backward passes reverse mode needs. Forward mode carries the derivative with "
           "respect to one parameter per pass.",
        2: "2 is one forward plus one backward pass: that is reverse mode.",
        8: "8 forgets the bias: it is a parameter too, and needs a pass of its own.",
        10: "10 adds a pass for the loss itself; forward mode computes the value alongside each derivative, "
            "in the same pass.",
        18: "Forward mode computes values and derivatives in the same pass: one pass per parameter, not two.",
    },
    hints=("Forward mode pushes d/dθ for one chosen parameter θ through the whole computation.",
           "One pass tells you how the loss moves when one parameter moves. Count the parameters: weights "
           "and bias."),
    solution="One pass per parameter: 8 weights + 1 bias = 9 forward-mode passes, against one forward and one "
             "backward pass in reverse mode.",
))


# --- code exercises: the rest of the scalar engine's table, +, tanh and exp ---------------------------


def add_local(a, b):
    """a + b, and its local derivatives: d(a+b)/da = 1, d(a+b)/db = 1."""
    return a + b, (1.0, 1.0)


def tanh_local(a):
    """tanh(a), and its local derivative, written with the output: d(tanh a)/da = 1 − tanh²(a)."""
    t = math.tanh(a)
    return t, (1.0 - t * t,)


def exp_local(a):
    """eᵃ, and its local derivative, which is eᵃ itself."""
    e = math.exp(a)
    return e, (e,)


register(CodeExercise(
    key="02-add-local",
    minutes=4,
    question="Write the scalar engine's addition: return a+b and its two local derivatives, "
             "d(a+b)/da and d(a+b)/db.",
    signature="add_local(a, b) -> (a+b, (d/da, d/db))",
    reference=add_local,
    cases=lambda: [Case("hand-checkable", (2.0, 3.0), detail="a = 2, b = 3"), Case("a negative term", (-1.5, 4.0)),
                   Case("a zero", (0.0, 5.0)), Case("fractions", (0.25, -0.5))],
    outputs=("a+b", "d(a+b)/da", "d(a+b)/db"),
    run=value_and_locals(2),
    domain=Domain(draws_two_numbers, values=VALUES, size=6),
    slot="add",
    mistakes=[
        Mistake("the upstream gradient split in half",
                "an addition does not share the gradient out between its inputs: nudging a by ε moves a + b by the "
                "whole ε, so d(a+b)/da = 1, and the same for b. Each input receives the whole upstream gradient.",
                lambda a, b: (a + b, (0.5, 0.5))),
        Mistake("the derivatives of *",
                "b and a are the local derivatives of a·b, where each input's derivative is the other input. For a "
                "sum, nudging a by ε moves a + b by ε, whatever b is: both derivatives are 1.",
                lambda a, b: (a + b, (b, a))),
        Mistake("each input's own value as its derivative",
                "the local derivative is how fast a + b moves per unit of a: by exactly 1, whatever a is.",
                lambda a, b: (a + b, (a, b))),
        Mistake("the sum as a derivative",
                "a + b is the forward value; the local derivatives are how much it changes per unit of each input: 1.",
                lambda a, b: (a + b, (a + b, a + b))),
        Mistake("only the first input's derivative",
                "b counts as much as a: nudging b by ε moves a + b by ε too, so d(a+b)/db = 1, not 0.",
                lambda a, b: (a + b, (1.0, 0.0))),
    ],
    hints=("Nudge a by a tiny ε: (a + ε) + b = (a + b) + ε. How much did the output move per unit of ε?",
           "Both local derivatives are the same plain number, whatever a and b are. Return the sum first, then the "
           "pair of derivatives."),
))

_FLAT = ("far from 0, tanh's slope is tiny and its values differ only in their last digits: 1 − t² gets the slope "
         "to within rounding, a step a ± h does not")

def _draw_tanh(rng, pick):
    """a of the pick's kind; a huge a is 20 to 300 in size, where tanh is ±1 to the last digit and the other right
    forms' cosh(a)² and e^(2a) are still floats."""
    a = scalar(rng, pick.values, 0.1, 10.0)
    if pick.values == "huge":
        a = float(np.copysign(rng.uniform(20, 300), a))
    # held to the exercise's own atol even at a tiny a: tanh(a) through e^(2a) keeps none of a's digits there, and
    # the value is not what the exercise asks to write, its slope is
    return Case(DRAWN, (a,), detail=f"a = {a!r}", scaled=False)


def _draw_exp(rng, pick):
    """a of the pick's kind: negative down to −700 (eᵃ near 1e-304, still a normal float), huge from 50 to 709
    (eᵃ up to 8e307), tiny about 1e-100 (eᵃ = 1 to the last digit)."""
    a = {"negative": -rng.uniform(1, 700), "huge": rng.uniform(50, 709)}.get(pick.values)
    a = float(a) if a is not None else scalar(rng, pick.values, 0.1, 10.0)
    return Case(DRAWN, (a,), detail=f"a = {a!r}")


register(CodeExercise(
    key="02-tanh-local",
    minutes=5,
    question="Write the scalar engine's tanh: return tanh(a) and its local derivative d(tanh a)/da, "
             "written with the output t = tanh(a) as 1 − t².",
    signature="tanh_local(a) -> (tanh a, (d/da,))",
    reference=tanh_local,
    cases=lambda: [Case("hand-checkable", (0.0,), detail="a = 0, where tanh is 0 and its slope 1"),
                   Case("a positive input", (0.5,)), Case("a negative input", (-1.2,)),
                   Case("a large input", (3.0,), detail="tanh(3) = 0.995, almost flat"),
                   Case("a saturated input", (-20.0,), detail="tanh(−20) = −1 to 16 digits",
                        note="far out, tanh is flat: its slope is almost 0"),
                   Case("a large input", (5.0,), detail="tanh(5) = 0.99991, slope 1.8e-4",
                        note=_FLAT),
                   Case("a large negative input", (-8.0,), detail="tanh(−8) = −0.9999998, slope 4.5e-7",
                        note=_FLAT)],
    outputs=("tanh a", "d(tanh a)/da"),
    run=value_and_locals(1),
    domain=Domain(_draw_tanh, values=VALUES, size=6),
    slot="scalar_tanh",
    # 1 − t² is exact to rounding: within 1e-15 of the slope, which far out is itself tiny; a finite difference,
    # at any step from 1e-3 to 1e-8, is not (far out, tanh's values differ in their last digits only)
    rtol=1e-12,
    atol=1e-15,
    diagnose=numerical_slope(tanh_local),
    mistakes=[
        Mistake("1 − a², the input squared instead of the output",
                "the derivative of tanh is 1 − tanh²(a): square the output t = tanh(a), not the input a.",
                lambda a: (math.tanh(a), (1.0 - a * a,))),
        Mistake("1 − t, the square forgotten",
                "the derivative of tanh is 1 − t², with t = tanh(a) squared; 1 − t is not symmetric, and it is "
                "wrong on both sides of 0.",
                lambda a: (math.tanh(a), (1.0 - math.tanh(a),))),
        Mistake("t², the output squared without the 1 −",
                "tanh is steepest at 0, where t = 0, and flat far out, where t² is near 1: its slope is 1 − t², "
                "not t².",
                lambda a: (math.tanh(a), (math.tanh(a) ** 2,))),
        Mistake("1 + t², the sign flipped",
                "tanh flattens out far from 0, so its slope must fall towards 0 there: 1 − t², not 1 + t².",
                lambda a: (math.tanh(a), (1.0 + math.tanh(a) ** 2,))),
        Mistake("the output as its own derivative",
                "that is true of eᵃ, not of tanh: the slope of tanh is 1 − tanh²(a), 1 at a = 0 where tanh is 0.",
                lambda a: (math.tanh(a), (math.tanh(a),))),
    ],
    hints=("math.tanh(a) (or np.tanh) gives the output. Its slope is largest at a = 0 and falls to 0 far out, where "
           "tanh is near ±1.",
           "d(tanh a)/da = 1 − tanh²(a): compute t = tanh(a) once, then use it for both the output and the slope."),
))

register(CodeExercise(
    key="02-exp-local",
    minutes=4,
    question="Write the scalar engine's exp: return eᵃ and its local derivative d(eᵃ)/da.",
    signature="exp_local(a) -> (eᵃ, (d/da,))",
    reference=exp_local,
    cases=lambda: [Case("hand-checkable", (0.0,), detail="a = 0, where e⁰ = 1"), Case("a = 1", (1.0,)),
                   Case("a negative input", (-2.0,)), Case("a = 3", (3.0,)),
                   Case("a large input", (50.0,), detail="e⁵⁰ ≈ 5.2e21"),
                   Case("a very large input", (700.0,), detail="e⁷⁰⁰ ≈ 1.0e304, near the largest float",
                        note="a float near 700 keeps 13 digits after the point, so a + h is not a step of exactly h "
                             "there: a numerical slope is off by 1e-11 of it or more, eᵃ is exact to rounding")],
    outputs=("eᵃ", "d(eᵃ)/da"),
    run=value_and_locals(1),
    domain=Domain(_draw_exp, values=VALUES, size=6),
    slot="exp",
    rtol=1e-12,  # eᵃ is exact to rounding; a finite difference, at any step from 1e-3 to 1e-8, is not
    atol=0.0,
    diagnose=numerical_slope(exp_local),
    mistakes=[
        Mistake("the power rule applied to eᵃ: a·eᵃ⁻¹",
                "the power rule n·aⁿ⁻¹ is for a fixed exponent. In eᵃ the input is the exponent, and the slope of eᵃ "
                "is eᵃ itself.",
                lambda a: (math.exp(a), (a * math.exp(a - 1),))),
        Mistake("an extra factor a: a·eᵃ",
                "the chain rule's inner factor here is da/da = 1, not a: d(eᵃ)/da = eᵃ.",
                lambda a: (math.exp(a), (a * math.exp(a),))),
        Mistake("the input as the derivative",
                "eᵃ grows at the rate of its own value, not of a: d(eᵃ)/da = eᵃ.",
                lambda a: (math.exp(a), (a,))),
        Mistake("a slope of 1",
                "1 is the slope of eᵃ at a = 0 only; at any other a the slope is eᵃ, the output itself.",
                lambda a: (math.exp(a), (1.0,))),
    ],
    hints=("math.exp(a) (or np.exp) gives the output. eᵃ is the function whose slope everywhere equals its value.",
           "Compute e = eᵃ once, and return it both as the output and as the one local derivative, in a tuple of one."),
))


# --- code exercise: backward for the scalar engine ---------------------------------------------------


BACKWARD_SOLUTION = '''\
def backward(root):
    """Fill .grad of every node that ``root`` depends on with d(root)/d(node)."""
    order, visited, stack = [], set(), [(root, False)]
    while stack:  # a depth-first walk with a stack of our own: no recursion limit
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)  # every parent is already in the list
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((parent, False) for parent in node._parents)
    root.grad = 1.0
    for node in reversed(order):  # root first, each node after everything that uses it
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local  # += : a node used twice receives both contributions
'''


def backward(root, *, reverse=True, accumulate=True, seed=True, mark="popped"):
    """The reference backward (the learner sees BACKWARD_SOLUTION). Each keyword, changed from its default, makes
    one mistake of the checker's table: walking the order forwards, `=` for `+=`, no seed, and ``mark``, when a
    node counts as visited: "popped" (right: as it comes off the stack), "pushed" (too early: as it goes on), or
    None (never: no visited set, so a node reached along two paths is placed twice)."""
    order, visited, stack = [], {id(root)} if mark == "pushed" else set(), [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif mark != "popped" or id(node) not in visited:
            if mark == "popped":
                visited.add(id(node))
            stack.append((node, True))
            for parent in node._parents:
                if mark == "pushed":
                    if id(parent) in visited:
                        continue
                    visited.add(id(parent))
                stack.append((parent, False))
    if seed:  # a learner who forgets the seed writes nothing there: the root's grad stays as it was, 0
        root.grad = 1.0
    for node in reversed(order) if reverse else order:
        for parent, local in zip(node._parents, node._local):
            parent.grad = parent.grad + node.grad * local if accumulate else node.grad * local


def _chain():
    w, x = Value(2.0, label="w"), Value(3.0, label="x")
    y = w * x
    return y**2, [w, x, y]


def _diamond():
    a = Value(1.5, label="a")
    b, c = a * 2.0, a.tanh()
    return b * c, [a, b, c]


def _fan_out():
    x = Value(0.7, label="x")
    return x * x + x * 3.0 + x.exp(), [x]


def _shared_weight():
    w, h = Value(0.6, label="w"), Value(0.4)
    for x_t in (0.5, -1.0, 2.0):
        h = (w * h + x_t).tanh()
    return (h - 0.3) ** 2, [w]


_COMPARISONS = 100_000  # a walk needs no == between nodes at all; a list searched at every node needs millions


class _ChainNode(Value):
    """A node of the long chain that counts how often two nodes are compared with ==.

    `node in a_list` compares node with the list's entries one by one: done at each of 20,000 nodes it
    makes tens of millions of comparisons, and the check would be stopped for taking too long, with no
    word on why. Counting them says why, at once."""

    __slots__ = ()
    compared = 0

    def __eq__(self, other):
        _ChainNode.compared += 1
        if _ChainNode.compared > _COMPARISONS:
            raise LearnerError(
                f"your function compared nodes with == more than {_COMPARISONS:,} times on this chain, and was "
                "stopped: a search through a list (`node in order`, `node not in visited`, `order.index(node)`) "
                "compares the node with every entry, one by one, so doing it at each of 20,000 nodes takes about "
                "200 million comparisons. Keep the nodes already seen in a set, `visited.add(id(node))` and "
                "`id(node) in visited`: a set finds its member in one step, however large it is")
        return self is other

    __hash__ = Value.__hash__


def _long_chain():
    _ChainNode.compared = 0
    x = Value(0.5, label="x")
    y, nodes = x, [x]
    for _ in range(10_000):
        y = y * 1.0001
        nodes.extend((y, parents(y)[1]))  # the node and its constant factor
    for node in nodes:
        node.__class__ = _ChainNode
    return y, [x]


def _nested():
    """A tangle of reuse: every node feeds several later ones."""
    x = Value(-4.0, label="x")
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    return y, [x, z, q, h]


def _reused_intermediate():
    """Interior nodes used twice: A feeds both factors of A·tanh(A), C both factors of tanh(C)·C, D both factors
    of tanh(tanh(D))·D, once directly and once along a path two steps longer.

    A node reached along two paths must wait until both have sent their share: a walk that marks a node visited
    when it is pushed, not when it is popped, can place A's user before A here (or C's, with the parents pushed
    in the other order); a breadth-first walk takes D by its short path and places it before tanh(D)."""
    w = Value(0.5, label="w")
    A = w * 2.0
    C = w * 3.0
    D = w * 4.0
    return A * A.tanh() + C.tanh() * C + D.tanh().tanh() * D, [w, A, C, D]


_PATHS = 64  # the most paths from a random graph's root to any node: walking every path (a mistake) stays cheap


def _random_graph(seed: int, nodes: int, reach: str):
    """A build() for a random graph of ``nodes`` operations on three inputs, the same graph at every call.

    Each operation takes one or two earlier nodes: the last few (reach "near": long and narrow, each node reused a
    step or two later) or any (reach "far": a node reused by one made much later). Values stay within [−1.7, 1.7]
    (tanh, products of such numbers, factors under 1, e^(x/2)/2), so no gradient overflows however deep the graph.
    A second parent is taken only while no node has more than _PATHS paths to the root: the named mistakes that
    push a gradient along every path stay fast."""
    def build():
        rng = np.random.default_rng(seed)
        inputs = [Value(float(rng.uniform(-1, 1)), label=f"x{i}") for i in range(3)]
        made, paths = list(inputs), [1, 1, 1]
        for _ in range(nodes):
            pool = range(max(0, len(made) - 3), len(made)) if reach == "near" else range(len(made))
            i, j = (int(rng.choice(pool)) for _ in range(2))
            op = int(rng.integers(6))
            if op < 3 and paths[i] + paths[j] <= _PATHS:
                a, b = made[i], made[j]
                node = (a + b).tanh() if op == 0 else a * b if op == 1 else a.tanh() * b
                count = paths[i] + paths[j]
            else:
                a = made[i]
                node = a.tanh() if op == 3 else a * float(rng.uniform(-0.9, 0.9)) if op == 4 else (a * 0.5).exp() * 0.5
                count = paths[i]
            made.append(node)
            paths.append(count)
        root = made[-1]
        watched = inputs + [made[int(k)] for k in rng.integers(3, len(made), 3)]
        return root, watched
    return build


def _draw_graph(rng, pick):
    seed = int(rng.integers(1 << 30))
    return Case(DRAWN, (_random_graph(seed, pick.count, pick.values),),
                detail=f"a random graph of {pick.count:,} operations, each on nodes from "
                       + ("the last few" if pick.values == "near" else "anywhere before it")
                       + "; grads of its 3 inputs and 3 of its nodes")


def _breadth_first(root):
    """A backward on a queue: each node after the nodes nearer the root, walked from the root."""
    order, seen, queue = [], {id(root)}, collections.deque([root])
    while queue:
        node = queue.popleft()
        order.append(node)
        for parent in node._parents:
            if id(parent) not in seen:
                seen.add(id(parent))
                queue.append(parent)
    root.grad = 1.0
    for node in order:
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def _root_grad_after(fn, build):
    """What the root's grad is after ``fn`` ran: a diagnosis of "no seed" looks before it names."""
    root, _ = build()
    _at_the_default_recursion_limit(fn, root)
    return root.grad


_DEFAULT_RECURSION_LIMIT = 1000  # Python's own; a loop never comes near it, a recursive walk of the long chain does


def _at_the_default_recursion_limit(fn, root):
    """``fn(root)`` with Python's default recursion limit, and the limit as it was afterwards, whatever ``fn`` did.

    The task asks for a loop: a recursive walk passes the long chain only with the limit raised, by the learner's
    function while it runs or by a cell before the check. Either is named, not passed."""
    before = sys.getrecursionlimit()
    during = min(before, _DEFAULT_RECURSION_LIMIT)
    sys.setrecursionlimit(during)
    deep = None
    try:
        fn(root)
    except RecursionError as err:
        deep = err
    finally:
        after = sys.getrecursionlimit()
        sys.setrecursionlimit(before)
    advice = "use a loop with a stack of your own, not recursion with a raised limit"
    if after > during:
        raise LearnerError(
            f"your function raised Python's recursion limit (sys.setrecursionlimit, from {during:,} to {after:,}), so "
            f"that a recursive walk can go deeper; the check has set it back to {before:,}. The limit is there because "
            f"every call takes room on a stack of fixed size, and a deep enough graph crashes Python whatever the limit "
            f"says: {advice}. (The task asks for a loop.)")
    if deep is None:
        return
    if before == during:
        raise deep  # code.py says where it went deeper than Python allows
    where = learner_line(deep.__traceback__) or "a recursive call"
    raise LearnerError(
        f"your function went deeper than Python allows by default (RecursionError at {during:,} calls, at {where}). "
        f"This session's recursion limit had been raised to {before:,}, but the check runs with Python's own: "
        f"{advice}. (The task asks for a loop.)")


def _grads(fn, build):
    root, watched = build()
    _at_the_default_recursion_limit(fn, root)
    grads = np.array([node.grad for node in watched], dtype=np.float64)
    if root.grad == 0 and not grads.any():  # nothing at all was filled: no seed, or no walk either?
        again, watched_again = build()
        again.grad = 1.0  # seeded for it: a walk that forgot only the seed now fills the others
        _at_the_default_recursion_limit(fn, again)
        if not any(node.grad for node in watched_again):
            raise LearnerError(
                "no gradient was filled at all: after your function ran, every .grad was still 0, the root's too "
                "(there is no seed, root.grad = 1, and nothing was added into any other node's grad). backward "
                "returns nothing; it fills each node's .grad in place: set root.grad = 1, then walk the order "
                "backwards and add node.grad * local into each parent's .grad.")
    return grads


register(CodeExercise(
    key="02-backward",
    minutes=25,
    refuses=guard.BACKWARD,  # root.backward(), autograd.backward and topological_order among them
    question="Write backward(root) for the scalar engine: put every node root depends on in topological order "
             "(each after its parents; use a loop, not recursion), set root.grad = 1, then walk the order backwards "
             "and add upstream × local derivative into each parent's grad. A node's inputs are node._parents, its "
             "local derivatives node._local, in the same order; every grad starts at 0.",
    signature="backward(root) -> None (fills .grad)",
    reference=backward,
    solution_code=BACKWARD_SOLUTION,
    cases=lambda: [Case("hand-checkable", (_chain,), detail="the chain L = (w·x)², grads of w, x, y"),
                   Case("a diamond", (_diamond,), detail="a feeds b and c, both feed the output; grads of a, b, c"),
                   Case("fan-out", (_fan_out,), detail="x used three times; grad of x"),
                   Case("a shared weight", (_shared_weight,), detail="w used at three time steps; grad of w"),
                   Case("a tangle of reuse (x feeds everything)", (_nested,), detail="grads of x, z, q, h"),
                   Case("a reused intermediate",
                        (_reused_intermediate,), detail="A = 2w feeds A·tanh(A), C = 3w feeds tanh(C)·C, D = 4w feeds "
                                                        "tanh(tanh(D))·D; grads of w, A, C, D",
                        note="A reaches the output directly and through tanh(A), so A must come before tanh(A) in the "
                             "order: walking it backwards, A passes its gradient on only after both have sent theirs. "
                             "The same for C, and for D, whose second path is two steps longer than its first"),
                   Case("a chain of 10,000 nodes", (_long_chain,), detail="grad of x",
                        note="10,000 nodes in a row, each with a constant factor: a recursive walk would go 10,000 "
                             "calls deep, more than Python allows, and a search through a list at every node would "
                             "take hundreds of millions of comparisons")],
    outputs=("the gradients",),
    run=_grads,
    domain=Domain(_draw_graph, values=("near", "far"), counts=(5, 30, 120, 400)),
    slot="backward",
    too_slow="it did not finish; the 10,000-node chain is the longest case. Either the loop never ends (a stack "
             "that is looked at with stack[-1] but never popped never empties) or each step is slow (`in` on a list "
             "compares a node with every entry, about n² comparisons in all: keep the seen nodes, or their id(), in a "
             "set, where `in` takes one step).",
    mistakes=[
        Mistake("walking the order forwards",
                "the gradients come out as if the topological order were walked from its start. A node can only pass "
                "its gradient on once it has received all of it, from every node that uses it, and those come after "
                "it in the order: walk it from the end (reversed). If you do walk it reversed, the order itself is "
                "backwards: a node must be appended after its parents (push (node, True) before its parents, so that "
                "it comes off the stack after them).",
                lambda root: backward(root, reverse=False)),
        Mistake("`=` instead of `+=`",
                "a node used twice must receive both contributions; `parent.grad = ...` keeps only the last one.",
                lambda root: backward(root, accumulate=False)),
        Mistake("no seed",
                "backward starts from dL/dL = 1 at the root; without root.grad = 1 every product is 0.",
                lambda root: backward(root, seed=False),
                premise=lambda fn, build: _root_grad_after(fn, build) != 1.0),
        Mistake("passing a gradient on before it is complete",
                "sending node.grad down to the parents as soon as a node is reached, before every node that uses "
                "it has added its share, sends part of it early and the rest again later: contributions are counted "
                "twice. A topological order makes each node wait until its gradient is complete.",
                lambda root: _push_every_path(root)),
        Mistake("marking a node visited when it is pushed, not when it is popped",
                "a node pushed onto the stack and marked visited at once is skipped when another path reaches it "
                "before it is popped; a node that uses it can then be appended before it, and the reversed order "
                "passes its gradient on before it is complete. Mark a node visited when it comes off the stack "
                "(the first time), and push its parents then.",
                lambda root: backward(root, mark="pushed")),
        Mistake("a breadth-first order (a queue) in place of a topological one",
                "a queue gives the nodes in order of their distance from the root, and that is not a topological "
                "order: a node reached along a short path and along a longer one comes out of the queue before the "
                "nodes of the longer path that use it, and passes its gradient on before they have sent their "
                "share. Walk depth-first, with a stack (a list you push to and pop from), append each node after "
                "its parents, and walk that order backwards.",
                _breadth_first),
        Mistake("no visited set: a node placed twice",
                "without a set of the nodes already seen, a node reached along two paths is walked and appended "
                "twice; walking the order backwards, it then passes its gradient on twice, the first time before it "
                "is complete. Keep a set of visited ids: the first time a node comes off the stack, add its id and "
                "push its parents; every later time, skip it.",
                lambda root: backward(root, mark=None)),
    ],
    hints=("Two phases. First the order: a depth-first walk that appends a node after its parents, with a list as "
           "the stack and a set of visited ids. Then the pass: root.grad = 1, and for each node in reversed(order), "
           "for each (parent, local) pair, parent.grad += node.grad * local.",
           "A stack of (node, parents_done) pairs avoids recursion: pop a pair; if parents_done, append the node; "
           "otherwise, if the node is not visited yet, mark it visited now (as it comes off the stack, not when it "
           "goes on), push (node, True) and then (parent, False) for each of its parents."),
))


def _push_every_path(root):
    """Each node passes on what it holds the moment it is reached, along every path."""
    def push(node):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local
            push(parent)
    root.grad = 1.0
    push(root)




# --- code exercise: a Hessian-vector product, forward mode over reverse mode (the companion) ---------


def hvp(grad, x, v):
    """H·v: run the reverse-mode gradient on Duals that carry the tangents v; H·v is in the tangents."""
    return [g.tangent for g in grad(*[Dual(xi, vi) for xi, vi in zip(x, v)])]


def _hvp_cases():
    def cubic(a, b):
        return a * a * b

    def quadratic(a, b, c):  # ½ xᵀAx with A = [[2, 1, 0], [1, 3, -1], [0, -1, 4]]: its Hessian is A
        return a * a + a * b + 1.5 * b * b - b * c + 2.0 * c * c

    def neuron(*params):  # the companion's tanh neuron: 8 weights and a bias
        *weights, bias = params
        z = bias
        for wi, xi in zip(weights, (0.5, -1.2, 0.3, 2.0, -0.7, 1.1, 0.0, -0.4)):
            z = z + wi * xi
        return (z.tanh() - 0.25) ** 2

    def softplus_product(a, b):
        return (1.0 + (a * b).exp()).log() + a / b

    theta = [0.1 * (i - 4) for i in range(9)]
    direction = [1.0, -0.5, 0.0, 2.0, 0.5, -1.0, 0.25, 1.5, -2.0]
    return [Case("hand-checkable", (gradient(cubic), [1.0, 2.0], [0.5, 1.0]),
                 detail="f = a²·b at a = 1, b = 2, v = (0.5, 1): H = [[2b, 2a], [2a, 0]], H·v = (4, 1)"),
            Case("a quadratic", (gradient(quadratic), [0.3, -0.7, 1.2], [1.0, 2.0, -1.0]),
                 detail="½ xᵀAx, whose Hessian is A everywhere: H·v = A·v = (4, 8, -6)"),
            Case("the tanh neuron", (gradient(neuron), theta, direction),
                 detail="the neuron of Exercise 5: 9 parameters, direction v of the JVP section"),
            Case("exp and log", (gradient(softplus_product), [0.8, -1.5], [-0.3, 0.6]),
                 detail="f = log(1 + e^(a·b)) + a/b"),
            Case("a zero direction", (gradient(softplus_product), [0.8, -1.5], [0.0, 0.0]),
                 detail="v = 0: H·0 = 0", note="the Hessian times the zero vector is zero, whatever the Hessian"),
            Case("one input moved", (gradient(neuron), theta, [0.0] * 8 + [1.0]),
                 detail="v moves the bias alone: H·v is the bias's column of the Hessian")]


def _draw_hvp(rng, pick):
    """draw(rng, pick) for 02-hvp: f = tanh(w·x) + Σ cᵢxᵢ³ of ``pick.count`` inputs, at a point of the pick's kind
    (negative: every input below 0; zero: some entries of the direction 0)."""
    n = pick.count
    w, c = (float(t) for t in rng.standard_normal(n)), rng.standard_normal(n)
    w = list(w)

    def f(*xs):
        z = xs[0] * w[0]
        for wi, xi in zip(w[1:], xs[1:]):
            z = z + wi * xi
        total = z.tanh()
        for ci, xi in zip(c, xs):
            total = total + float(ci) * xi * xi * xi
        return total

    x = [float(t) for t in rng.standard_normal(n)]
    if pick.values == "negative":
        x = [-abs(t) - 0.1 for t in x]
    v = [float(t) for t in rng.standard_normal(n)]
    if pick.values == "zero":
        v[int(rng.integers(n))] = 0.0
    return Case(DRAWN, (gradient(f), x, v), detail=f"f = tanh(w·x) + Σ cᵢxᵢ³ of {n} inputs, {pick.said()}")


def _hvp_by_finite_difference(grad, x, v, h=1e-5):
    plus = grad(*[xi + h * vi for xi, vi in zip(x, v)])
    minus = grad(*[xi - h * vi for xi, vi in zip(x, v)])
    return [(p.data - m.data) / (2 * h) for p, m in zip(plus, minus)]


register(CodeExercise(
    key="02-hvp",
    minutes=10,
    refuses=(),  # the gradient it is given runs the engine's backward: that is the point
    question="Write hvp(grad, x, v): the Hessian of f at x times the direction v, by forward mode over reverse mode. "
             "grad(*inputs) is f's gradient by the engine's reverse mode and accepts Duals; give input i the value "
             "x[i] and the tangent v[i], and read H·v from the tangents of what grad returns. Return a list.",
    signature="hvp(grad, x, v) -> H·v (a list, one number per input)",
    reference=hvp,
    cases=_hvp_cases,
    domain=Domain(_draw_hvp, values=("mixed", "negative", "zero"), counts=(1, 2, 3, 5, 8), size=6),
    outputs=("H·v",),
    rtol=1e-12,  # forward over reverse is exact to rounding; a finite difference, at any step, is off by 1e-11 or more
    atol=1e-14,
    mistakes=[
        Mistake("the gradient, not H·v",
                "the values (.data) of what grad returns are the gradient at x; H·v is in their tangents "
                "(.tangent): how the gradient moves as x moves along v.",
                lambda grad, x, v: [g.data for g in grad(*[Dual(xi, vi) for xi, vi in zip(x, v)])]),
        Mistake("x as the tangent",
                "the tangent of input i must be v[i], the direction; with x[i] as its own tangent you get H·x.",
                lambda grad, x, v: [g.tangent for g in grad(*[Dual(xi, xi) for xi in x])]),
        Mistake("a tangent of 1 on every input",
                "a tangent of 1 everywhere moves every input at once by the same amount: that is H·(1, 1, …), the "
                "sum of the Hessian's columns. The direction is v: input i carries the tangent v[i].",
                lambda grad, x, v: [g.tangent for g in grad(*[Dual(xi, 1.0) for xi in x])]),
        Mistake("value and tangent swapped",
                "Dual(value, tangent): the value is x[i], where the Hessian is taken; the tangent is v[i]. Swapped, "
                "the Hessian is taken at v and multiplies x.",
                lambda grad, x, v: [g.tangent for g in grad(*[Dual(vi, xi) for xi, vi in zip(x, v)])]),
        Mistake("only the first input moved",
                "every input carries its own tangent v[i] in the same pass; moving only the first gives "
                "v[0] times the Hessian's first column.",
                lambda grad, x, v: [g.tangent for g in grad(*[Dual(xi, v[0] if i == 0 else 0.0)
                                                                for i, xi in enumerate(x)])]),
        Mistake("a finite difference of gradients",
                "(∇f(x + hv) − ∇f(x − hv)) / 2h is close to H·v, to about 8 digits, but it is an estimate with two "
                "gradients; the question asks for the exact product from one pass: Duals carrying v into grad.",
                _hvp_by_finite_difference),
    ],
    hints=("Dual(value, tangent) from haaw.engine.forward_mode: one per input, Dual(x[i], v[i]). Call grad with all "
           "of them at once (grad(*duals)).",
           "grad returns one Dual per input; its .data is the gradient's entry, its .tangent the entry of H·v."),
))
