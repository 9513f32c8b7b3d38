"""Notebook 06's props: the memory calculator (the bytes a training step keeps, by parameter and by activation) and
the stack the notebooks checkpoint. (The engine's own memory accounting, measured on real operations:
tests/tools/test_memory.py.)"""
import numpy as np
import pytest

from haaw.course.nb06 import (GPT_125M, LLAMA_7B, MODEL_7B, TransformerShape, make_stack, run_stack, time_in_turns,
                              training_memory)


def test_the_memory_calculator_counts_16_bytes_per_parameter_with_adam_either_way():
    for precision in ("fp32", "mixed"):
        parts = training_memory(GPT_125M, batch=1, seq=1, precision=precision)
        per_param = (parts["weights"] + parts["gradients"] + parts["optimizer state"]) / GPT_125M.params
        assert per_param == 16
    sgd = training_memory(GPT_125M, 1, 1, optimizer="sgd")
    assert sgd["optimizer state"] == 0 and sgd["weights"] == 4 * GPT_125M.params


def test_activations_follow_the_published_formula_and_recomputation_shrinks_them():
    s, b, h, a, L = 2048, 8, 4096, 32, 32
    mixed = training_memory(MODEL_7B, batch=b, seq=s, precision="mixed")
    assert mixed["activations"] == L * s * b * h * (34 + 5 * a * s / h)
    # in fp32 every number doubles but the dropout masks stay 1 byte: 2·16 + 2 and 2·2 + 1
    assert training_memory(MODEL_7B, b, s, precision="fp32")["activations"] == L * s * b * h * (66 + 9 * a * s / h)
    recomputed = training_memory(MODEL_7B, b, s, precision="mixed", recompute=True)
    assert recomputed["activations"] == L * 2 * s * b * h
    with pytest.raises(ValueError, match="precision must be"):
        training_memory(MODEL_7B, 1, 1, precision="fp8")


def test_a_llama_style_layer_keeps_no_dropout_mask_and_four_swiglu_arrays_of_its_width():
    """No dropout: one number per score entry, no mask; SwiGLU keeps W₁x, W₃x, SiLU(W₁x) and their product."""
    s, b, h, a, f, L = 4096, 1, 4096, 32, 11008, 32
    # the two norms' inputs; Q, K, V's input, Q and K, V, the output projection's input; the SwiGLU input
    per_layer_numbers = s * b * h * (2 + 1 + 2 + 1 + 1 + 1) + 4 * s * b * f + s * s * a * b
    for precision, w in (("mixed", 2), ("fp32", 4)):
        parts = training_memory(LLAMA_7B, b, s, precision=precision)
        assert parts["activations"] == pytest.approx(L * w * per_layer_numbers)
    # the GELU layer without dropout, counted the same way, is Korthikanti et al.'s count less its masks
    no_dropout = TransformerShape("gpt, no dropout", 6.7e9, 32, h, a, dropout=False)
    assert training_memory(no_dropout, b, s, precision="mixed")["activations"] == pytest.approx(
        L * s * b * h * (32 + 2 * a * s / h))
    with pytest.raises(ValueError, match="mlp must be"):
        training_memory(TransformerShape("x", 1, 1, 8, 1, mlp="relu"), 1, 1)


def test_the_stack_gives_the_same_gradient_checkpointed_or_not_and_its_timer_takes_turns():
    blocks, layers = make_stack(depth=3, width=8)
    assert len(blocks) == 3 and len(layers) == 6
    x0 = np.random.default_rng(0).standard_normal((4, 8))
    assert np.array_equal(run_stack(blocks, x0).grad, run_stack(blocks, x0, segment=2).grad)
    calls = []
    times = time_in_turns({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, turns=3)
    assert calls == ["a", "b"] * 4  # one unmeasured run each, then three turns
    assert [len(t) for t in times.values()] == [3, 3] and all(v >= 0 for t in times.values() for v in t)
