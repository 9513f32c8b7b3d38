"""Exercises of notebook 09: accumulation and many workers."""
import decimal
import numbers

import numpy as np

from .. import nb08
from ..nb09 import ring
from ...engine import guard
from ...engine.plugins import read_only
from .code import Case, CodeExercise, LearnerError, Mistake, learner_line
from .core import NumberExercise, register
from .domain import DRAWN, VALUES, Domain, leading, sample

register(NumberExercise(
    key="09-accumulation-scale",
    question="A batch is split into 4 microbatches of equal size, each loss a mean over its microbatch. "
             "By what factor must each microbatch loss be multiplied so that the accumulated gradient "
             "equals the big batch's?",
    answer=0.25,
    mistakes={
        4: "Multiplying by 4 makes it 16× too big. Each microbatch mean already has the big-batch scale.",
        1: "Without a factor, the 4 accumulated gradients add up to 4× the big-batch gradient.",
        0.5: "1/2 would be the factor for 2 microbatches; with 4, the 4 accumulated gradients would add up to "
             "twice the big batch's. The factor is 1 over the number of microbatches.",
    },
    hints=("The big-batch mean is the average of the 4 microbatch means.", "An average is the sum divided by how many numbers were summed: what does dividing by that count multiply each loss by?"),
    solution="1/4 = 0.25: the mean over the big batch is the average of the 4 equal-sized microbatch means.",
))

register(NumberExercise(
    key="09-token-weight",
    question="A batch of four sequences holding 12, 9, 14 and 5 real tokens, each padded to 16 positions, is split "
             "into two microbatches: the first two sequences, then the last two. For a per-token loss, the first "
             "microbatch's *summed* token loss must be divided by what?",
    answer=40,
    mistakes={
        21: "21 is the first microbatch's own real tokens (12 + 9): that gives its own mean, weighting its tokens "
            "differently from the other microbatch's 19. Divide by the whole batch's real tokens.",
        20: "20 is 40/2, the real tokens per microbatch on average: the two microbatches' gradients would then add "
            "up to twice the big batch's (accumulation adds, it does not divide by 2). Divide by all 40.",
        64: "64 counts every position, padding included (4 × 16): the padded positions have no loss in the sum, so "
            "they must not be in the count. Count the real tokens of the whole batch.",
        32: "32 is the first microbatch's positions, padding included (2 × 16). Count real tokens, and those of "
            "the whole batch.",
        2: "2 is the number of microbatches: dividing a summed token loss by it does not make it a per-token loss. "
           "Divide by the number of real tokens in the whole batch.",
        1: "A plain sum grows with the batch: divide by the number of real tokens in the whole batch.",
        1 / 40: "1/40 is the weight each token gets: dividing by 40 is multiplying by 1/40. The question asks "
                "for the divisor.",
        1 / 21: "1/21 is the weight a token gets when a microbatch is divided by its own 21 tokens. The question "
                "asks for the divisor, and the divisor is the whole batch's token count.",
        21 / 40: "21/40 is the weight of this microbatch's *mean* loss (its mean × 21/40 = its sum / 40). The "
                 "question asks what its *summed* loss is divided by.",
    },
    hints=("The big-batch per-token loss is (sum over all real tokens) / (number of real tokens); padding is not a "
           "token.",
           "Each microbatch contributes its part of the numerator; the denominator is shared by both."),
    solution="12 + 9 + 14 + 5 = 40, the real tokens of the whole batch: then every token weighs 1/40, whichever "
             "microbatch it is in.",
))

