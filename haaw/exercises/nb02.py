"""Exercises of notebook 02: computation graphs and reverse mode."""
from .core import Exercise, register

register(Exercise(
    key="02-fan-out",
    question="a = 3, b = 4, L = a·b + a. What is dL/da?",
    answer=5,
    mistakes={
        4: "4 counts only the path through a·b. a also reaches the + directly: add that path's 1.",
        1: "1 counts only the direct path into the +. a also goes through a·b, which contributes b = 4.",
        3: "3 is dL/db = a. The question asks for dL/da.",
        15: "15 is L itself, the forward value.",
    },
    hints=("a is used twice. Each use sends its own contribution back.",
           "Through a·b: 1 · b = 4. Directly into the +: 1.",
           "Contributions from several uses are added."),
    solution="a feeds two operations: a·b contributes b = 4, the + contributes 1; dL/da = 4 + 1 = 5.",
))

register(Exercise(
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
           "Direct use: h = 6. Through h: dL/dh · dh/dw = w · x = 3 · 2 = 6.",),
    solution="Direct use: h = 6; through h: w · x = 6; the sum is 12 (check: L = w²x, dL/dw = 2wx = 12).",
))

register(Exercise(
    key="02-passes",
    question="A model has 1,000,000 parameters and one scalar loss. How many forward-mode passes "
             "give the whole gradient?",
    answer=1_000_000,
    mistakes={
        1: "1 is reverse mode's count: one backward pass. Forward mode carries one input direction per pass.",
        2: "2 is one forward plus one backward pass: that is reverse mode.",
        2_000_000: "Forward mode computes values and derivatives in the same pass, one pass per parameter.",
    },
    hints=("Forward mode pushes d/dθ for one chosen θ through the whole computation.",
           "One pass tells you how the loss moves when one parameter moves."),
    solution="One pass per parameter: 1,000,000 forward-mode passes, against one backward pass in reverse mode.",
))
