"""The claims of notebook 08: each figure or causal claim the notebook states, asserted."""
import re
from pathlib import Path

import numpy as np
import pytest

from haaw import Function, Tensor
from haaw.course import nb08
from haaw.course.exercises import REGISTRY
from haaw.course.exercises.nb08 import buggy_loss, per_token_loss
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


@pytest.mark.upstream
def test_08_pytorch_s_version_counters_catch_an_in_place_edit_but_not_one_through_data():
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


def test_08_the_repair_exercise_s_step_fails_the_audit_and_the_reference_passes():
    assert not audit(make_model(), token_losses, buggy_loss, padded_batch()).ok
    assert audit(make_model(), token_losses, per_token_loss, padded_batch()).ok


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CORE, COMPANION = NOTEBOOKS / "08_what_can_go_wrong.ipynb", NOTEBOOKS / "deeper" / "08_what_can_go_wrong_deeper.ipynb"
LISTINGS = {"08-bug-a": "def loss_a(", "08-bug-b": "def loss_b(", "08-bug-c": "def train_step_c("}


def _listing(key):
    """The notebook's own cell for exercise ``key`` (in the core or its companion): (its numbered lines
    {number: code}, the function it defines)."""
    nbformat = pytest.importorskip("nbformat")
    source = next(c.source for path in (CORE, COMPANION) for c in nbformat.read(path, as_version=4).cells
                  if c.cell_type == "code" and c.source.startswith(LISTINGS[key]))
    numbered = {}
    for line in source.splitlines()[1:]:
        code, number = re.fullmatch(r"(.*?)\s+# (\d+): .*", line).groups()
        numbered[int(number)] = code.strip()
    namespace = {"nb08": nb08, "np": np}
    exec(source, namespace)
    return numbered, namespace[LISTINGS[key][4:-1]]


def _d_loss_d_losses(reduce, mask, losses=None):
    """The gradient of reduce(losses, mask) with respect to the loss of every position."""
    losses = Tensor(np.random.default_rng(5).uniform(0.5, 2.0, mask.shape) if losses is None else losses,
                    requires_grad=True)
    reduce(losses, mask).backward()
    return losses.grad


def test_08_each_listing_is_numbered_1_to_n_on_its_body_lines_as_its_exercise_says():
    for key in LISTINGS:
        numbered, _ = _listing(key)
        assert list(numbered) == list(range(1, REGISTRY[key].lines + 1)), key


def test_08_loss_a_weighs_each_sequence_equally_a_per_example_mean_and_line_4_alone_is_wrong():
    numbered, loss_a = _listing("08-bug-a")
    assert numbered[4] == "return (per_sequence / tokens).mean()"
    mask = padded_batch()[2]
    lengths = mask.sum(axis=1)
    assert lengths.tolist() == [6, 3, 5, 2]
    per_example = mask / lengths[:, None] / len(mask)  # section 2's weights, in NumPy
    grad = _d_loss_d_losses(loss_a, mask)
    np.testing.assert_allclose(grad, per_example, rtol=1e-12, atol=0)
    assert not np.allclose(grad, mask / mask.sum())  # not the per-token weight
    assert grad[3, 0] == pytest.approx(3 * grad[0, 0], rel=1e-12)  # a token of the 2-token row: 3x the 6-token row's
    raw = np.random.default_rng(5).uniform(0.5, 2.0, mask.shape)
    assert loss_a(Tensor(raw), mask).item() == pytest.approx(np.mean((raw * mask).sum(axis=1) / lengths), rel=1e-12)

    def fixed(losses, mask):  # lines 1 to 3 as they are; line 4 as the solution says
        masked = losses * mask
        per_sequence = masked.sum(dim=1)
        tokens = mask.sum(axis=1)
        return per_sequence.sum() / tokens.sum()
    np.testing.assert_allclose(_d_loss_d_losses(fixed, mask), mask / mask.sum(), rtol=1e-12, atol=0)
    report = audit(make_model(), token_losses, loss_a, padded_batch())
    assert report.failed == ["loss unit"] and "mean per example" in str(report)