register(NumberExercise(
    key="09-ring-bytes",
    question="4 workers all-reduce a 1 GB gradient with a ring. How many GB does each worker send?",
    answer=1.5,
    mistakes={
        3: "3 GB is sending the whole gradient to each of the 3 others. The ring sends chunks of 1/4.",
        0.75: "0.75 GB is only the reduce-scatter half; the all-gather half sends as much again.",
        1: "Count the steps: 3 reduce-scatter and 3 all-gather steps, each sending a quarter.",
        2: "2 GB is twice the gradient, the bound the bytes approach as the workers grow in number; with 4 workers "
           "each sends one quarter-size chunk in each of its steps: count them.",
        1500: "1500 is the answer in MB: the question asks in GB (1 GB = 1000 MB).",
        6: "6 is the number of steps (3 reduce-scatter, 3 all-gather), not the bytes: each step sends one chunk, "
           "a quarter of the gradient.",
    },
    hints=("The gradient is cut into 4 chunks of 0.25 GB.", "2 × (4 − 1) steps, one chunk each."),
    solution="2·(N−1)/N × 1 GB = 2 × 3/4 = 1.5 GB, and it never exceeds 2 GB however many workers join.",
))


# --- code exercises: a ring all-reduce, and accumulation weighted by tokens ------------------------------


RING_SOLUTION = '''\
def ring_all_reduce(buffers, send):
    """Each of the N workers holds one buffer (an array; all have the same shape). Return what every worker
    holds afterwards, the sum of all N buffers, computed by passing chunks around the ring with ``send``:
    ``received = send(outgoing)`` is one step, in which worker i sends ``outgoing[i]`` to worker (i + 1) % N
    and ``received[i]`` is what worker i got from worker (i − 1) % N."""
    n = len(buffers)
    chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]  # chunks[i][c]: worker i's copy of chunk c
    for step in range(n - 1):  # reduce-scatter: each chunk travels the ring once, adding up as it goes
        received = send([chunks[i][(i - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - 1 - step) % n] += received[i]            # the chunk the left neighbour sent
    # now worker i holds the finished sum of chunk (i + 1) % n
    for step in range(n - 1):  # all-gather: pass the finished chunks around so everyone has them all
        received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - step) % n] = received[i]                 # replace: it is finished
    return [np.concatenate(c) for c in chunks]
'''

def ring_all_reduce(buffers, send):
    """The reference: the course's ring, with its default (right) keyword arguments, every worker's result in the
    shape of the buffers (the course's ring works on them flattened)."""
    shape = np.shape(buffers[0])
    return [r.reshape(shape) for r in ring(buffers, send)]


