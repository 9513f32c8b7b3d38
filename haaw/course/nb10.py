"""Notebook 10's props: a tiny character-level transformer, its text, the training step with every switch
of notebooks 06–09, and the glossary quiz.

Token and position embeddings, a few pre-norm transformer blocks with causal attention, a final
LayerNorm and a linear read-out: the same layers as a large language model, only small enough to
train on a laptop CPU in seconds. The text it learns ships with the package (``data/tiny_story.txt``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import math
from dataclasses import dataclass

from ..amp import DynamicLossScaler, dtype as format_dtype
from ..engine import Tensor, checkpoint, no_grad
from ..nn import LayerNorm, Linear, Module, TransformerBlock
from ..nn.functional import causal_mask, cross_entropy
from ..nn.utils import clip_grad_norm_
from ..optim import Adam, AdamW
from .nb09 import Ring, ring


STORY = Path(__file__).with_name("data") / "tiny_story.txt"


def load_story() -> str:
    return STORY.read_text()


class CharTokenizer:
    """One token per character: the vocabulary is the set of characters in the text."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text: str) -> np.ndarray:
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(f"encode: characters not in the vocabulary: {unknown}")
        return np.array([self.index[c] for c in text])

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def __len__(self) -> int:
        return len(self.chars)


class TinyGPT(Module):
    def __init__(self, vocab: int, dim: int = 32, heads: int = 4, layers: int = 2, context: int = 32, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.context = context
        self.token = Tensor(rng.normal(0, 0.1, (vocab, dim)), requires_grad=True, label="token embedding")
        self.position = Tensor(rng.normal(0, 0.1, (context, dim)), requires_grad=True, label="position embedding")
        self.blocks = [TransformerBlock(dim, heads, seed=seed + 100 * (i + 1)) for i in range(layers)]
        self.ln = LayerNorm(dim)
        self.head = Linear(dim, vocab, seed=seed + 7)
        self.checkpointing = False  # True: each block keeps only its input; backward recomputes the rest (06)

    def forward(self, ids) -> Tensor:
        """Logits of shape (batch, positions, vocab): at each position, a guess at the next character."""
        ids = np.asarray(ids)
        T = ids.shape[1]
        if T > self.context:
            raise ValueError(f"TinyGPT: {T} positions, but the context is {self.context}")
        x = self.token[ids] + self.position[:T]
        mask = causal_mask(T)
        for block in self.blocks:
            if self.checkpointing:
                x = checkpoint(lambda h, block=block: block(h, mask=mask), x)
            else:
                x = block(x, mask=mask)
        return self.head(self.ln(x))


def random_batch(data: np.ndarray, batch: int, length: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` random windows of the text; the targets are the same windows shifted by one."""
    starts = rng.integers(0, len(data) - length - 1, batch)
    x = np.stack([data[s:s + length] for s in starts])
    y = np.stack([data[s + 1:s + length + 1] for s in starts])
    return x, y


def generate(model: TinyGPT, tokenizer: CharTokenizer, prompt: str, length: int, seed: int = 0,
             temperature: float = 0.8) -> str:
    """Continue ``prompt`` one sampled character at a time."""
    rng = np.random.default_rng(seed)
    ids = list(tokenizer.encode(prompt))
    with no_grad():
        for _ in range(length):
            logits = model(np.array([ids[-model.context:]])).data[0, -1] / temperature
            p = np.exp(logits - logits.max())
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return tokenizer.decode(ids)


GLOSSARY = [
    ("gradient", "one number per parameter: how fast the loss changes when that parameter alone is nudged"),
    ("derivative", "how fast one quantity changes, locally, when another quantity it depends on changes a little"),
    ("chain rule", "the rule that multiplies the derivatives of the links of a composed function to give the "
                   "derivative of the whole"),
    ("computation graph", "the values of a computation and the operations joining them: a record of what depends "
                          "on what"),
    ("upstream gradient", "dL/d(output): what an operation receives during backward from the computation that "
                          "came after it"),
    ("local derivative", "how fast one operation's output moves with one of its inputs, known from forward values "
                         "alone"),
    ("backpropagation", "computing the gradient of one loss for every parameter in a single pass, by the chain "
                        "rule in reverse dependency order"),
    ("automatic differentiation", "software that records the operations of a program, then derives and runs "
                                  "their derivative computations, so nobody writes them by hand"),
    ("reverse-mode differentiation", "the strategy that pays off when one scalar output depends on many inputs: "
                                     "one pass backward gives the derivative for every input"),
    ("vector-Jacobian product", "the upstream gradient pushed through an operation without ever building its "
                                "Jacobian"),
    ("gradient accumulation", "adding up the gradients of several microbatches before one optimizer update"),
    ("optimizer", "what turns gradients into a change of the parameters; it uses what backpropagation computed, "
                  "and is no part of it"),
    ("activation checkpointing", "keeping only some forward values and recomputing the rest during backward"),
    ("loss scaling", "multiplying the loss before backward so small 16-bit gradients do not become zero"),
    ("all-reduce", "the collective operation that leaves every worker with the sum of all workers' gradients"),
    ("emerges", "said of useful behaviour that appears from the accumulated effect of many small updates: an "
                "observed result of the optimization, not an extra hidden mechanism"),
]
TERMS = sorted(term for term, _ in GLOSSARY)


def quiz_feedback(answers: dict) -> tuple[int, list[str]]:
    """``answers``: definition index -> chosen term. Returns (number right, one line per definition)."""
    right, lines = 0, []
    for i, (term, definition) in enumerate(GLOSSARY):
        chosen = answers.get(i)
        if chosen == term:
            right += 1
            lines.append(f"✓ {term}")
        elif chosen in (None, "", "?"):
            lines.append(f"· not answered: {definition}")
        else:
            other = dict(GLOSSARY).get(chosen, "")
            lines.append(f"✗ '{chosen}' is {other}; this one is something else" if other else f"✗ '{chosen}'?")
    return right, lines


def glossary_quiz():
    """A dropdown of terms beside each definition, and a button that checks them all."""
    import ipywidgets as widgets

    # Each drop-down's description is its definition, in a label of no width: a label tied to the drop-down,
    # which a screen reader reads as its name, while the eye reads the definition shown beside it.
    choosers = [widgets.Dropdown(options=["?"] + TERMS, value="?", description=definition,
                                 style={"description_width": "0px"}, layout=widgets.Layout(width="250px"))
                for _, definition in GLOSSARY]
    rows = [widgets.HBox([chooser, widgets.HTML(definition)]) for chooser, (_, definition) in zip(choosers, GLOSSARY)]
    button, result = widgets.Button(description="check my answers"), widgets.HTML()

    def on_click(_=None):
        right, lines = quiz_feedback({i: c.value for i, c in enumerate(choosers)})
        result.value = f"<pre>{right} of {len(GLOSSARY)} right\n" + "\n".join(lines) + "</pre>"

    button.on_click(on_click)
    return widgets.VBox(rows + [button, result])


def tiny_gpt_in_torch(model, ids, torch):
    """(logits, {id(haaw parameter): torch parameter}) for haaw TinyGPT ``model`` on token ``ids``: the same
    model written in PyTorch, with the same weights, for notebook 10's cross-check."""
    from ..tools.torch_mirror import block_in_torch

    ids = np.asarray(ids)
    T = ids.shape[1]
    P = {id(p): torch.tensor(p.data, requires_grad=True) for p in (model.token, model.position)}
    x = P[id(model.token)][torch.as_tensor(ids)] + P[id(model.position)][:T]
    for block in model.blocks:
        x, block_params = block_in_torch(block, x, None, torch, is_causal=True)  # PyTorch's own causal mask
        P.update(block_params)
    for p in model.ln.parameters() + model.head.parameters():
        P[id(p)] = torch.tensor(p.data, requires_grad=True)
    h = torch.nn.functional.layer_norm(x, x.shape[-1:], P[id(model.ln.weight)], P[id(model.ln.bias)], eps=model.ln.eps)
    return h @ P[id(model.head.weight)] + P[id(model.head.bias)], P


# --- the training step with every switch of notebooks 06–09 ------------------------------------------------
def split(data: np.ndarray, held_out: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(training part, held-out part): the last ``held_out`` share of the text is never trained on."""
    cut = int(round(len(data) * (1 - held_out)))
    return data[:cut], data[cut:]


def windows(data: np.ndarray, length: int = 32, stride: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Every ``stride``-th window of the text and its next characters: a fixed set to measure a loss on."""
    starts = np.arange(0, len(data) - length - 1, stride)
    return (np.stack([data[s:s + length] for s in starts]), np.stack([data[s + 1:s + length + 1] for s in starts]))


def mean_loss(model: "TinyGPT", x, y) -> float:
    """The mean cross-entropy per token over windows ``x``, no graph recorded, computed in float64."""
    with no_grad():
        logits = model(x).to(np.float64)
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), np.asarray(y).reshape(-1)).item()


@dataclass(frozen=True)
class Recipe:
    """The switches of one training step. The defaults are all off: the plain float64 step of section 2.

    precision      the format forward and backward compute in: "float64", "float32", "bfloat16" or "float16".
                   In a 16-bit format the optimizer updates fp32 master copies of the weights (notebook 07).
    loss_scaling   multiply the loss by a dynamic scale before backward, unscale before the update, skip a
                   step whose gradients overflowed (07); ``init_scale`` and ``growth_interval`` set the scaler.
    checkpointing  keep only each block's input; recompute the block in backward (06).
    micro_batches  split each worker's share of the batch into this many pieces, one backward each, the
                   gradients added up in the master format before one update (09).
    token_weighted each micro-batch's loss is its summed loss over the tokens of the whole batch (right when
                   the pieces differ in size); False: its own mean divided by the number of pieces (08, 09).
    max_norm       clip the global gradient norm to this, after unscaling (04, 07); None: no clipping.
    warmup         raise the learning rate linearly over this many steps, then let it decay along a half
                   cosine to ``floor`` by step ``steps``; 0 (and no ``decay_from``): a constant rate ``lr``.
    floor          where the half cosine ends, as a share of ``lr``: 0 (the default) decays to 0; LLaMA's recipe
                   ends at 0.1, a tenth of the peak rate.
    decay_from     the step the half cosine starts from (None: where the warmup ends); between the warmup's end
                   and it, the rate is ``lr``. A control that differs from another run in its warmup only sets
                   it to the other run's warmup.
    weight_decay   0 (the default): Adam. Above 0: AdamW, each step shrinking the weights of the matrix products and
                   the embeddings by lr · weight_decay of themselves; biases and layer norms' weights and biases,
                   in a parameter group of their own, are not decayed (as nanoGPT's recipe does).
    decay_all      the control for ``weight_decay``: one group, every parameter decayed, norms and biases too.
    workers        simulated data-parallel workers, each with its own copy of everything, the batch split
                   between them (09).
    all_reduce     sum the workers' gradients with the ring all-reduce of 09 (averaging, when the losses
                   are each worker's own mean); False: each worker steps on its own gradient.
    """
    precision: str = "float64"
    loss_scaling: bool = False
    checkpointing: bool = False
    micro_batches: int = 1
    token_weighted: bool = True
    max_norm: float | None = None
    warmup: int = 0
    decay_from: int | None = None
    floor: float = 0.0
    weight_decay: float = 0.0
    decay_all: bool = False
    steps: int = 100
    workers: int = 1
    all_reduce: bool = True
    lr: float = 3e-3
    init_scale: float = 2.0**16
    growth_interval: int = 50

    @property
    def narrow(self) -> bool:
        return self.precision in ("bfloat16", "float16")

    def learning_rate(self, step: int) -> float:
        """The rate for ``step`` (counting from 0): linear warmup, then a half cosine down to ``floor`` · lr."""
        if not self.warmup and self.decay_from is None:
            return self.lr
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        start = self.warmup if self.decay_from is None else max(self.warmup, self.decay_from)
        if step < start:
            return self.lr
        progress = min(1.0, (step - start) / max(1, self.steps - start))
        if not self.floor:
            return self.lr * 0.5 * (1 + math.cos(math.pi * progress))
        return self.lr * (self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def decay_groups(params, decay_all: bool = False) -> list[dict]:
    """AdamW's parameter groups: the matrices (2 or more dimensions: the products' weights, the embeddings) decayed,
    the rest (biases, layer norms' weights and biases) in a group with ``weight_decay`` 0; one group if
    ``decay_all``."""
    if decay_all:
        return [{"params": list(params)}]
    return [{"params": [p for p in params if p.data.ndim >= 2]},
            {"params": [p for p in params if p.data.ndim < 2], "weight_decay": 0.0}]


class Worker:
    """One data-parallel worker: its model (in the compute format), the weights its optimizer updates (fp32
    masters in a 16-bit format, else the model's own), its optimizer and its loss scaler."""

    def __init__(self, recipe: Recipe, vocab: int, seed: int = 0):
        self.model = TinyGPT(vocab, seed=seed)
        self.model.checkpointing = recipe.checkpointing
        params = self.model.parameters()
        if recipe.narrow:
            self.weights = [Tensor(p.data.astype(np.float32), requires_grad=True) for p in params]
            for p in params:
                p.data = p.data.astype(format_dtype(recipe.precision))
        else:
            for p in params:
                p.data = p.data.astype(recipe.precision)
            self.weights = params
        self.optimizer = (AdamW(decay_groups(self.weights, recipe.decay_all), lr=recipe.lr,
                                weight_decay=recipe.weight_decay) if recipe.weight_decay else Adam(self.weights, lr=recipe.lr))
        self.scaler = (DynamicLossScaler(recipe.init_scale, growth_interval=recipe.growth_interval)
                       if recipe.loss_scaling else None)

    def gradient(self, recipe: Recipe, x, y, total_tokens: int) -> tuple[np.ndarray, float]:
        """(this worker's gradient, flat, in the master format and still scaled; its summed loss) over its
        share ``x``, ``y`` of the batch."""
        model, vocab = self.model, len(self.model.token.data)
        scale = self.scaler.scale if self.scaler else 1.0
        total = [np.zeros(w.data.size, dtype=w.data.dtype) for w in self.weights]
        summed = 0.0
        pieces = [rows for rows in np.array_split(np.arange(len(x)), recipe.micro_batches) if len(rows)]
        for rows in pieces:
            model.zero_grad()
            logits = model(x[rows]).to(np.float32 if recipe.narrow else recipe.precision)  # the loss in fp32
            losses = cross_entropy(logits.reshape(-1, vocab), y[rows].reshape(-1), reduction="sum")
            summed += losses.item()
            if recipe.token_weighted:
                loss = losses / float(total_tokens)                    # every token of the batch weighs the same
            else:
                loss = losses / float(y[rows].size) / len(pieces)      # this piece's mean, ÷ the pieces
            (loss * scale).backward()
            for acc, p in zip(total, model.parameters()):
                acc += p.grad.ravel().astype(acc.dtype)                # add up in the master format
        return np.concatenate(total), summed

    def update(self, recipe: Recipe, flat: np.ndarray, lr: float) -> tuple[bool, float]:
        """Unscale, check, clip, step, refresh the 16-bit model. (whether the step was taken, gradient norm)."""
        sizes = np.cumsum([w.data.size for w in self.weights])[:-1]
        for w, piece in zip(self.weights, np.split(flat, sizes)):
            w.grad = piece.reshape(w.shape).astype(w.data.dtype)
        if self.scaler:
            grads, found_inf = self.scaler.unscale([w.grad for w in self.weights])
            self.scaler.update(found_inf)           # once per optimizer step, whatever the micro-batches
            if found_inf:
                return False, float("inf")          # overflow: skip this step, the weights stay
            for w, g in zip(self.weights, grads):
                w.grad = g.astype(w.data.dtype)
        norm = clip_grad_norm_(self.weights, recipe.max_norm) if recipe.max_norm else float(
            np.sqrt(sum(float(np.sum(w.grad.astype(np.float64) ** 2)) for w in self.weights)))
        self.optimizer.lr = lr
        for group in getattr(self.optimizer, "param_groups", ()):
            group["lr"] = lr                        # AdamW reads its rate from each group
        self.optimizer.step()
        if recipe.narrow:
            for p, w in zip(self.model.parameters(), self.weights):
                p.data = w.data.astype(p.data.dtype)
        return True, norm


class Trainer:
    """Train TinyGPT with a ``Recipe``: every worker computes its share's gradient, the ring sums them, and
    each worker takes the same step. ``log`` keeps, per step: the batch's loss, the learning rate, the
    gradient norm (inf on a skipped step), whether it was skipped, the loss scale."""

    def __init__(self, recipe: Recipe, vocab: int, seed: int = 0):
        self.recipe = recipe
        self.workers = [Worker(recipe, vocab, seed) for _ in range(recipe.workers)]
        self.step_count = 0
        self.log = {"loss": [], "lr": [], "norm": [], "skipped": [], "scale": []}
        self.bytes_sent = 0

    @property
    def model(self) -> TinyGPT:
        return self.workers[0].model

    def step(self, x, y) -> float:
        recipe, n = self.recipe, len(self.workers)
        shares = np.array_split(np.arange(len(x)), n)
        grads, summed = [], 0.0
        for worker, rows in zip(self.workers, shares):
            g, s = worker.gradient(recipe, x[rows], y[rows], total_tokens=y.size if n == 1 or recipe.all_reduce
                                      else y[rows].size)
            grads.append(g)
            summed += s
        if n > 1 and recipe.all_reduce:
            wires = Ring(n)
            reduced = ring(grads, wires)                                    # every worker gets the sum
            self.bytes_sent += wires.bytes_sent // n * grads[0].itemsize // 8   # in the gradient's own format
            # token-weighted losses already divide by the whole batch's tokens; each worker's mean needs ÷ N
            grads = [(r if recipe.token_weighted else r / n).astype(g.dtype) for r, g in zip(reduced, grads)]
        scaler = self.workers[0].scaler
        self.last_gradient = grads[0].astype(np.float64) / (scaler.scale if scaler else 1.0)  # worker 0's, unscaled
        lr = recipe.learning_rate(self.step_count)
        taken, norm = zip(*(worker.update(recipe, g, lr) for worker, g in zip(self.workers, grads)))
        self.step_count += 1
        loss = summed / y.size
        for key, value in (("loss", loss), ("lr", lr), ("norm", norm[0]), ("skipped", not taken[0]),
                           ("scale", scaler.scale if scaler else 1.0)):
            self.log[key].append(value)
        return loss

    def train(self, data: np.ndarray, steps: int, batch: int = 16, length: int = 32, seed: int = 0) -> dict:
        """``steps`` steps on random windows of ``data``, drawn as section 4's loop draws them; the log."""
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            self.step(*random_batch(data, batch=batch, length=length, rng=rng))
        return self.log

def flat_weights(model: TinyGPT) -> np.ndarray:
    return np.concatenate([p.data.astype(np.float64).ravel() for p in model.parameters()])


def train_in_torch(recipe: Recipe, model: TinyGPT, batches, torch) -> tuple[list, list, list]:
    """The recipe's steps written again in PyTorch, from ``model``'s weights, on the given (x, y) batches:
    fp32 (or float64) parameters that ``torch.optim.Adam`` (``AdamW`` with the same groups, with weight decay) updates, ``torch.autocast("cpu", torch.bfloat16)``
    for a bfloat16 recipe, ``torch.utils.checkpoint`` around each block, micro-batches whose ``.grad`` add up,
    ``torch.amp.GradScaler`` (scale, unscale_, step, update), ``clip_grad_norm_`` after unscaling, the
    learning rate set each step. The workers' shares are micro-batches too: summing them is what the ring
    does. Returns (the losses, the final weights in ``model.parameters()`` order, the skipped steps)."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    from ..tools.torch_mirror import block_in_torch

    if recipe.precision not in ("float64", "float32", "bfloat16"):
        raise ValueError("train_in_torch: float64, float32 or bfloat16 (CPU autocast computes in bfloat16)")
    wide = torch.float64 if recipe.precision == "float64" else torch.float32
    params = model.parameters()
    P = {id(p): torch.tensor(np.asarray(p.data, dtype=np.float64), dtype=wide, requires_grad=True) for p in params}
    ordered = [P[id(p)] for p in params]
    if recipe.weight_decay:   # the same groups as haaw's, in torch.optim.AdamW's own form
        groups = [{**g, "params": [P[id(p)] for p in g["params"]]} for g in decay_groups(params, recipe.decay_all)]
        optimizer = torch.optim.AdamW(groups, lr=recipe.lr, weight_decay=recipe.weight_decay)
    else:
        optimizer = torch.optim.Adam(ordered, lr=recipe.lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=recipe.init_scale, growth_interval=recipe.growth_interval,
                                  enabled=recipe.loss_scaling)

    def forward(ids):
        T = ids.shape[1]
        x = P[id(model.token)][torch.as_tensor(ids)] + P[id(model.position)][:T]
        for block in model.blocks:
            run = (lambda h, block=block: block_in_torch(block, h, None, torch, is_causal=True, params=P)[0])
            x = torch_checkpoint(run, x, use_reentrant=False) if recipe.checkpointing else run(x)
        h = torch.nn.functional.layer_norm(x, x.shape[-1:], P[id(model.ln.weight)], P[id(model.ln.bias)],
                                           eps=model.ln.eps)
        return h @ P[id(model.head.weight)] + P[id(model.head.bias)]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs fastest on one thread; on a busy machine the others spin
    try:
        return _torch_steps(recipe, batches, torch, forward, ordered, optimizer, scaler, wide)
    finally:
        torch.set_num_threads(threads)


def _torch_steps(recipe, batches, torch, forward, ordered, optimizer, scaler, wide):
    losses, skipped = [], []
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        summed = 0.0
        pieces = [rows for share in np.array_split(np.arange(len(x)), recipe.workers)
                  for rows in np.array_split(share, recipe.micro_batches) if len(rows)]
        for rows in pieces:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=recipe.narrow):
                logits = forward(x[rows])
            token_losses = torch.nn.functional.cross_entropy(logits.to(wide).reshape(-1, logits.shape[-1]),
                                                             torch.as_tensor(y[rows].reshape(-1)), reduction="sum")
            summed += token_losses.item()
            scaler.scale(token_losses / y.size).backward()       # .grad adds up over the pieces
        scaler.unscale_(optimizer)                                # once per optimizer step
        if recipe.max_norm:
            torch.nn.utils.clip_grad_norm_(ordered, recipe.max_norm)
        for group in optimizer.param_groups:
            group["lr"] = recipe.learning_rate(step)
        before = scaler.get_scale() if recipe.loss_scaling else None
        scaler.step(optimizer)                                    # skipped if a gradient is inf or nan
        scaler.update()
        skipped.append(bool(recipe.loss_scaling and scaler.get_scale() < before))
        losses.append(summed / y.size)
    return losses, [t.detach().to(torch.float64).numpy() for t in ordered], skipped
