"""Exercises of notebook 07: mixed precision."""
from .core import Exercise, register

register(Exercise(
    key="07-fp16-update",
    question="A weight w = 1.0 is stored in fp16. An update subtracts 0.0001. What does the fp16 weight hold afterwards?",
    answer=1.0,
    mistakes={
        0.9999: "0.9999 is the exact result, but fp16 cannot hold it: near 1 its numbers are 2⁻¹¹ ≈ 0.0005 "
                "apart below 1, so 0.9999 rounds back to 1.0. The update is lost.",
        0.999: "Rounding does not go down to the next fp16 number: 0.9999 is much closer to 1.0.",
    },
    hints=("fp16 has 10 fraction bits: just below 1 its numbers are 2⁻¹¹ apart.",
           "Round 0.9999 to the nearest multiple of 2⁻¹¹ ≈ 0.000488."),
    solution="1.0: the nearest fp16 numbers are 1.0 and 1 − 2⁻¹¹ ≈ 0.99951; 0.9999 rounds to 1.0. "
             "That is why the update goes to an fp32 master copy.",
))

register(Exercise(
    key="07-scale",
    question="A gradient is 2⁻³⁰ (about 9.3e-10); fp16's smallest subnormal is 2⁻²⁴. Which loss scale brings "
             "it exactly to 2⁻²⁴?",
    answer=64,
    mistakes={
        6: "6 is the exponent: the scale is 2⁶.",
        2**30: "2³⁰ would bring the gradient to 1: far more than needed, and larger gradients would overflow.",
        1 / 64: "Scaling down makes it smaller still: multiply by 64, don't divide.",
    },
    hints=("2⁻³⁰ × S = 2⁻²⁴.", "S = 2⁻²⁴ / 2⁻³⁰ = 2^(30 − 24)."),
    solution="S = 2⁶ = 64. Every gradient is multiplied by the same S, so the optimizer divides by 64 afterwards.",
))

register(Exercise(
    key="07-dynamic",
    question="A dynamic scaler starts at 65536, halves on overflow, doubles after 2000 clean steps in a row. "
             "Steps 1 and 2 overflow, then 2000 clean steps follow. What is the scale now?",
    answer=32768,
    mistakes={
        16384: "16384 is the scale after the two overflows; 2000 clean steps double it once.",
        65536: "Two halvings and one doubling do not cancel out.",
        131072: "Each overflow halves the scale: 65536 → 32768 → 16384, then one doubling.",
    },
    hints=("Two overflows: two halvings.", "Then one doubling after 2000 clean steps."),
    solution="65536 → 32768 → 16384 (two overflows, both steps skipped) → 32768 after 2000 clean steps.",
))