def _largest_chunk(shape, workers: int) -> int:
    """The most numbers one chunk can hold when a buffer of ``shape`` is cut into ``workers`` pieces with
    np.array_split, flattened or along any one axis (a (3, 4) buffer split 2 ways along its rows: 8 numbers)."""
    size = int(np.prod(shape))
    return max([-(-size // workers)] + [-(-d // workers) * (size // d) for d in shape if d])


class _Wires:
    """The checker's ring, ``received = send(outgoing)`` as notebook 09's Ring: worker i's message goes to worker
    (i + 1) % N, a copy that crossed a wire, and the ring counts steps and numbers. A message keeps its shape
    (a chunk of a 2-D buffer arrives as one), and may hold at most one chunk. The steps numbered in ``tamper``
    change every message on its way (+1000 times its largest number, or +1000), so the checker can see what a result
    was built from."""

    def __init__(self, shape, workers: int, tamper=()):
        self.workers, self.largest, self.tamper = workers, _largest_chunk(shape, workers), set(tamper)
        self.steps, self.numbers_sent = 0, 0

    def __call__(self, outgoing):
        n = self.workers
        if not isinstance(outgoing, (list, tuple)) or len(outgoing) != n:
            raise ValueError(f"send takes a list of {n} chunks, one per worker (outgoing[i] goes from worker i to "
                             f"worker (i + 1) % {n}); got {type(outgoing).__name__}"
                             + (f" of length {len(outgoing)}" if isinstance(outgoing, (list, tuple)) else ""))
        messages = [np.array(o, dtype=np.float64) for o in outgoing]  # a copy: it crossed a wire
        for i, m in enumerate(messages):
            if m.size > self.largest:
                raise ValueError(f"in step {self.steps + 1} worker {i} sent {m.size} numbers, but one chunk of its "
                                 f"buffer split {n} ways holds at most {self.largest}: a ring sends one chunk per "
                                 "worker per step")
        self.steps += 1
        self.numbers_sent += sum(m.size for m in messages)
        if self.steps in self.tamper:  # a change that shows at any size of the numbers
            messages = [m + 1000.0 * max(1.0, float(np.max(np.abs(m), initial=0.0))) for m in messages]
        return [messages[(i - 1) % n] for i in range(n)]


def _ring_call(fn, buffers, wires) -> np.ndarray:
    """Every worker's result of ``fn(buffers, wires)``, stacked. ``fn`` gets the buffers read-only, as the
    notebook's later cells hand over their own gradients, and must return new arrays."""
    given = [read_only(np.asarray(b), copy=True) for b in buffers]
    try:
        result = fn(given, wires)
    except ValueError as err:
        if "read-only" not in str(err):
            raise
        where = learner_line(err.__traceback__)
        raise LearnerError("it changes the buffers it was given" + (f", at {where}" if where else "") + ". They "
                           "belong to the caller, who still needs them (a later cell adds them up again). "
                           "np.array_split(b, n) gives views into b, so `chunk += received` writes into b: split a "
                           "copy, np.array_split(b.astype(np.float64), n), or write chunk = chunk + received") from None
    if not isinstance(result, (list, tuple)) or len(result) != len(buffers):
        raise LearnerError(f"return a list with one array per worker ({len(buffers)}); got {type(result).__name__}"
                           + (f" of length {len(result)}" if isinstance(result, (list, tuple)) else ""))
    for i, r in enumerate(result):
        if isinstance(r, np.ndarray) and any(np.shares_memory(r, g) for g in given):
            raise LearnerError(f"worker {i}'s result shares its memory with a buffer it was given: it is the "
                               "caller's array (or a view of it), so a later change to either changes both. Return "
                               "new arrays (np.concatenate makes one; or .copy())")
    shape = np.shape(buffers[0])
    shapes = {np.shape(r) for r in result}
    if shapes != {shape}:
        raise LearnerError(f"every worker must end with a whole buffer of shape {shape}; got {sorted(shapes)}"
                           + (": put the result back in the buffer's shape (.reshape)" if
                              all(int(np.prod(s)) == int(np.prod(shape)) for s in shapes) else ""))
    return np.stack([np.asarray(r, dtype=np.float64) for r in result])


def _run_ring(fn, buffers):
    n = len(buffers)
    wires = _Wires(np.shape(buffers[0]), n)
    results = _ring_call(fn, buffers, wires)
    if n > 1 and wires.steps == 2 * (n - 1):  # the right count: then each half must use what it received
        _uses_what_it_receives(fn, buffers, results)
    return results, np.array([wires.steps, wires.numbers_sent])


def _uses_what_it_receives(fn, buffers, results):
    """A worker may use only its own buffer and what reaches it through send. Run again with the messages of the
    reduce-scatter changed on the wire: every number of every result must change, since each finished chunk was
    added up from what arrived. Then with those of the all-gather changed: a worker finishes one chunk itself and
    receives all the others, so at most one chunk of its result may stay as it was."""
    n, shape = len(buffers), np.shape(buffers[0])
    again = _ring_call(fn, buffers, _Wires(shape, n, tamper=range(1, n)))
    for i, (before, after) in enumerate(zip(results, again)):
        kept = np.isclose(before, after)
        if kept.any():
            raise LearnerError(f"worker {i}'s result does not depend on what it received through send in the "
                               f"reduce-scatter (the first N − 1 = {n - 1} steps): {int(kept.sum())} of its "
                               f"{kept.size} numbers stay the same when every message of those steps arrives "
                               "changed. Each chunk's sum must be built from what the left-hand neighbour sends "
                               "(received[i]), not from the other workers' buffers (which a real worker cannot see)")
    largest = _largest_chunk(shape, n)
    again = _ring_call(fn, buffers, _Wires(shape, n, tamper=range(n, 2 * n - 1)))
    for i, (before, after) in enumerate(zip(results, again)):
        kept = int(np.isclose(before, after).sum())
        if kept > largest:
            raise LearnerError(f"worker {i}'s result does not depend on what it received through send in the "
                               f"all-gather (the last N − 1 = {n - 1} steps): {kept} of its {before.size} numbers "
                               "stay the same when every message of those steps arrives changed, more than the one "
                               f"chunk (at most {largest} numbers) it finished itself. Each finished chunk must be "
                               "copied from what arrives (received[i]), not from another worker's chunks (which a "
                               "real worker cannot see)")


def _ring_cases():
    rng = np.random.default_rng(10)
    hand = [np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) * (i + 1) for i in range(3)]
    return [Case("hand-checkable", (hand,), detail="3 workers, length 6"),
            Case("one worker", ([np.arange(4.0)],), detail="nothing to send"),
            Case("2 workers", ([rng.standard_normal(8) for _ in range(2)],)),
            Case("4 workers", ([rng.standard_normal(10) for _ in range(4)],), detail="length 10 (not a multiple of 4)",
                 note="10 numbers do not split into 4 equal chunks: np.array_split allows chunks of 3, 3, 2, 2"),
            Case("8 workers", ([rng.standard_normal(5) for _ in range(8)],), detail="length 5 (fewer numbers than workers)"),
            Case("5 workers", ([rng.standard_normal(1000) for _ in range(5)],), detail="length 1000"),
            Case("2-D buffers", ([rng.standard_normal((5, 3)) for _ in range(3)],), detail="3 workers, shape (5, 3)",
                 note="a buffer may have any shape: every worker ends with an array of the buffer's shape")]


def _draw_ring(rng, pick):
    """The pick's count of workers, each with a buffer of the pick's rank (1 to 9 numbers an axis), dtype and
    values: fewer numbers than workers, sizes that do not split evenly, 2-D and 3-D buffers."""
    shape = leading(rng, pick.rank, high=9)
    buffers = [sample(rng, shape, pick.values, pick.dtype) for _ in range(pick.count)]
    return Case(DRAWN, (buffers,), detail=f"{pick.said()}, {pick.count} workers, shape {shape}")


def _ring_variant(*, steps=None, gather=True, average=False):
    """A ring as the notebook's cell writes it, np.array_split along the first axis (for a 1-D buffer, the course's
    ring), making one named mistake with its keywords: ``steps(n)`` reduce-scatter steps instead of N − 1, no
    all-gather, or a division by N. Split as the learner splits, a 2-D buffer's mistake is the learner's too."""
    def ring_all_reduce(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(np.array(b, dtype=np.float64), n) for b in buffers]
        for step in range(n - 1 if steps is None else steps(n)):
            received = send([chunks[i][(i - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - 1 - step) % n] = chunks[i][(i - 1 - step) % n] + received[i]
        for step in range(n - 1 if gather else 0):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] = received[i]
        return [np.concatenate(c) / (n if average else 1) for c in chunks]
    return ring_all_reduce


def _no_ring(buffers, send):
    total = np.sum(buffers, axis=0)
    return [total.copy() for _ in buffers]


register(CodeExercise(
    key="09-ring-all-reduce",
    minutes=30,
    refuses=(*guard.BACKWARD, "course.ring_all_reduce", "course.ring"),
    question="Write a ring all-reduce: split each worker's buffer into N chunks; reduce-scatter (N − 1 steps: every "
             "worker sends one chunk to its right-hand neighbour, which adds it to its own), then all-gather "
             "(N − 1 steps: pass the finished chunks on). Every chunk travels through send. Return every worker's "
             "buffer: the sum of all N.",
    signature="ring_all_reduce(buffers, send) -> list of N arrays, each the sum",
    reference=ring_all_reduce,
    solution_code=RING_SOLUTION,
    cases=_ring_cases,
    outputs=("every worker's result", "the ring's count [steps, numbers sent]"),
    run=_run_ring,
    domain=Domain(_draw_ring, ranks=(1, 2, 3), dtypes=(np.float64, np.float32), values=VALUES,
                  counts=(1, 2, 3, 5, 8), size=6),
    mistakes=[
        Mistake("no ring at all (the sum computed directly)",
                "the numbers are right, but no chunk went through send: in a real cluster a worker sees only its "
                "own buffer and what its left-hand neighbour sends it. Pass every chunk with received = "
                "send(outgoing): 2·(N − 1) steps, one chunk per worker per step.",
                _no_ring),
        Mistake("no all-gather",
                "after the reduce-scatter each worker holds only *one* finished chunk (and partial sums of the "
                "others). The all-gather passes the finished chunks around so every worker has all of them.",
                _ring_variant(gather=False)),
        Mistake("one step short",
                "a chunk must visit all N workers to collect all N contributions: N − 1 passes, not N − 2.",
                _ring_variant(steps=lambda n: max(n - 2, 0))),
        Mistake("averaging in the all-reduce",
                "an all-reduce sums; dividing by N (to average over workers) is a separate choice, made outside.",
                _ring_variant(average=True)),
    ],
    hints=("Work it out on the trace of three workers first. Keep chunks[i][c], worker i's copy of chunk c. In "
           "each reduce-scatter step two indices matter for worker i: the chunk it sends, and the chunk it adds "
           "what it received to (the one its left-hand neighbour sent). Read both off the trace for steps 1 and 2, "
           "for every worker, then write each as an expression in i and step, modulo n.",
           "Reduce-scatter: in the first step (step = 0) worker i sends the chunk with its own number, i; in each "
           "later step it passes on the chunk it has just added to, one number lower: chunk (i − step) mod n. It "
           "receives its left neighbour's chunk, (i − 1 − step) mod n, and adds it to its own copy of that chunk.",
           "After the reduce-scatter, worker i holds the finished sum of chunk (i + 1) mod n (in the trace, worker 0 "
           "holds B012). All-gather: worker i sends that chunk first, then each step the one it has just received: "
           "chunk (i + 1 − step) mod n. The receiver replaces its copy of that chunk, (i − step) mod n, instead of "
           "adding to it."),
))


def microbatch_loss(losses, mask, total_tokens):
    """The loss to call backward on for one microbatch, so that the gradients accumulated over all microbatches
    equal one big batch's mean-per-token gradient. ``total_tokens``: the real tokens of the whole batch."""
    return (losses * mask).sum() / total_tokens


def _leaving_the_mask(fn, losses, mask, total):
    try:
        return fn(losses, mask, total)
    except ValueError as err:
        if "read-only" not in str(err):
            raise
        where = learner_line(err.__traceback__)
        raise LearnerError("it changes the mask it was given" + (f", at {where}" if where else "") + ". The mask is "
                           "part of the caller's batch (in the notebook, a slice of it), used again for the next "
                           "microbatch and the whole-batch comparison. Make a new array instead (weights = mask / "
                           "total_tokens, not mask /= total_tokens)") from None


def _run_accumulation(fn, lengths, splits, seed=3):
    inputs, targets, mask = nb08.padded_batch(lengths=lengths, seed=seed)
    model = nb08.make_model(seed=seed)
    total = float(mask.sum())
    for rows in splits:
        rows = np.array(rows)
        given = read_only(mask[rows])  # the notebook hands over views of its batch's mask: read-only here too
        loss = _leaving_the_mask(fn, nb08.token_losses(model, inputs[rows], targets[rows]), given, total)
        if not hasattr(loss, "backward") or getattr(loss, "shape", None) != ():
            raise LearnerError("return the microbatch's loss as a Tensor holding one number, so backward can run; "
                               f"got {loss!r:.50}")
        loss.backward()
    return np.concatenate([(p.grad if p.grad is not None else np.zeros_like(p.data)).ravel()
                           for p in model.parameters()])


def _draw_accumulation(rng, pick):
    """A batch of 2 to 6 sequences of 1 to 9 tokens, split into the pick's count of microbatches of any sizes (the
    last takes what is left), with tokens of another seed: the total, and each microbatch's share, differ."""
    count = max(pick.count, int(rng.integers(pick.count, 7)))
    lengths = tuple(int(n) for n in rng.integers(1, 10, count))
    rows = [int(i) for i in rng.permutation(count)]
    cuts = sorted(int(c) for c in rng.choice(range(1, count), pick.count - 1, replace=False)) if pick.count > 1 else []
    splits = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, count])]
    tokens = [sum(lengths[r] for r in split) for split in splits]
    return Case(DRAWN, (lengths, splits, int(rng.integers(3, 100))),
                detail=f"lengths {', '.join(map(str, lengths))}, microbatches {splits}: "
                       f"{' and '.join(map(str, tokens))} real tokens, {sum(tokens)} in all")


