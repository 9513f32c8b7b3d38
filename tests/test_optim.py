"""Optimizers step for step against PyTorch's, and against properties that need no PyTorch."""
import numpy as np
import pytest

from haaw import Tensor
from haaw.optim import SGD, Adam

rng = np.random.default_rng(0)
GRADS = [rng.standard_normal((3, 2)) * scale for scale in (1.0, 0.01, 5.0, 0.3, 2.0, 1e-4)]


def run(optimizer_class, start, **options):
    """The parameter after each step, fed the gradients GRADS in turn."""
    p = Tensor(start.copy(), requires_grad=True)
    opt = optimizer_class([p], **options)
    path = []
    for g in GRADS:
        opt.zero_grad()
        p.grad = g.copy()
        opt.step()
        path.append(p.data.copy())
    return path


def test_adam_with_a_constant_gradient_moves_by_lr_every_step():
    """Bias correction makes Adam's running means exactly g and g² for a constant gradient, so every
    step is lr · g / (|g| + eps): lr in the direction against g. Without the correction the first
    steps would be about 3× larger; with |g| in place of g² they would scale with √|g|."""
    p = Tensor(np.zeros(3), requires_grad=True)
    opt = Adam([p], lr=0.1)
    g = np.array([4.0, -0.25, 100.0])
    for step in range(1, 11):
        p.grad = g
        opt.step()
        np.testing.assert_allclose(p.data, -0.1 * step * np.sign(g), rtol=1e-6)


def test_adam_matches_its_formula_written_out():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    start = rng.standard_normal((3, 2))
    w, m, v = start.copy(), np.zeros_like(start), np.zeros_like(start)
    expected = []
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        w = w - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        expected.append(w.copy())
    for ours, theirs in zip(run(Adam, start, lr=lr), expected):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_sgd_with_momentum_matches_its_formula_written_out():
    start = rng.standard_normal((3, 2))
    w, buf = start.copy(), None
    expected = []
    for g in GRADS:
        g = g + 0.1 * w  # weight decay 0.1
        buf = g.copy() if buf is None else 0.9 * buf + g
        w = w - 0.05 * buf
        expected.append(w.copy())
    for ours, theirs in zip(run(SGD, start, lr=0.05, momentum=0.9, weight_decay=0.1), expected):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("name, options", [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.003, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
])
def test_each_step_matches_torch_optim(name, options):
    torch = pytest.importorskip("torch")
    start = rng.standard_normal((3, 2))
    ours = run({"SGD": SGD, "Adam": Adam}[name], start, **options)
    p = torch.tensor(start.copy(), requires_grad=True)
    opt = getattr(torch.optim, name)([p], **options)
    for g, mine in zip(GRADS, ours):
        opt.zero_grad()
        p.grad = torch.tensor(g)
        opt.step()
        np.testing.assert_allclose(mine, p.detach().numpy(), rtol=1e-10, atol=1e-14)


def test_a_parameter_without_a_gradient_is_left_alone_and_zero_grad_clears():
    a, b = Tensor(np.ones(2), requires_grad=True), Tensor(np.ones(2), requires_grad=False)
    for opt in (SGD([a, b], lr=0.1, momentum=0.9), Adam([a, b], lr=0.1)):
        a.grad = np.ones(2)
        opt.step()
        assert np.array_equal(b.data, [1.0, 1.0]) and b.grad is None
        opt.zero_grad()
        assert a.grad is None


def test_a_step_bumps_the_version_so_a_graph_that_saved_the_old_weights_refuses_backward():
    w = Tensor(np.ones((2, 2)), requires_grad=True)
    x = Tensor(np.ones((1, 2)), requires_grad=True)
    loss = (x @ w).sum()
    for opt in (SGD([w], lr=0.1), SGD([w], lr=0.1, momentum=0.5), Adam([w])):
        w.grad = np.ones((2, 2))
        opt.step()
        with pytest.raises(RuntimeError, match="modified in place"):
            loss.backward()


