"""Modules: parameters found by themselves, PyTorch's names, initial weights that differ per layer."""
import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw import nn
from haaw.engine import Tensor
from haaw.nn import MLP, Linear, TransformerBlock
from haaw.optim import SGD


def test_parameters_are_found_once_each_in_order_with_their_names():
    model = MLP([4, 8, 3])
    params = model.parameters()
    assert [p.shape for p in params] == [(4, 8), (8,), (8, 3), (3,)]
    assert [name for name, _ in model.named_parameters()] == ["layers.0.weight", "layers.0.bias",
                                                            "layers.1.weight", "layers.1.bias"]
    shared = Linear(3, 3)
    model.layers.append(shared)
    model.layers.append(shared)
    assert len(model.parameters()) == 6
    block = TransformerBlock(4, heads=2)
    assert "attn.q.weight" in dict(block.named_parameters()) and len(block.parameters()) == 16


def test_frozen_parameters_are_still_parameters_as_in_pytorch():
    model = MLP([3, 4, 2])
    model.layers[0].freeze()
    assert len(model.parameters()) == 4
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    model.requires_grad_(True)
    assert all(p.requires_grad for p in model.parameters())


def test_two_layers_start_from_different_weights_unless_seeded_alike():
    assert not np.array_equal(Linear(4, 4).weight.data, Linear(4, 4).weight.data)
    assert np.array_equal(Linear(4, 4, seed=3).weight.data, Linear(4, 4, seed=3).weight.data)
    haaw.manual_seed(5)
    first = MLP([2, 3, 2]).parameters()
    haaw.manual_seed(5)
    again = MLP([2, 3, 2]).parameters()
    assert all(np.array_equal(a.data, b.data) for a, b in zip(first, again))
    layers = MLP([4, 4, 4, 4], seed=0).layers
    assert not np.array_equal(layers[0].weight.data, layers[1].weight.data)
    assert all(np.array_equal(a.weight.data, b.weight.data) for a, b in zip(layers, MLP([4, 4, 4, 4], seed=0).layers))


def test_an_mlp_with_cross_entropy_matches_torch_to_1e_10():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 5)), rng.integers(0, 4, 16)
    model = MLP([5, 7, 6, 4], activation="tanh")
    loss = F.cross_entropy(model(Tensor(x)), y)
    loss.backward()

    h = torch.tensor(x)
    weights = [torch.tensor(p.data, requires_grad=True) for p in model.parameters()]
    for i in range(0, len(weights), 2):
        h = h @ weights[i] + weights[i + 1]
        if i < len(weights) - 2:
            h = torch.tanh(h)
    ref = torch.nn.functional.cross_entropy(h, torch.tensor(y))
    ref.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    for p, q in zip(model.parameters(), weights):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_sgd_steps_downhill_and_zero_grad_resets():
    rng = np.random.default_rng(1)
    x, y = Tensor(rng.standard_normal((32, 2))), (rng.standard_normal(32) > 0).astype(int)
    model = MLP([2, 8, 2])
    opt = SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_sgd_and_mlp_errors_are_clear():
    with pytest.raises(ValueError, match="SGD got no parameters"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="activation must be"):
        MLP([2, 2], activation="swish")


def test_requires_grad__freezes_and_then_trains_again_by_default():
    model = MLP([3, 4, 2], seed=0)
    model(Tensor(np.ones((1, 3)))).sum().backward()
    assert model.requires_grad_(False) is model
    assert all(not p.requires_grad and p.grad is None for p in model.parameters())
    model.requires_grad_()  # the default: train again
    assert all(p.requires_grad for p in model.parameters())


