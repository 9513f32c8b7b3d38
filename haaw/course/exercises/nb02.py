"""Exercises of notebook 02: computation graphs and reverse mode."""
from .core import Exercise, register

register(Exercise(
    key="02-fan-out",
    question="x = 2, L = x·x + 3·x. What is dL/dx?",
    answer=7,
    mistakes={
        5: "5 counts x·x once. x enters that multiplication twice, and each entry contributes the other factor (2): 2 + 2 + 3.",
        4: "4 counts only the path through x·x. x also reaches L through 3·x, which contributes 3.",
        3: "3 counts only the path through 3·x. x·x contributes too.",
        10: "10 is L itself, the forward value.",
    },
    hints=("x is used three times: twice in x·x, once in 3·x. Each use sends its own contribution back.",
           "In x·x, each of the two entries contributes the other factor, x = 2. In 3·x, x contributes 3.",
           "Contributions from several uses are added."),
    solution="x·x contributes x + x = 4 (one per entry), 3·x contributes 3: dL/dx = 4 + 3 = 7 (= 2x + 3).",
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
