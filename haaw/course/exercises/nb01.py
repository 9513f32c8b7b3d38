"""Exercises of notebook 01: the chain rule on one tiny chain."""
from .core import Exercise, register

register(Exercise(
    key="01-dL/dw",
    question="w = 2, x = 3, y = w·x, L = y². Predict dL/dw by hand.",
    answer=36,
    mistakes={
        12: "12 is dL/dy: you stopped one link early. Multiply by dy/dw too.",
        6: "6 is y, the forward value, not a derivative.",
        3: "3 is dy/dw = x alone: it still has to be multiplied by dL/dy.",
        4: "4 is dL/dw only if dL/dy were 2·w: L = y², so dL/dy = 2·y, and y = 6.",
    },
    hints=("Split the chain: first dL/dy, then dy/dw.",
           "L = y² gives dL/dy = 2y = 12; y = w·x gives dy/dw = x = 3.",
           "The chain rule multiplies the links: dL/dw = dL/dy · dy/dw."),
    solution="dL/dy = 2y = 12, dy/dw = x = 3, so dL/dw = 12 · 3 = 36.",
))

register(Exercise(
    key="01-step",
    question="Take one gradient-descent step from w = 2 with dL/dw = 36 and η = 0.01. The new w?",
    answer=1.64,
    mistakes={
        2.36: "2.36 moves *with* the gradient, which raises the loss: subtract η·dL/dw instead.",
        0.36: "0.36 is the step η·dL/dw; the new weight is the old one minus that step.",
        -34: "-34 forgot the learning rate: the step is η·dL/dw, not dL/dw.",
        1.88: "1.88 used dL/dy = 12; the update needs dL/dw.",
    },
    hints=("The update rule is w_new = w_old − η · dL/dw.",
           "η · dL/dw = 0.01 · 36 = 0.36."),
    solution="w_new = 2 − 0.01 · 36 = 2 − 0.36 = 1.64.",
))

register(Exercise(
    key="01-chain",
    question="w = 0.5, A = 4w, B = A², C = B + 1, L = 3C. Compute dL/dw with the chain rule.",
    answer=48,
    mistakes={
        12: "12 is dL/dA: one link is missing, dA/dw = 4.",
        3: "3 is dL/dC only: keep multiplying down the chain, to w.",
        16: "16 forgot the last link, dL/dC = 3.",
        24: "24 used dB/dA = A; for B = A² the derivative is 2A = 4.",
        15: "15 is L itself, the forward value.",
    },
    hints=("Forward first: A = 2, B = 4, C = 5, L = 15. Then one local derivative per link.",
           "dL/dC = 3, dC/dB = 1, dB/dA = 2A = 4, dA/dw = 4.",
           "Multiply the four links."),
    solution="dL/dw = dL/dC · dC/dB · dB/dA · dA/dw = 3 · 1 · 4 · 4 = 48.",
))