def test_load_state_dict_copies_in_place_and_refuses_what_does_not_fit():
    """state_dict / load_state_dict as in PyTorch: names from named_parameters, values copied in place (a graph
    that saved the old values then refuses backward), a missing or unexpected name or a wrong shape refused."""

    source, target = Linear(3, 2, seed=0), Linear(3, 2, seed=1)
    weight_before = target.weight
    out = (Tensor(np.ones((1, 3)), requires_grad=True) @ target.weight).sum()  # d/d(input) reads the weight
    target.load_state_dict(source.state_dict())
    assert target.weight is weight_before  # the same tensor, new numbers
    np.testing.assert_array_equal(target.weight.data, source.weight.data)
    with pytest.raises(RuntimeError, match="as it was in the forward pass"):
        out.backward()
    with pytest.raises(RuntimeError, match=r"missing \['bias'\], unexpected \['extra'\]"):
        target.load_state_dict({"weight": np.zeros((3, 2)), "extra": np.zeros(1)})
    assert target.load_state_dict({"weight": np.zeros((3, 2))}, strict=False) == (["bias"], [])
    with pytest.raises(RuntimeError, match=r"transpose PyTorch's"):
        target.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(2)})


def test_dropout_draws_what_f_dropout_draws_and_a_checkpoint_replays_it():
    x = Tensor(np.arange(1.0, 41.0).reshape(5, 8), requires_grad=True)
    haaw.manual_seed(3)
    functional = F.dropout(x, 0.4).data
    haaw.manual_seed(3)
    module = nn.Dropout(0.4)(x).data
    np.testing.assert_array_equal(module, functional)
    assert 0 < (module == 0).sum() < 40
    drop = nn.Dropout(0.4)
    out = haaw.checkpoint(lambda h: drop(h) * 2.0, x)  # the recomputation must drop the same entries
    out.sum().backward()
    np.testing.assert_array_equal(x.grad != 0, out.data != 0)


def test_eval_reaches_every_sub_module_once_and_train_turns_them_back():
    class Net(nn.Module):
        def __init__(self):
            self.blocks = [nn.Dropout(0.5), {"d": nn.Dropout(0.5)}]
            self.lin = nn.Linear(2, 2)
            self.lin.back = self  # a reference to its parent: visited once, not forever

    net = Net()
    assert net.eval() is net
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Dropout", "Dropout", "Linear"]
    assert [m.training for m in net.modules()] == [False] * 4
    x = Tensor(np.ones((3, 2)))
    np.testing.assert_array_equal(net.blocks[0](x).data, x.data)  # evaluation mode: the input itself
    assert all(m.training for m in net.train().modules())
    with pytest.raises(ValueError, match="True or False"):
        net.train("no")


def test_dropout_refuses_what_it_cannot_do():
    for p in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="from 0 to 1"):
            nn.Dropout(p)
    with pytest.raises(NotImplementedError, match="inplace"):
        nn.Dropout(0.5, inplace=True)
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25)"


# The tests below were written against the survivors of a mutation run of haaw/nn/modules.py alone
# (docs/mutation-survivors.md): each asserts what a learner sees, against hand values or PyTorch.

def test_named_parameters_puts_a_prefix_before_every_name_as_pytorch_does():
    expected = ["net.layers.0.weight", "net.layers.0.bias", "net.layers.1.weight", "net.layers.1.bias"]
    assert [name for name, _ in MLP([2, 3, 1]).named_parameters(prefix="net")] == expected
    torch = pytest.importorskip("torch")
    assert [name for name, _ in torch.nn.Linear(2, 3).named_parameters(prefix="net")] == ["net.weight", "net.bias"]
    assert [name for name, _ in Linear(2, 3).named_parameters(prefix="net")] == ["net.weight", "net.bias"]


def test_load_state_dict_refuses_a_missing_name_alone_and_says_so_in_full():
    target = Linear(3, 2, seed=1)
    with pytest.raises(RuntimeError) as missing:
        target.load_state_dict({"weight": np.zeros((3, 2))})
    assert str(missing.value) == ("load_state_dict: missing ['bias'], unexpected [] "
                                  "(strict=False loads the names that match)")
    with pytest.raises(RuntimeError) as unexpected:
        target.load_state_dict({"weight": np.zeros((3, 2)), "bias": np.zeros(2), "extra": np.zeros(1)})
    assert str(unexpected.value) == ("load_state_dict: missing [], unexpected ['extra'] "
                                     "(strict=False loads the names that match)")