register(CodeExercise(
    key="09-token-weighted",
    minutes=10,
    question="Write the loss of one microbatch so that the gradients summed over all microbatches equal one big "
             "batch's gradient of the mean loss per real token.",
    signature="microbatch_loss(losses, mask, total_tokens) -> loss",
    reference=microbatch_loss,
    cases=lambda: [Case("two microbatches", ((6, 3, 5, 2), [[0, 1], [2, 3]]), detail="9 and 7 real tokens"),
                   Case("four microbatches of one sequence", ((6, 3, 5, 2), [[0], [1], [2], [3]])),
                   Case("uneven", ((1, 7, 4, 4), [[0], [1, 2, 3]]), detail="1 and 15 real tokens"),
                   Case("another token count", ((2, 5, 3), [[0, 1], [2]]), detail="7 and 3 real tokens, 10 in all",
                        note="the batches before all held 16 real tokens; this one holds 10 (total_tokens says "
                             "how many)"),
                   Case("three microbatches", ((3, 8, 2, 6, 4), [[0, 1], [2, 3], [4]]),
                        detail="11, 8 and 4 real tokens, 23 in all")],
    outputs=("the accumulated gradients",),
    run=_run_accumulation,
    domain=Domain(_draw_accumulation, counts=(1, 2, 3, 4)),
    mistakes=[
        Mistake("each microbatch's own mean, divided by the number of microbatches",
                "that weighs a token of a short microbatch more than a token of a long one. Sum each microbatch's "
                "masked losses and divide by the tokens of the *whole* batch.",
                lambda losses, mask, total: (losses * mask).sum() / float(mask.sum()) / 2),
        Mistake("each microbatch's own mean",
                "a mean per microbatch, then summed over microbatches, is about k times the big batch's gradient "
                "(and weighted unevenly). Divide by the whole batch's token count.",
                lambda losses, mask, total: (losses * mask).sum() / float(mask.sum())),
        Mistake("the mean over every position, padding counted (notebook 08's bug)",
                "(losses * mask).mean() divides by every position of the microbatch, padded ones too: the padding "
                "adds nothing to the sum but still counts in the divisor, and each microbatch's own count is used. "
                "Divide the masked sum by total_tokens, the whole batch's real tokens.",
                lambda losses, mask, total: (losses * mask).mean()),
        Mistake("multiplying by the token count instead of dividing",
                "sum × total_tokens makes the loss grow with the batch's tokens. Each real token of the whole batch "
                "should weigh 1 / total_tokens: divide the masked sum by total_tokens.",
                lambda losses, mask, total: (losses * mask).sum() * total),
        Mistake("the mask forgotten",
                "padded positions have losses too; without the mask they join the sum.",
                lambda losses, mask, total: losses.sum() / total),
    ],
    hints=("The big batch's loss is Σ (masked losses of every position) / total_tokens. Split that sum over the "
           "microbatches.",),
))



