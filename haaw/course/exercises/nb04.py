"""Exercises of notebook 04: gradient flow through residuals, normalisation and activations."""
from .core import Exercise, register

register(Exercise(
    key="04-residual",
    question="y = x + F(x). Backward arrives with dL/dy = 2.0, and F's own derivative is dF/dx = 0.001. dL/dx?",
    answer=2.002,
    mistakes={
        0.002: "0.002 is only the path through F. The skip path x → y passes dL/dy = 2.0 on unchanged: add it.",
        2.0: "2.0 is only the skip path. F's path adds its own, small, contribution 2.0 × 0.001.",
        0.001: "0.001 is F's local derivative alone; multiply by the upstream gradient and add the skip path.",
    },
    hints=("x reaches y along two paths: directly, and through F. Their contributions add.",
           "Direct path: dL/dy × 1. Through F: dL/dy × dF/dx."),
    solution="dL/dx = dL/dy · (1 + dF/dx) = 2.0 × 1.001 = 2.002: the skip path alone delivers 2.0.",
))

register(Exercise(
    key="04-product",
    question="Each of 50 layers multiplies the gradient by 0.9 on its way back. What fraction of the "
             "gradient at the top reaches the first layer?",
    answer=0.9**50,
    mistakes={
        45: "45 is 50 × 0.9: per-layer factors multiply, they do not add.",
        0.9: "0.9 is what one layer does. There are 50 of them in a row.",
        0.1**50: "0.1 is what each layer takes away, not what it keeps.",
        0.5: "Close in spirit, but work it out: 0.9 multiplied by itself 50 times.",
    },
    hints=("The chain rule multiplies the local factors along the path.", "0.9 ** 50"),
    solution="0.9⁵⁰ ≈ 0.0052: about half a percent survives. With 1.1 per layer, 1.1⁵⁰ ≈ 117: it explodes.",
    rtol=1e-3,
))

register(Exercise(
    key="04-clip",
    question="Two parameter tensors have gradients (3, 4) and (12,). What is their global gradient norm, "
             "the number clip_grad_norm compares with max_norm?",
    answer=13,
    mistakes={
        19: "19 adds the entries. The norm is the square root of the sum of the squares of all entries.",
        17: "17 adds the two tensors' own norms (5 + 12). Square every entry of both, sum, then take one root.",
        169: "169 is the sum of squares: take its square root.",
    },
    hints=("Treat all gradients as one long vector (3, 4, 12).", "√(3² + 4² + 12²)"),
    solution="√(9 + 16 + 144) = √169 = 13. Clipping to max_norm = 1 would multiply every gradient by 1/13.",
))
