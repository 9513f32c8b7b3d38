"""The claims of notebook 06: each figure or causal claim the notebook states, asserted."""


def test_06_checkpointing_saves_activation_memory_at_about_a_third_more_flops():
    from haaw.course.nb06 import measure

    plain = measure(depth=8, width=16, batch=8, segment=None, repeats=0)
    every = measure(depth=8, width=16, batch=8, segment=1, repeats=0)
    assert every["peak bytes"] < 0.3 * plain["peak bytes"]
    extra = every["recompute"] / (plain["forward"] + plain["backward"])
    assert 0.30 < extra < 0.36  # one more forward on top of forward + about two forwards of backward
    assert plain["recompute"] == 0 and every["seconds"] is None