# --- the pipeline's bubble (09+) ----------------------------------------------------------------------------------
def bubble_fraction(stages, micro):
    """The share of a pipeline step's stages × time spent idle, with GPipe or 1F1B: each stage waits for p − 1 of
    the m + p − 1 slots a step lasts, forward and backward alike."""
    return (stages - 1) / (micro + stages - 1)


def _one_number(result):
    """``result`` as a float if it is one real number of any kind (an int, a float, a Fraction or a Decimal, a NumPy
    number, an array or a torch tensor of no dimensions), else None. True and False are no share."""
    if isinstance(result, (bool, np.bool_)):
        return None
    if isinstance(result, (numbers.Real, decimal.Decimal)):
        return float(result)
    if getattr(result, "ndim", None) == 0 and getattr(getattr(result, "dtype", None), "is_complex", False) is False:
        try:
            value = result.item()
        except Exception:  # noqa: BLE001  (whatever the object: it is not one number)
            return None
        return None if isinstance(value, bool) else float(value) if isinstance(value, (int, float)) else None
    return None


def _run_bubble(fn, stages, micro):
    result = fn(stages, micro)
    value = _one_number(result)
    if value is None:
        raise LearnerError(f"return the bubble as one number, a share between 0 and 1; got {result!r:.50}")
    return np.array(value)