def test_08_loss_b_lets_padded_positions_into_the_loss_and_line_1_alone_is_wrong():
    numbered, loss_b = _listing("08-bug-b")
    assert numbered[1] == "per_sequence = losses.sum(dim=1)"
    mask = padded_batch()[2]
    assert np.all(mask.sum(axis=1) > 0)  # line 2 keeps all four sequences: it changes nothing
    grad = _d_loss_d_losses(loss_b, mask)
    np.testing.assert_allclose(grad, np.full(mask.shape, 1 / mask.sum()), rtol=1e-12, atol=0)
    assert np.all(grad[mask == 0] > 0)  # the padded positions get a gradient: their losses are in the loss
    raw = np.random.default_rng(5).uniform(0.5, 2.0, mask.shape)
    assert loss_b(Tensor(raw), mask).item() == pytest.approx(raw.sum() / mask.sum(), rel=1e-12)

    def fixed(losses, mask):  # line 1 as the solution says; lines 2 and 3 as they are
        per_sequence = (losses * mask).sum(dim=1)
        kept = per_sequence * (mask.sum(axis=1) > 0)
        return kept.sum() / float(mask.sum())
    np.testing.assert_allclose(_d_loss_d_losses(fixed, mask), mask / mask.sum(), rtol=1e-12, atol=0)
    report = audit(make_model(), token_losses, loss_b, padded_batch())
    assert report.failed == ["mask before the reduction", "independent of padding length", "loss unit"]
    assert "neither" in str(report)
    # the audit's padding-length line: its padded positions (loss 1000, three per row) raise the loss by
    # 4 * 3 * 1000 / 16 = 750, through the sum of line 1 (the count of line 3 is the real tokens, 16)
    assert mask.shape[0] == 4 and mask.sum() == 16
    assert "divide by the number of real positions" in str(report)
    losses = token_losses(make_model(), *padded_batch()[:2])
    more = Tensor(np.concatenate([losses.data, np.full((4, 3), 1000.0)], axis=1))
    wider = np.concatenate([mask, np.zeros((4, 3))], axis=1)
    assert loss_b(more, wider).item() - loss_b(losses, mask).item() == pytest.approx(4 * 3 * 1000 / 16, rel=1e-12)
    line = next(line for line in str(report).splitlines() if "✗ independent of padding length" in line)
    before, after = map(float, re.search(r"\(([\d.]+) -> ([\d.]+)\)", line).groups())
    assert after - before == pytest.approx(750, abs=0.01)