def test_load_state_dict_names_a_wrong_shape_and_suggests_the_transpose_only_when_it_fits():
    target = Linear(3, 2, seed=1)
    with pytest.raises(RuntimeError) as transposed:
        target.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(2)})
    assert str(transposed.value) == ("load_state_dict: weight has shape (3, 2), the value (2, 3) "
                                     "(haaw's Linear weight is (in, out): transpose PyTorch's)")
    with pytest.raises(RuntimeError) as other:
        target.load_state_dict({"weight": np.zeros((3, 2)), "bias": np.zeros(5)})
    assert str(other.value) == "load_state_dict: bias has shape (2,), the value (5,)"


def test_load_state_dict_takes_the_parameters_of_another_model_even_while_they_require_grad():
    """PyTorch copies them under no_grad; a tensor that requires grad must not be handed to NumPy as one."""
    source, target = Linear(3, 2, seed=0), Linear(3, 2, seed=1)
    assert target.load_state_dict(dict(source.named_parameters())) == ([], [])
    np.testing.assert_array_equal(target.weight.data, source.weight.data)
    np.testing.assert_array_equal(target.bias.data, source.bias.data)
    assert target.weight.requires_grad and target.weight is not source.weight


@pytest.mark.parametrize("args, message", [
    ((2, 0), "Linear: out_features must be a positive whole number, got 0"),
    ((0, 2), "Linear: in_features must be a positive whole number, got 0"),
    ((True, 3), "Linear: in_features must be a positive whole number, got True"),
    ((2.0, 3), "Linear: in_features must be a positive whole number, got 2.0"),
    ((2, 3.5), "Linear: out_features must be a positive whole number, got 3.5"),
])
def test_linear_refuses_sizes_that_are_not_positive_whole_numbers_in_full(args, message):
    with pytest.raises(ValueError) as error:
        Linear(*args)
    assert str(error.value) == message


def test_linear_draws_weight_and_bias_uniformly_on_plus_minus_one_over_root_in_features():
    """PyTorch's default: both on (−1/√in, 1/√in). With 4 inputs the bound is 1/2, and 4000 draws of each come
    within 0.005 of both ends (the chance that they miss one end is 0.995^4000, about 2e-9)."""
    layer = Linear(4, 4000, seed=0)
    for p in (layer.weight.data, layer.bias.data):
        assert -0.5 <= p.min() < -0.495 and 0.495 < p.max() <= 0.5


def test_linear_without_bias_has_only_its_weight():
    layer = Linear(3, 2, bias=False, seed=0)
    assert layer.bias is None
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(layer(Tensor(x)).data, x @ layer.weight.data, rtol=1e-15)


def test_layers_label_their_parameters_as_drawings_and_reprs_show_them():
    """The labels a graph drawing and a tensor's repr print: W and b for Linear, γ and β for LayerNorm."""
    layer = Linear(1, 1, seed=0)
    assert repr(layer.weight).endswith(", requires_grad=True, label='W')")
    assert repr(layer.bias).endswith(", requires_grad=True, label='b')")
    norm = nn.LayerNorm(2)
    assert repr(norm.weight) == "Tensor([1., 1.], requires_grad=True, label='γ')"
    assert repr(norm.bias) == "Tensor([0., 0.], requires_grad=True, label='β')"