def _draw_bubble(rng, pick):
    """A pipeline of the pick's count of stages and 1 to 96 micro-batches (now and then fewer than the stages)."""
    micro = int(rng.integers(1, 97)) if rng.random() < 0.7 else int(rng.integers(1, pick.count + 1))
    return Case(DRAWN, (pick.count, micro), detail=f"{pick.count} stages, {micro} micro-batches")


register(CodeExercise(
    key="09-bubble",
    minutes=6,
    refuses=(*guard.BACKWARD, "nb09.pipeline_schedule"),
    question="Write the bubble of a pipeline of `stages` stages on `micro` micro-batches: the share of stages × "
             "time that the stages spend idle in one step, with GPipe's or 1F1B's schedule (the two have the same), "
             "as a number between 0 and 1.",
    signature="bubble_fraction(stages, micro) -> share idle",
    reference=bubble_fraction,
    cases=lambda: [Case("hand-checkable", (4, 8), detail="4 stages, 8 micro-batches, the figure's"),
                   Case("one micro-batch", (4, 1), detail="4 stages",
                        note="with one micro-batch only one stage works at a time"),
                   Case("one stage", (1, 5), detail="5 micro-batches",
                        note="one stage is no pipeline: nothing waits"),
                   Case("two stages", (2, 3), detail="3 micro-batches"),
                   Case("many micro-batches", (8, 64), detail="8 stages")],
    outputs=("the bubble",),
    run=_run_bubble,
    domain=Domain(_draw_bubble, counts=(1, 2, 3, 4, 8, 16)),
    mistakes=[
        Mistake("the bubble against the ideal time, (p − 1)/m",
                "(p − 1)/m divides the idle time by the time the work itself takes, not by the whole step: it "
                "passes 1 when the stages outnumber the micro-batches. The share of the step is (p − 1)/(m + p − 1).",
                lambda stages, micro: (stages - 1) / micro),
        Mistake("the busy share",
                "m/(m + p − 1) is the share of the step the stages spend working; the bubble is what is left.",
                lambda stages, micro: micro / (micro + stages - 1)),
        Mistake("a percentage",
                "the bubble is a share between 0 and 1 (0.27 for 27 %), not a percentage: leave out the × 100.",
                lambda stages, micro: 100 * (stages - 1) / (micro + stages - 1)),
        Mistake("one slot too many",
                "a step lasts m + p − 1 slots: the first micro-batch takes p slots to pass every stage, and each "
                "of the other m − 1 one more; m + p counts one slot that is not there.",
                lambda stages, micro: (stages - 1) / (micro + stages)),
    ],
    hints=("Count in slots of one micro-batch's work on one stage. How many slots does the step last, from the "
           "first micro-batch entering stage 0 to the last leaving stage p − 1?",
           "The step lasts m + p − 1 slots, and each stage works in m of them."),
))