def test_no_parameters_is_a_clear_error():
    for cls in (SGD, Adam):
        with pytest.raises(ValueError, match=f"{cls.__name__} got no parameters"):
            cls([], lr=0.1)


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1), lambda ps: Adam(ps, lr=0.1)])
def test_every_step_changes_the_parameter_s_version_so_a_graph_built_before_it_refuses_backward(make):
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    opt = make([w])
    (w * w).sum().backward()
    opt.step()  # first step
    stale = (w * w).sum()  # saves w as it is now
    opt.step()  # second step: w changes again under the saved graph
    with pytest.raises(RuntimeError, match="modified in place"):
        stale.backward()


def test_adam_s_first_step_with_its_defaults_moves_each_parameter_by_lr_against_its_gradient_s_sign():
    # after bias correction the first step is lr · g / (|g| + eps): PyTorch's default lr is 1e-3
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    w.grad = np.array([0.5, -3.0])
    Adam([w]).step()
    np.testing.assert_allclose(w.data, [1.0 - 1e-3, 2.0 + 1e-3], rtol=1e-9)


def test_adam_counts_steps_per_parameter_like_pytorch():
    # b's first gradient arrives at the second step: its bias correction starts from t = 1, not t = 2
    a, b = Tensor(np.array([1.0, 1.0]), requires_grad=True), Tensor(np.array([0.5, 0.2]), requires_grad=True)
    opt = Adam([a, b], lr=0.1)
    grads = [(np.array([0.3, -0.2]), None), (np.array([0.1, 0.4]), np.array([1.0, -2.0])),
             (np.array([-0.2, 0.1]), np.array([0.5, 0.5]))]
    for ga, gb in grads:
        a.grad, b.grad = ga, gb
        opt.step()
    # b by hand: two Adam steps from t = 1
    p, m, v = np.array([0.5, 0.2]), np.zeros(2), np.zeros(2)
    for t, g in enumerate([np.array([1.0, -2.0]), np.array([0.5, 0.5])], start=1):
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        p = p - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    np.testing.assert_allclose(b.data, p, rtol=1e-12)
    assert opt.steps == [3, 2]


def test_adam_with_a_late_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = Tensor(np.array([0.5, 0.2]), requires_grad=True), torch.tensor([0.5, 0.2], dtype=torch.float64,
                                                                                   requires_grad=True)
    other = Tensor(np.ones(1), requires_grad=True)
    opt, topt = Adam([other, ours], lr=0.1), torch.optim.Adam([theirs], lr=0.1)
    other.grad = np.ones(1)
    opt.step()  # a step in which `ours` has no gradient yet
    for g in ([1.0, -2.0], [0.5, 0.5], [0.1, 0.1]):
        other.grad, ours.grad, theirs.grad = np.ones(1), np.array(g), torch.tensor(g, dtype=torch.float64)
        opt.step()
        topt.step()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12)


def test_adamw_with_parameter_groups_and_a_schedule_matches_pytorch():
    """AdamW was missing: decoupled decay, groups (no decay on biases) and a schedule that changes group["lr"]."""
    torch = pytest.importorskip("torch")
    from haaw.optim import AdamW

    rng = np.random.default_rng(0)
    w0, b0, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    w, b = Tensor(w0, requires_grad=True), Tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)

    def groups(w, b):
        return [{"params": [w]}, {"params": [b], "weight_decay": 0.0, "betas": (0.8, 0.9)}]

    opt, topt = AdamW(groups(w, b), lr=0.1, weight_decay=0.1), torch.optim.AdamW(groups(tw, tb), lr=0.1, weight_decay=0.1)
    for _ in range(5):
        for o, loss in ((opt, (Tensor(x) @ w + b).tanh().sum()), (topt, (torch.tensor(x) @ tw + tb).tanh().sum())):
            o.zero_grad()
            loss.backward()
            o.step()
            for group in o.param_groups:
                group["lr"] = max(group["lr"] * 0.5, 0.01)  # decays to a floor
    np.testing.assert_allclose(w.data, tw.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.data, tb.detach().numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="parameter group"):
        AdamW([{"params": [w], "momentum": 0.9}])