def test_08_train_step_c_adds_two_full_means_twice_the_whole_batch_gradient_and_line_4_alone_is_wrong():
    numbered, train_step_c = _listing("08-bug-c")
    assert numbered[4] == "loss = (losses * mask[rows]).sum() / float(mask[rows].sum())"
    inputs, targets, mask = padded_batch(lengths=(5, 5, 5, 5))
    model = make_model()
    captured = {}

    class NoStep(SGD):  # the gradient train_step_c accumulated, read before its update
        def step(self):
            captured["grads"] = [p.grad.copy() for p in model.parameters()]

    train_step_c(model, NoStep(model.parameters(), lr=0.1), inputs, targets, mask)
    # the whole batch's per-token gradient, by central differences on a few weights of each parameter
    rng = np.random.default_rng(0)
    for p, g in zip(model.parameters(), captured["grads"]):
        flat = p.data.reshape(-1)
        for i in rng.choice(flat.size, size=min(6, flat.size), replace=False):
            old, h = flat[i], 1e-6
            flat[i] = old + h
            up = float(masked_mean(token_losses(model, inputs, targets), mask).data)
            flat[i] = old - h
            down = float(masked_mean(token_losses(model, inputs, targets), mask).data)
            flat[i] = old
            assert g.reshape(-1)[i] == pytest.approx(2 * (up - down) / (2 * h), rel=1e-5, abs=1e-9)

    # line 4 dividing by the whole batch's real tokens, as the solution says: the whole batch's gradient
    _, one = gradient(make_model(), masked_mean, (inputs, targets, mask))
    fixed = make_model()
    fixed.zero_grad()
    for rows in ([0, 1], [2, 3]):
        ((token_losses(fixed, inputs[rows], targets[rows]) * mask[rows]).sum() / float(mask.sum())).backward()
    for p, g, g2 in zip(fixed.parameters(), one, captured["grads"]):
        np.testing.assert_allclose(p.grad, g, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(g2, 2 * g, rtol=1e-12, atol=1e-15)

    # line 1 inside the loop would wipe the first microbatch's gradient (its line note)
    wiped = make_model()
    for rows in ([0, 1], [2, 3]):
        wiped.zero_grad()
        ((token_losses(wiped, inputs[rows], targets[rows]) * mask[rows]).sum() / float(mask[rows].sum())).backward()
    _, last = gradient(make_model(), masked_mean, (inputs[[2, 3]], targets[[2, 3]], mask[[2, 3]]))
    for p, g in zip(wiped.parameters(), last):
        np.testing.assert_allclose(p.grad, g, rtol=1e-12, atol=1e-15)


def test_08_the_audit_and_the_run_below_the_exercises_say_what_the_notebook_shows(stored_output):
    _, train_step_c = _listing("08-bug-c")
    batch = padded_batch(lengths=(5, 5, 5, 5))
    line_4 = lambda losses, mask: (losses * mask).sum() / float(mask.sum())
    report = audit(make_model(), token_losses, line_4, batch, accumulation=2, accumulation_scale=1.0)
    assert report.failed == ["accumulation over 2 microbatches"] and "is 2× the one-batch" in str(report)
    accumulating, whole = make_model(), make_model()
    start = whole.parameters()[0].data.copy()
    train_step_c(accumulating, SGD(accumulating.parameters(), lr=0.1), *batch)
    gradient(whole, masked_mean, batch)
    SGD(whole.parameters(), lr=0.1).step()
    moved = np.linalg.norm(accumulating.parameters()[0].data - start) / np.linalg.norm(whole.parameters()[0].data - start)
    assert moved == pytest.approx(2, abs=5e-4)
    assert "2.000 times as far" in stored_output("08", "train_step_c(accumulating")


def test_08_four_unscaled_microbatch_means_give_four_times_the_gradient():
    batch = padded_batch(lengths=(5, 5, 5, 5))
    _, one = gradient(make_model(), masked_mean, batch)
    model = make_model()
    for row in range(4):
        inputs, targets, mask = (a[row:row + 1] for a in batch)
        masked_mean(token_losses(model, inputs, targets), mask).backward()
    for p, g in zip(model.parameters(), one):
        np.testing.assert_allclose(p.grad, 4 * g, rtol=1e-12, atol=1e-15)


def test_08_the_repair_exercise_has_two_bugs_and_is_not_loss_b_again():
    _, loss_a = _listing("08-bug-a")
    _, loss_b = _listing("08-bug-b")
    inputs, targets, mask = padded_batch()
    losses = token_losses(make_model(), inputs, targets)
    assert abs(buggy_loss(losses, mask).item() - loss_b(losses, mask).item()) > 0.1
    report = audit(make_model(), token_losses, buggy_loss, padded_batch())
    assert report.failed[0] == "mask before the reduction"
    # the mask applied first, the sequences still averaged one by one (loss_a): the unit bug is left
    mask_fixed = audit(make_model(), token_losses, loss_a, padded_batch())
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


@pytest.mark.upstream
def test_08_pytorch_anomaly_mode_names_the_multiplication_one_operation_after_the_root():
    torch = pytest.importorskip("torch")
    v = torch.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="MulBackward0") as raised, pytest.warns(UserWarning):
        with torch.autograd.detect_anomaly():
            ((v * v).sum() ** 0.5).backward()
    assert "Pow" not in str(raised.value) and "nan" in str(raised.value)


