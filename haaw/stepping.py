"""Words and colours for one step of the backward pass (used by the step-through explorer).

A step is one node passing its gradient on: it receives the upstream gradient dL/d(node),
multiplies it by the local derivative d(node)/d(parent) for each parent, and *adds* the
product into that parent's grad. These functions say that in text, and pick what to colour.
"""
from __future__ import annotations

CURRENT, RECEIVING = "#f6b26b", "#b6d7a8"


def _name(node) -> str:
    return node.label or (f"({node._op})" if node._op else f"{node.data:g}")


def _formula(node) -> str:
    names = [_name(p) for p in node._parents]
    if len(names) == 2 and node._op in "+-*/":
        return f"{names[0]} {node._op} {names[1]}"
    if node._op.startswith("**"):
        return f"{names[0]}{node._op}"
    return f"{node._op}({', '.join(names)})"


def _fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def describe_step(root, start: dict, steps: list, k: int) -> str:
    """Step ``k`` of the trace in words; step 0 is the start, before any node has run."""
    if k == 0:
        return (f"Start: d{_name(root)}/d{_name(root)} = 1 is the seed at {_name(root)}; "
                "every other gradient starts at 0.\n"
                f"Move the slider: {len(steps)} node(s) will pass their gradient on, "
                "in reverse topological order.")
    step = steps[k - 1]
    node = step.node
    before = dict(start if k == 1 else steps[k - 2].grads_after)
    lines = [f"Step {k} of {len(steps)}: {_name(node)} = {_formula(node)}",
             f"  upstream gradient  dL/d{_name(node)} = {_fmt(step.upstream)}"]
    locals_ = getattr(node, "_local", None)
    for i, (parent, contribution) in enumerate(zip(node._parents, step.contributions)):
        local = locals_[i] if locals_ is not None else None
        was = before[id(parent)]
        before[id(parent)] = was + contribution
        lines.append(
            f"  → {_name(parent)}: local d{_name(node)}/d{_name(parent)} = {_fmt(local)}, "
            f"contribution {_fmt(step.upstream)} × {_fmt(local)} = {_fmt(contribution)}, "
            f"{_name(parent)}.grad {_fmt(was)} += {_fmt(contribution)} → {_fmt(before[id(parent)])}")
    return "\n".join(lines)


def step_highlights(steps: list, k: int) -> tuple[dict, dict]:
    """Colours (node being processed, parents receiving) and '+=' notes for step ``k``."""
    if k == 0:
        return {}, {}
    step = steps[k - 1]
    highlight = {id(p): RECEIVING for p in step.node._parents}
    highlight[id(step.node)] = CURRENT
    notes = {(id(p), id(step.node), i): f"+= {_fmt(c)}"
             for i, (p, c) in enumerate(zip(step.node._parents, step.contributions))}
    return highlight, notes
