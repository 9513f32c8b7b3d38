"""The course's vocabulary, and a quiz that matches each definition to its term."""
from __future__ import annotations

GLOSSARY = [
    ("gradient", "how much the loss changes per unit change of each parameter, one number per parameter"),
    ("backpropagation", "computing every gradient of one loss in a single backward pass, by the chain rule in reverse order"),
    ("upstream gradient", "dL/d(output), the number a node receives from later in the graph during backward"),
    ("local derivative", "how fast a node's output moves with one of its inputs, using only forward values"),
    ("vector-Jacobian product", "the upstream gradient pushed through an operation without ever building its Jacobian"),
    ("optimizer", "what turns gradients into a change of the parameters; not part of backpropagation"),
    ("activation checkpointing", "keeping only some forward values and recomputing the rest during backward"),
    ("loss scaling", "multiplying the loss before backward so small 16-bit gradients do not become zero"),
    ("all-reduce", "the collective operation that leaves every worker with the sum of all workers' gradients"),
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

    choosers = [widgets.Dropdown(options=["?"] + TERMS, value="?", layout=widgets.Layout(width="230px"))
                for _ in GLOSSARY]
    rows = [widgets.HBox([chooser, widgets.HTML(definition)]) for chooser, (_, definition) in zip(choosers, GLOSSARY)]
    button, result = widgets.Button(description="check my answers"), widgets.HTML()

    def on_click(_=None):
        right, lines = quiz_feedback({i: c.value for i, c in enumerate(choosers)})
        result.value = f"<pre>{right} of {len(GLOSSARY)} right\n" + "\n".join(lines) + "</pre>"

    button.on_click(on_click)
    return widgets.VBox(rows + [button, result])