@pytest.mark.upstream
def test_08_pytorch_catches_a_step_before_backward_only_for_a_weight_that_backward_saved():
    torch = pytest.importorskip("torch")

    def step_then_backward(input_needs_grad):
        layer = torch.nn.Linear(3, 2)
        x = torch.ones(4, 3, requires_grad=input_needs_grad)
        loss = layer(x).sum()
        with torch.no_grad():
            layer.weight.add_(1.0)   # what optimizer.step() does, in place
            layer.bias.add_(1.0)
        loss.backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        step_then_backward(input_needs_grad=True)    # the weight was saved to form the input's gradient
    step_then_backward(input_needs_grad=False)        # nothing saved that the step changed: no error

    bias_only = torch.nn.Linear(3, 2)
    loss = bias_only(torch.ones(4, 3, requires_grad=True)).sum()
    with torch.no_grad():
        bias_only.bias.add_(1.0)
    loss.backward()                                   # a bias is never saved: never caught


def _loss_after_training(reduction, pad_to, steps=20, lr=0.5):
    model = make_model()
    optimizer = SGD(model.parameters(), lr=lr)
    inputs, targets, mask = padded_batch(pad_to=pad_to)
    for _ in range(steps):
        optimizer.zero_grad()
        reduction(token_losses(model, inputs, targets), mask).backward()
        optimizer.step()
    return masked_mean(token_losses(model, inputs, targets), mask).item()


def test_08_the_repaired_step_trains_alike_whatever_the_padding_and_section_1_s_bug_does_not(stored_output):
    repaired = [_loss_after_training(per_token_loss, pad_to) for pad_to in (6, 12)]
    bug = [_loss_after_training(mean_over_padded, pad_to) for pad_to in (6, 12)]
    assert repaired[0] == pytest.approx(repaired[1], rel=1e-12)
    assert repaired[0] < bug[0] < bug[1]  # the bug's steps shrink as padding grows: it learns less, and less again
    printed = stored_output("08", "def loss_after_training(")
    numbers = {label: [float(v) for v in re.findall(r"to 1?[26] (\d\.\d{4})", line)]
               for line in printed.splitlines() for label in ("the repaired step", "section 1's bug")
               if line.startswith(label)}
    assert numbers["the repaired step"] == [round(v, 4) for v in repaired]
    assert numbers["section 1's bug"] == [round(v, 4) for v in bug]


def test_08_adam_s_first_step_barely_changes_with_four_times_the_gradient_sgd_s_is_four_times(stored_output):
    from haaw.optim import Adam

    inputs, targets, mask = padded_batch()

    def first_step(optimizer_class, scale):
        model = make_model()
        optimizer = optimizer_class(model.parameters(), lr=0.01)
        start = model.parameters()[0].data.copy()
        optimizer.zero_grad()
        (masked_mean(token_losses(model, inputs, targets), mask) * scale).backward()
        optimizer.step()
        return np.linalg.norm(model.parameters()[0].data - start)

    assert first_step(SGD, 4) / first_step(SGD, 1) == pytest.approx(4, rel=1e-9)
    assert first_step(Adam, 4) / first_step(Adam, 1) == pytest.approx(1, abs=1e-4)  # only eps tells them apart
    printed = stored_output("08", "def first_step(")
    assert "SGD : the step with 4 × the gradient is 4.000 times" in printed
    assert "Adam: the step with 4 × the gradient is 1.000 times" in printed


# --- the companion: a loss spike, the first module to make an inf, the 2024 accumulation bug -------------------


def _loss_and_grad_norm(model, batch):
    model.zero_grad()
    loss = masked_mean(token_losses(model, batch[0], batch[1]), batch[2])
    loss.backward()
    return loss.item(), float(np.sqrt(sum(np.sum(p.grad ** 2) for p in model.parameters())))


