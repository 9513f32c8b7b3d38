"""The claims of notebook 07: each figure or causal claim the notebook states, asserted."""


def test_07_fp16_underflows_small_gradients_scaling_recovers_them_bf16_needs_it_less():
    from haaw.amp import cast_report
    from haaw.course.nb07 import trained_gradients

    grads = trained_gradients(steps=100)["dL/dlogits"]
    plain, scaled, bf16 = (cast_report(grads, "float16"), cast_report(grads, "float16", 2**10),
                           cast_report(grads, "bfloat16"))
    assert plain["zero"] > 0.3  # more than a third of a real model's gradients vanish in fp16
    assert scaled["zero"] < 0.05 and scaled["inf"] == 0
    assert bf16["zero"] == 0.0
