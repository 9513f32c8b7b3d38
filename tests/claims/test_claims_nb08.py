"""The claims of notebook 08: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest

from haaw import Function, Tensor
from haaw.course.exercises import check
from haaw.course.exercises.nb08 import AUDITED, buggy_loss, CHECKS, per_token_loss
from haaw.course.nb08 import gradient, make_model, masked_mean, mean_over_padded, padded_batch, token_losses
from haaw.optim import SGD
from haaw.tools.audit import audit


def test_08_masking_after_the_reduction_makes_the_gradient_depend_on_padding_length():
    model = make_model()
    short, long = padded_batch(pad_to=6), padded_batch(pad_to=12)
    (_, right_short), (_, right_long) = gradient(model, masked_mean, short), gradient(model, masked_mean, long)
    (_, wrong_short), (_, wrong_long) = gradient(model, mean_over_padded, short), gradient(model, mean_over_padded, long)
    for a, b in zip(right_short, right_long):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)  # same data, same gradient
    assert np.linalg.norm(wrong_short[0]) == pytest.approx(2 * np.linalg.norm(wrong_long[0]), rel=1e-9)


def _step(model, lr=0.1):
    """One SGD step on notebook 08's test batch; returns each parameter's largest move."""
    inputs, targets, mask = padded_batch()
    before = [p.data.copy() for p in model.parameters()]
    optimizer = SGD(model.parameters(), lr=lr)
    optimizer.zero_grad()
    masked_mean(token_losses(model, inputs, targets), mask).backward()
    optimizer.step()
    return [float(np.max(np.abs(p.data - b))) for p, b in zip(model.parameters(), before)]


def test_08_a_module_attribute_freezes_nothing_requires_grad_false_freezes_the_layer():
    model = make_model()
    model.layers[0].requires_grad = False  # the attribute of the module: nothing frozen
    assert all(p.requires_grad for p in model.parameters())
    assert all(moved > 1e-4 for moved in _step(model))

    model = make_model()
    model.layers[0].requires_grad_(False)
    first, second = model.layers[0].parameters(), model.layers[1].parameters()
    assert len(model.parameters()) == 4  # frozen parameters are still listed, as in PyTorch
    moved = _step(model)
    assert moved[:2] == [0.0, 0.0] and all(p.grad is None for p in first)
    assert all(m > 1e-4 for m in moved[2:]) and all(p.grad is not None for p in second)


def test_08_the_audit_checks_frozen_parameters_and_flags_one_that_got_a_gradient():
    model = make_model()
    model.layers[0].freeze()
    report = audit(model, token_losses, masked_mean, padded_batch(), optimizer=SGD(model.parameters(), lr=0.1))
    assert report.ok and "frozen parameters untouched" in str(report)
    inputs, targets, mask = padded_batch()
    model = make_model()
    masked_mean(token_losses(model, inputs, targets), mask).backward()
    for p in model.layers[0].parameters():  # frozen by hand after a backward: the old gradient stays
        p.requires_grad = False
    report = audit(model, token_losses, masked_mean, padded_batch(), optimizer=SGD(model.parameters(), lr=0.1))
    assert "frozen parameters untouched" in report.failed


def test_08_version_counters_catch_an_in_place_edit_but_not_one_through_data():
    x = Tensor(np.array([1.0, 2.0, 3.0]))
    w = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    loss = (x * w).sum()
    x += 10.0
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()

    x = Tensor(np.array([1.0, 2.0, 3.0]))
    w = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    loss = (x * w).sum()
    x.data += 10.0
    loss.backward()  # no error, and the gradient comes from the edited numbers
    np.testing.assert_array_equal(w.grad, [11.0, 12.0, 13.0])

    torch = pytest.importorskip("torch")
    x_t = torch.tensor([1.0, 2.0, 3.0])
    w_t = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss_t = (x_t * w_t).sum()
    x_t += 10.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss_t.backward()
    x_t = torch.tensor([1.0, 2.0, 3.0])
    w_t = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss_t = (x_t * w_t).sum()
    x_t.data += 10.0
    loss_t.backward()
    np.testing.assert_array_equal(w_t.grad.numpy(), [11.0, 12.0, 13.0])


def test_08_the_version_check_catches_an_optimizer_step_between_forward_and_backward():
    inputs, targets, mask = padded_batch()
    model = make_model()
    optimizer = SGD(model.parameters(), lr=0.1)
    masked_mean(token_losses(model, inputs, targets), mask).backward()
    loss = masked_mean(token_losses(model, inputs, targets), mask)
    optimizer.step()
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def _cubes():
    class Cube(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.a = a
            return a**3

        @staticmethod
        def backward(ctx, g):
            return g * ctx.a**2

    class FixedCube(Cube):
        @staticmethod
        def backward(ctx, g):
            return 3 * g * ctx.a**2

    return Cube, FixedCube


def test_08_the_healthy_step_passes_and_the_cube_and_halved_uneven_microbatches_fail():
    Cube, FixedCube = _cubes()
    x0 = np.array([0.5, -1.0, 2.0])
    model = make_model()
    model.layers[0].freeze()
    healthy = audit(model, token_losses, masked_mean, padded_batch(), optimizer=SGD(model.parameters(), lr=0.1),
                    custom_ops=[(FixedCube.apply, (x0,))])
    assert healthy.ok, str(healthy)
    sick = audit(model, token_losses, masked_mean, padded_batch(), optimizer=SGD(model.parameters(), lr=0.1),
                 custom_ops=[(Cube.apply, (x0,))], accumulation=2, accumulation_scale=0.5)
    assert sick.failed == ["gradcheck of Cube", "accumulation over 2 microbatches"]
    mask = padded_batch()[2]
    assert [mask[:2].sum(), mask[2:].sum()] == [9, 7]  # "the first two rows 9, the last two 7"


def test_08_the_first_failing_check_of_each_exercise_step():
    step_a = lambda L, m: ((L * m).sum(dim=1) / m.sum(axis=1)).mean()
    step_b = lambda L, m: (L * m).sum() / float(m.sum())
    step_c = lambda L, m: L.mean() * float(m.mean() > 0)
    assert audit(make_model(), token_losses, step_a, padded_batch()).failed[0] == "loss unit"
    same = padded_batch(lengths=(5, 5, 5, 5))
    b = audit(make_model(), token_losses, step_b, same, accumulation=2, accumulation_scale=1.0)
    assert b.failed == ["accumulation over 2 microbatches"]
    assert audit(make_model(), token_losses, step_c, padded_batch()).failed[0] == "mask before the reduction"
    assert not audit(make_model(), token_losses, buggy_loss, padded_batch()).ok
    assert audit(make_model(), token_losses, per_token_loss, padded_batch()).ok


def _steps():
    step_a = lambda L, m: ((L * m).sum(dim=1) / m.sum(axis=1)).mean()
    step_b = lambda L, m: (L * m).sum() / float(m.sum())
    step_c = lambda L, m: L.mean() * float(m.mean() > 0)
    return step_a, step_b, step_c


def _audits():
    step_a, step_b, step_c = _steps()
    return {"a": audit(make_model(), token_losses, step_a, padded_batch()),
            "b": audit(make_model(), token_losses, step_b, padded_batch(lengths=(5, 5, 5, 5)), accumulation=2,
                       accumulation_scale=1.0),
            "c": audit(make_model(), token_losses, step_c, padded_batch())}


def test_08_what_the_exercise_checkers_say_about_each_check_is_what_the_audit_says():
    for step, report in _audits().items():
        said = {("accumulation" if item.check.startswith("accumulation over") else
                 "gradcheck" if item.check.startswith("gradcheck of") else item.check): item.status
                for item in report.items}
        assert said == AUDITED[step], step
        first = next(c for c in CHECKS if said.get(c) == "✗")
        key = f"08-bug-{step}"
        assert check(key, first).correct
        for c in CHECKS:
            if c == first:
                continue
            message = check(key, c).message
            if c not in said:
                assert "does not run" in message, (step, c)
            elif said[c] == "✓":
                assert "The audit passes" in message, (step, c)
            else:
                assert "but not first" in message and "The audit passes" not in message, (step, c)


def test_08_four_unscaled_microbatch_means_give_four_times_the_gradient():
    batch = padded_batch(lengths=(5, 5, 5, 5))
    _, one = gradient(make_model(), masked_mean, batch)
    model = make_model()
    for row in range(4):
        inputs, targets, mask = (a[row:row + 1] for a in batch)
        masked_mean(token_losses(model, inputs, targets), mask).backward()
    for p, g in zip(model.parameters(), one):
        np.testing.assert_allclose(p.grad, 4 * g, rtol=1e-12, atol=1e-15)


def test_08_the_repair_exercise_has_two_bugs_and_is_not_step_c_again():
    step_a, _, step_c = _steps()
    inputs, targets, mask = padded_batch()
    losses = token_losses(make_model(), inputs, targets)
    assert abs(buggy_loss(losses, mask).item() - step_c(losses, mask).item()) > 0.1
    report = audit(make_model(), token_losses, buggy_loss, padded_batch())
    assert report.failed[0] == "mask before the reduction"
    # the mask applied first, the sequences still averaged one by one: the unit bug is left
    mask_fixed = audit(make_model(), token_losses, step_a, padded_batch())
    assert mask_fixed.failed == ["loss unit"] and "per example" in str(mask_fixed)


def _monitored_run():
    inputs, targets, mask = padded_batch()
    model = make_model()
    optimizer = SGD(model.parameters(), lr=0.1)
    norms, flagged = [], []
    for step in range(60):
        if step < 40:
            optimizer.zero_grad()
        masked_mean(token_losses(model, inputs, targets), mask).backward()
        norms.append(float(np.sqrt(sum(np.sum(p.grad**2) for p in model.parameters()))))
        if step >= 10 and norms[-1] > 1.5 * np.median(norms[-11:-1]):
            flagged.append(step)
        optimizer.step()
    return norms, flagged


def test_08_the_planted_stale_gradient_bug_is_flagged_at_step_40_to_48_and_the_norm_climbs():
    norms, flagged = _monitored_run()
    assert flagged == list(range(40, 49))
    assert round(norms[0], 2) == 0.69 and round(norms[39], 3) == 0.351 and round(norms[40], 3) == 0.691
    assert round(norms[59], 1) == 2.9


def test_08_the_first_gradient_norm_of_the_monitored_run_agrees_with_finite_differences():
    inputs, targets, mask = padded_batch()
    model = make_model()
    masked_mean(token_losses(model, inputs, targets), mask).backward()
    engine = np.sqrt(sum(np.sum(p.grad**2) for p in model.parameters()))
    fd, h = [], 1e-6
    for p in model.parameters():
        for i in range(p.data.size):
            flat = p.data.reshape(-1)
            old = flat[i]
            flat[i] = old + h
            up = float(masked_mean(token_losses(model, inputs, targets), mask).data)
            flat[i] = old - h
            down = float(masked_mean(token_losses(model, inputs, targets), mask).data)
            flat[i] = old
            fd.append((up - down) / (2 * h))
    assert np.sqrt(np.sum(np.square(fd))) == pytest.approx(engine, rel=1e-6)


def test_08_anomaly_detection_names_pow_for_the_root_of_zero():
    from haaw import detect_anomaly
    with np.errstate(divide="ignore"):
        assert np.isinf(0.5 * np.float64(0.0) ** -0.5)  # numpy: the derivative of the root at 0 is inf
    with np.errstate(divide="ignore", invalid="ignore"):
        v = Tensor(np.zeros(3), requires_grad=True)
        ((v * v).sum() ** 0.5).backward()
        assert np.all(np.isnan(v.grad))
        w = Tensor(np.zeros(3), requires_grad=True)
        with pytest.raises(FloatingPointError, match="backward of 'pow'"):
            with detect_anomaly():
                ((w * w).sum() ** 0.5).backward()
