"""Notebook 10's props: a tiny character-level transformer, its text, and the glossary quiz.

Token and position embeddings, a few pre-norm transformer blocks with causal attention, a final
LayerNorm and a linear read-out: the same layers as a large language model, only small enough to
train on a laptop CPU in seconds. The text it learns ships with the package (``data/tiny_story.txt``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine import Tensor, no_grad
from ..nn import LayerNorm, Linear, Module, TransformerBlock
from ..nn.functional import causal_mask


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

    def forward(self, ids) -> Tensor:
        """Logits of shape (batch, positions, vocab): at each position, a guess at the next character."""
        ids = np.asarray(ids)
        T = ids.shape[1]
        if T > self.context:
            raise ValueError(f"TinyGPT: {T} positions, but the context is {self.context}")
        x = self.token[ids] + self.position[:T]
        mask = causal_mask(T)
        for block in self.blocks:
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