def test_08_a_bad_batch_shows_in_the_gradient_norm_before_the_loss_and_skipping_it_avoids_the_spike(stored_output):
    good, bad = padded_batch(), (np.full((1, 40), 2), np.full((1, 40), 0), np.ones((1, 40)))

    def run(skip_bad):
        model = make_model()
        losses, norms = [], []
        for step in range(60):
            _, norm = _loss_and_grad_norm(model, bad if step == 30 else good)
            norms.append(norm)
            if not (skip_bad and step == 30):
                for p in model.parameters():
                    p.data = p.data - 1.0 * p.grad
            losses.append(masked_mean(token_losses(model, *good[:2]), good[2]).item())
        return losses, norms
    losses, norms = run(False)
    assert norms[30] > 100 * norms[29] and losses[29] < 0.02 and losses[30] > 20
    assert next(s for s in range(30, 60) if losses[s] <= losses[29]) == 52
    skipped, _ = run(True)
    assert max(skipped[30:]) <= skipped[29]
    text = stored_output("08", "spike_runs = {policy")
    assert "the norm of step 30 is 389 times step 29's" in text
    assert re.search(r"none .*26\.935; back under step 29's loss after step 52;", text)
    assert re.search(r"clip .*0\.693; back under step 29's loss after step 35;", text)
    assert re.search(r"skip .*after step 30;.*steps redone: 0", text) and re.search(r"roll back .*after step 30;.*steps redone: 1", text)


def test_08_the_nan_of_the_fp16_logits_is_born_as_an_inf_in_the_first_layer(stored_output):
    from haaw.nn import MLP
    model = MLP([8, 32, 32, 5], "relu", seed=0, dtype=np.float16)
    x = np.random.default_rng(0).standard_normal((16, 8))
    x[5] = 60000.0
    assert np.isfinite(np.float16(60000.0))
    with np.errstate(over="ignore", invalid="ignore"):
        h0 = x.astype(np.float16).astype(np.float32) @ model.layers[0].weight.data.astype(np.float32) \
            + model.layers[0].bias.data.astype(np.float32)
        assert np.sum(np.abs(h0) > 65504) == 1 and np.all(np.abs(np.delete(h0, 5, axis=0)) < 65504)
        out = model(Tensor(x.astype(np.float16))).data
    assert sorted({int(r) for r in np.argwhere(np.isnan(out))[:, 0]}) == [5] and np.sum(np.isnan(out)) == 5
    text = stored_output("08", "def watch_modules(")
    assert "the first module to make one: model.layers.0 (Linear): 1 inf, 0 nan, from finite inputs" in text
    assert "the logits: 5 nan, in rows [5]" in text


def test_08_the_2024_bug_reweights_tokens_and_the_fix_is_the_big_batch_s_run(stored_output):
    batch = padded_batch(lengths=(6, 1, 5, 2, 6, 3, 1, 4), seed=3)
    tokens = [int(batch[2][i:i + 2].sum()) for i in range(0, 8, 2)]
    assert tokens == [7, 7, 9, 5]
    assert [round(28 / (4 * t), 2) for t in tokens] == [1.0, 1.0, 0.78, 1.4]

    def weights_after(microbatch_loss):  # 40 SGD steps of 0.5, written out without the optimizer
        model = make_model()
        for _ in range(40):
            model.zero_grad()
            if microbatch_loss is None:
                masked_mean(token_losses(model, *batch[:2]), batch[2]).backward()
            else:
                for i in range(0, 8, 2):
                    rows = slice(i, i + 2)
                    microbatch_loss(token_losses(model, batch[0][rows], batch[1][rows]), batch[2][rows]).backward()
            for p in model.parameters():
                p.data = p.data - 0.5 * p.grad
        return [p.data for p in model.parameters()]
    whole = weights_after(None)
    bug = weights_after(lambda L, m: masked_mean(L, m) / 4)
    fix = weights_after(lambda L, m: (L * m).sum() / 28.0)
    assert max(np.max(np.abs(a - b)) for a, b in zip(fix, whole)) < 1e-12
    assert 0.065 <= max(np.max(np.abs(a - b)) for a, b in zip(bug, whole)) < 0.075
    text = stored_output("08", "def accumulated_run(")
    assert "sum / all tokens (the fix)  largest weight difference from the big batch after 40 steps: under 1e-12" in text
    assert "mean × 1/4 (the bug)        largest weight difference from the big batch after 40 steps: 0.07" in text
    assert "big batch        : 0.0376" in text and "mean × 1/4       : 0.0309" in text and "sum / all tokens : 0.0376" in text