# --- what the mutation run (docs/mutation-survivors.md) found untested -------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda w: Adam([w], betas=(1.0, 0.999)), "Adam: beta1 = 1.0 is not valid; it must be a number from 0 up to "
                                              "(not including) 1"),
    (lambda w: Adam([w], betas=(-0.1, 0.999)), "Adam: beta1 = -0.1 is not valid; it must be a number from 0 up to "
                                               "(not including) 1"),
    (lambda w: Adam([w], betas=(0.9, 1.0)), "Adam: beta2 = 1.0 is not valid; it must be a number from 0 up to "
                                            "(not including) 1"),
    (lambda w: Adam([w], weight_decay=-0.1), "Adam: weight_decay = -0.1 is not valid; it must be a number at least 0"),
    (lambda w: SGD([w], lr=0.1, weight_decay=-0.1), "SGD: weight_decay = -0.1 is not valid; it must be a number at "
                                                    "least 0"),
])
def test_each_setting_pytorch_refuses_is_refused_by_name(make, message):
    with pytest.raises(ValueError) as refused:
        make(Tensor(np.ones(2), requires_grad=True))
    assert str(refused.value) == message
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):  # PyTorch refuses each too ("Invalid beta parameter at index 0: 1.0", ...)
        make(torch.ones(2, requires_grad=True))


@pytest.mark.parametrize("setting, message", [
    ({"lr": -1}, "AdamW: lr = -1 is not valid; it must be a number at least 0"),
    ({"betas": (1.0, 0.999)}, "AdamW: beta1 = 1.0 is not valid; it must be a number from 0 up to (not including) 1"),
    ({"betas": (0.9, 1.0)}, "AdamW: beta2 = 1.0 is not valid; it must be a number from 0 up to (not including) 1"),
    ({"eps": -1e-8}, "AdamW: eps = -1e-08 is not valid; it must be a number at least 0"),
    ({"weight_decay": -0.1}, "AdamW: weight_decay = -0.1 is not valid; it must be a number at least 0"),
])
def test_a_parameter_group_s_own_setting_is_checked_as_the_defaults_are(setting, message):
    """PyTorch checks only the defaults given to AdamW; a group's setting is used just as they are, so haaw checks it."""
    from haaw.optim import AdamW

    w = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError) as refused:
        AdamW([{"params": [w], **setting}])
    assert str(refused.value) == message


def _losses_of(x, w, b):
    return [(x @ w + b).tanh().sum(), (x @ w * b).sum()]