def test_an_mlp_with_sigmoid_computes_sigmoid_between_its_layers():
    model = MLP([2, 3, 1], activation="sigmoid", seed=0)
    (w1, b1), (w2, b2) = [(layer.weight.data, layer.bias.data) for layer in model.layers]
    x = np.array([[0.5, -2.0], [3.0, 1.0]])
    hidden = 1.0 / (1.0 + np.exp(-(x @ w1 + b1)))
    np.testing.assert_allclose(model(Tensor(x)).data, hidden @ w2 + b2, rtol=1e-12)


def test_an_mlp_in_float32_holds_and_computes_float32():
    model = MLP([2, 3, 1], dtype=np.float32, seed=0)
    assert [p.dtype for p in model.parameters()] == [np.float32] * 4
    assert model(Tensor(np.ones((1, 2), dtype=np.float32))).dtype == np.float32


def test_dropout_drops_half_by_default_as_pytorch_does():
    """nn.Dropout() has p = 0.5: about half of 10,000 ones become 0 (within 0.03: 6 standard deviations), the
    rest 2."""
    haaw.manual_seed(0)
    out = nn.Dropout()(Tensor(np.ones(10_000))).data
    assert set(np.unique(out)) == {0.0, 2.0}
    assert abs((out == 0).mean() - 0.5) < 0.03
    assert repr(nn.Dropout()) == "Dropout(p=0.5)"


def test_dropout_in_place_is_refused_in_full():
    with pytest.raises(NotImplementedError) as error:
        nn.Dropout(0.5, inplace=True)
    assert str(error.value) == "Dropout(inplace=True): haaw's dropout makes a new tensor; leave inplace out"


@pytest.mark.parametrize("eps", [None, 0.5])
def test_layer_norm_adds_its_eps_to_the_variance_default_1e_5_as_in_pytorch(eps):
    """Features 1e-3 apart have the variance 1.25e-6, smaller than the default ε = 1e-5: ε shows in every digit."""
    x = np.array([[0.0, 1e-3, 2e-3, 3e-3], [1.0, -1.0, 2.0, 0.0]])
    norm = nn.LayerNorm(4) if eps is None else nn.LayerNorm(4, eps=eps)
    centred = x - x.mean(axis=1, keepdims=True)
    expected = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + (1e-5 if eps is None else eps))
    np.testing.assert_allclose(norm(Tensor(x)).data, expected, rtol=1e-12)
    torch = pytest.importorskip("torch")
    theirs = torch.nn.LayerNorm(4, dtype=torch.float64) if eps is None else \
        torch.nn.LayerNorm(4, eps=eps, dtype=torch.float64)
    np.testing.assert_allclose(norm(Tensor(x)).data, theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10)


def test_self_attention_refuses_heads_that_do_not_divide_the_width_in_full():
    with pytest.raises(ValueError) as error:
        nn.SelfAttention(5, heads=2)
    assert str(error.value) == "SelfAttention: dim 5 is not divisible by 2 heads"


def test_feed_forward_widens_four_times_by_default():
    """As in the transformer paper (512 → 2048 → 512): Linear(dim, 4·dim), then Linear(4·dim, dim)."""
    block = nn.FeedForward(3)
    assert [tuple(p.shape) for p in block.parameters()] == [(3, 12), (12,), (12, 3), (3,)]
    assert [tuple(p.shape) for p in nn.FeedForward(3, expand=2).parameters()] == [(3, 6), (6,), (6, 3), (3,)]


def test_load_state_dict_takes_arrays_of_any_format_the_engine_holds():
    """A state saved in bfloat16 (a NumPy array, as the docstring allows) loads into float64 parameters, rounded
    values and all: the array is read as it is, not through its raw buffer (NumPy cannot rebuild bfloat16 from one)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    model = nn.Linear(2, 3)
    state = {name: (np.asarray(p.data) + 0.3).astype(ml_dtypes.bfloat16) for name, p in model.named_parameters()}
    assert model.load_state_dict(state) == ([], [])
    for name, p in model.named_parameters():
        assert p.dtype == np.float64
        np.testing.assert_array_equal(p.data, state[name].astype(np.float64))