def _adamw_against_torch(make_ours, make_theirs, steps=3, frozen_first=False):
    """AdamW's parameters after ``steps`` steps on a small loss, haaw's and PyTorch's, each made from the same start.
    With ``frozen_first`` a parameter that never gets a gradient comes first (in each group)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0, b0, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    ours = [Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)]
    theirs = [torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)]
    if frozen_first:
        ours.insert(0, Tensor(np.ones(2), requires_grad=True))
        theirs.insert(0, torch.ones(2, dtype=torch.float64, requires_grad=True))
    opt, topt = make_ours(ours), make_theirs(theirs, torch)
    for step in range(steps):
        for o, params, xx in ((opt, ours, Tensor(x)), (topt, theirs, torch.tensor(x))):
            o.zero_grad()
            _losses_of(xx, *params[-2:])[step % 2].backward()
            o.step()
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-12, atol=1e-14)
    return ours


def test_adamw_s_defaults_are_pytorch_s_lr_and_weight_decay():
    from haaw.optim import AdamW

    _adamw_against_torch(lambda ps: AdamW(ps), lambda ps, torch: torch.optim.AdamW(ps))


def test_adamw_takes_model_parameters_a_generator_and_a_group_of_one_tensor_or_a_generator():
    """``model.parameters()`` is a generator: looking in it for groups must not use up its first parameter."""
    from haaw.optim import AdamW

    _adamw_against_torch(lambda ps: AdamW(p for p in ps), lambda ps, torch: torch.optim.AdamW(p for p in ps))
    _adamw_against_torch(lambda ps: AdamW([{"params": (p for p in ps[:1])}, {"params": ps[1], "lr": 0.01}]),
                         lambda ps, torch: torch.optim.AdamW([{"params": (p for p in ps[:1])},
                                                              {"params": ps[1], "lr": 0.01}]))


def test_one_tensor_for_params_is_refused_by_name():
    """It failed with "the truth value of a tensor ... is ambiguous", or, for one row, stepped the rows of a copy."""
    from haaw.optim import AdamW

    for w in (Tensor(np.ones((2, 2)), requires_grad=True), Tensor(np.ones((1, 2)), requires_grad=True)):
        with pytest.raises(TypeError) as refused:
            AdamW(w)
        assert str(refused.value) == ("AdamW: params must be a list of tensors (or model.parameters()), not one tensor: "
                                      "write [w]")
    for make in (Adam, lambda w: SGD(w, lr=0.1)):
        with pytest.raises(TypeError) as refused:
            make(w)
        name = "Adam" if make is Adam else "SGD"
        assert str(refused.value) == f"{name}: params must be a list of tensors (or model.parameters()), not one tensor: write [w]"
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):  # "params argument given to the optimizer should be an iterable of Tensors or dicts"
        torch.optim.AdamW(torch.ones(2, requires_grad=True))


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_a_parameter_without_a_gradient_does_not_stop_the_ones_after_it(name):
    from haaw import optim

    ours = _adamw_against_torch(lambda ps: getattr(optim, name)(ps, lr=0.1),
                                lambda ps, torch: getattr(torch.optim, name)(ps, lr=0.1), frozen_first=True)
    assert ours[0].data.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_your_adam_step_in_the_slot_takes_every_parameter_s_step_and_matches_pytorch(name):
    """Adam's slot gets the gradient with the decay added; AdamW's the weight already shrunk by the decay and the
    gradient alone (decoupled). Each parameter with a gradient is one call a step; the one without none."""
    import haaw
    from haaw import optim

    calls = []

    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):  # written out from Kingma & Ba's paper
        calls.append(t)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g ** 2
        return p - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps), m, v

    def make(ps, module):
        if name == "Adam":
            return module.Adam(ps, lr=0.1, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1)
        return module.AdamW([{"params": ps, "betas": (0.8, 0.9), "eps": 1e-3}], lr=0.1, weight_decay=0.1)

    with haaw.use(adam=adam_step):
        _adamw_against_torch(lambda ps: make(ps, optim), lambda ps, torch: make(ps, torch.optim), frozen_first=True)
    assert calls == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("name, options", [("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9}),
                                           ("Adam", {"lr": 0.1})])
def test_no_weight_decay_adds_nothing_not_even_zero_times_an_infinite_weight(name, options):
    """With weight_decay 0 the gradient is used as it is, as in PyTorch: 0 · inf would turn an inf weight into nan."""
    torch = pytest.importorskip("torch")
    from haaw import optim

    p = Tensor([np.inf, 1.0], requires_grad=True)
    t = torch.tensor([np.inf, 1.0], dtype=torch.float64, requires_grad=True)
    p.grad, t.grad = np.array([0.5, 0.5]), torch.tensor([0.5, 0.5], dtype=torch.float64)
    getattr(optim, name)([p], **options).step()
    getattr(torch.optim, name)([t], **options).step()
    np.testing.assert_array_equal(p.data, t.detach().numpy())
