"""The long tail of nn layers: extra activations, padding, shape/math cells, CellDict,
MultiheadAttention and the Transformer layers — against NumPy float64 formulas and PyTorch."""
import numpy as np
import pytest
import torch

import minispore as ms
from minispore import nn
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError

RNG = np.random.default_rng(0)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


X = RNG.uniform(-3, 3, size=(2, 3, 4))


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


ALPHA, SCALE = 1.6732632423543772, 1.0507009873554805
FORMULAS = {
    "Mish": lambda x: x * np.tanh(_softplus(x)),
    "SeLU": lambda x: SCALE * np.where(x > 0, x, ALPHA * (np.exp(x) - 1)),
    "HSwish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "HSigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "LogSigmoid": lambda x: -_softplus(-x),
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "Tanhshrink": lambda x: x - np.tanh(x),
    "Softmax2d": lambda x: np.exp(x) / np.exp(x).sum(-3, keepdims=True),
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_simple_activation_matches_formula(name):
    got = getattr(nn, name)()(T(X)).asnumpy()
    np.testing.assert_allclose(got, FORMULAS[name](X), rtol=1e-5, atol=1e-6)


def test_parametrized_activations():
    x = X
    np.testing.assert_allclose(nn.Hardtanh(-0.5, 2.0)(T(x)).asnumpy(), np.clip(x, -0.5, 2.0), rtol=1e-6)
    np.testing.assert_allclose(nn.SoftShrink(0.3)(T(x)).asnumpy(),
                               np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.HShrink(0.8)(T(x)).asnumpy(), np.where(np.abs(x) > 0.8, x, 0), rtol=1e-6)
    e = np.exp(-x)
    np.testing.assert_allclose(nn.Softmin(1)(T(x)).asnumpy(), e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(nn.CELU(0.5)(T(x)).asnumpy(),
                               np.maximum(x, 0) + np.minimum(0, 0.5 * (np.exp(x / 0.5) - 1)), rtol=1e-5, atol=1e-6)
    a, b = x[..., :2], x[..., 2:]
    np.testing.assert_allclose(nn.GLU()(T(x)).asnumpy(), a / (1 + np.exp(-b)), rtol=1e-5)
    np.testing.assert_allclose(nn.Threshold(0.5, 20.0)(T(x)).asnumpy(), np.where(x > 0.5, x, 20.0), rtol=1e-6)
    np.testing.assert_allclose(nn.RReLU(0.2, 0.2)(T(x)).asnumpy(), np.where(x >= 0, x, 0.2 * x), rtol=1e-6)


def test_rrelu_slopes_in_range():
    ms.set_seed(3)
    x = -np.abs(X) - 0.1
    slope = nn.RReLU()(T(x)).asnumpy() / x
    assert slope.min() >= 1 / 8 - 1e-6 and slope.max() <= 1 / 3 + 1e-6 and slope.std() > 0.01


def test_prelu_per_channel_value_grad_and_name():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.act = nn.PReLU(3, [0.1, 0.2, 0.3])

        def construct(self, x):
            return self.act(x)
    net = Net()
    assert [p.name for p in net.get_parameters()] == ["act.w"]          # MindSpore 2.10 too (its Parameter name 'a' is replaced)
    w = np.array([0.1, 0.2, 0.3])[None, :, None]
    np.testing.assert_allclose(net(T(X)).asnumpy(), np.where(X > 0, X, w * X), rtol=1e-6)
    gw = ms.grad(lambda x: net(x).sum(), None, net.trainable_params())(T(X))[0]
    np.testing.assert_allclose(gw.asnumpy(), np.where(X > 0, 0, X).sum((0, 2)), rtol=1e-5)


@pytest.mark.parametrize("make, cls", [
    (lambda: nn.Hardtanh(1.0, -1.0), OpValueError), (lambda: nn.PReLU(0), OpValueError),
    (lambda: nn.PReLU(3, [0.1]), OpValueError), (lambda: nn.PReLU(w="x"), OpTypeError),
    (lambda: nn.SoftShrink(1), OpTypeError), (lambda: nn.CELU(0.0), OpValueError),
    (lambda: nn.RReLU(0.5, 0.1), OpValueError), (lambda: nn.GLU(1.5), OpTypeError),
])
def test_bad_activation_args(make, cls):
    with pytest.raises(cls) as e:
        make()
    assert "For '" in str(e.value)


# -- padding ---------------------------------------------------------------------------------------

def test_pad_modes_match_numpy():
    x = RNG.uniform(size=(3, 4))
    pads = ((1, 2), (2, 3))
    for mode, np_mode in (("CONSTANT", "constant"), ("REFLECT", "reflect"), ("SYMMETRIC", "symmetric")):
        np.testing.assert_allclose(nn.Pad(pads, mode)(T(x)).asnumpy(), np.pad(x, pads, mode=np_mode), rtol=1e-6)


def test_symmetric_pad_gradient_folds_borders():
    cell = nn.Pad(((0, 0), (2, 1)), "SYMMETRIC")
    g = ms.grad(lambda x: cell(x).sum())(T(np.ones((2, 4)))).asnumpy()
    # [a b c d] -> [b a | a b c d | d]: a, b and d appear twice, c once
    np.testing.assert_allclose(g, [[2, 2, 1, 2], [2, 2, 1, 2]])


def test_torch_style_pads_match_torch():
    x = RNG.uniform(size=(1, 2, 4, 5)).astype(np.float32)
    tx = torch.from_numpy(x)
    cases = [(nn.ConstantPad2d((1, 0, 2, 1), 3.0), torch.nn.ConstantPad2d((1, 0, 2, 1), 3.0)),
             (nn.ZeroPad2d(2), torch.nn.ZeroPad2d(2)),
             (nn.ReflectionPad2d((2, 1, 0, 3)), torch.nn.ReflectionPad2d((2, 1, 0, 3))),
             (nn.ReplicationPad2d((0, 2, 1, 0)), torch.nn.ReplicationPad2d((0, 2, 1, 0))),
             (nn.ConstantPad3d(1, -1.0), torch.nn.ConstantPad3d(1, -1.0))]
    for ours, theirs in cases:
        np.testing.assert_allclose(ours(T(x)).asnumpy(), theirs(tx).numpy(), rtol=1e-6)
    np.testing.assert_allclose(nn.ReflectionPad1d(2)(T(x[0])).asnumpy(), torch.nn.ReflectionPad1d(2)(tx[0]).numpy())


@pytest.mark.parametrize("make", [lambda: nn.Pad(((1, 1),), "EDGE"), lambda: nn.Pad([[1, 1]]),
                                  lambda: nn.ConstantPad1d((1, 2, 3, 4), 0.0), lambda: nn.ConstantPad2d(1, "0"),
                                  lambda: nn.ReflectionPad1d((1, -1)), lambda: nn.ReflectionPad2d([1, 1, 1, 1])])
def test_bad_padding_args(make):
    with pytest.raises(MinisporeError):
        make()


# -- shape / math cells ------------------------------------------------------------------------------

def test_pixel_shuffle_round_trip_matches_torch():
    x = RNG.uniform(size=(2, 8, 2, 3)).astype(np.float32)
    y = nn.PixelShuffle(2)(T(x)).asnumpy()
    np.testing.assert_array_equal(y, torch.nn.PixelShuffle(2)(torch.from_numpy(x)).numpy())
    np.testing.assert_array_equal(nn.PixelUnshuffle(2)(T(y)).asnumpy(), x)
    with pytest.raises(OpValueError, match="PixelShuffle"):
        nn.PixelShuffle(2)(T(np.ones((1, 6, 2, 2))))


def test_unflatten_moments_norm_onehot_range():
    x = np.arange(100, dtype=np.float32).reshape(2, 10, 5)
    assert nn.Unflatten(1, (2, 5))(T(x)).shape == (2, 2, 5, 5)
    m, v = nn.Moments(axis=(0, 2), keep_dims=True)(T(X))
    np.testing.assert_allclose(m.asnumpy(), X.mean((0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(v.asnumpy(), X.var((0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(nn.Norm(axis=1)(T(X)).asnumpy(), np.sqrt((X ** 2).sum(1)), rtol=1e-5)
    oh = nn.OneHot(axis=0, depth=3, on_value=5.0, off_value=-1.0)(ms.Tensor(np.array([0, 2], np.int32)))
    np.testing.assert_array_equal(oh.asnumpy(), [[5, -1], [-1, -1], [-1, 5]])
    r = nn.Range(0.5, 2.0, 0.5)()
    assert r.dtype == ms.float32 and r.asnumpy().tolist() == [0.5, 1.0, 1.5]
    assert nn.Range(5)().dtype == ms.int32


def test_matmul_cell_transposes():
    a, b = RNG.uniform(size=(2, 3, 4)), RNG.uniform(size=(2, 5, 4))
    np.testing.assert_allclose(nn.MatMul(transpose_x2=True)(T(a), T(b)).asnumpy(), a @ b.transpose(0, 2, 1),
                               rtol=1e-5)
    with pytest.raises(OpValueError, match="MatMul"):
        nn.MatMul()(T(a), T(b))


def test_celldict_names_order_and_checks():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellDict({"proj": nn.Dense(3, 4), "out": nn.Dense(4, 2)})
    net = Net()
    assert [p.name for p in net.get_parameters()] == ["blocks.proj.weight", "blocks.proj.bias",
                                                      "blocks.out.weight", "blocks.out.bias"]
    net.blocks["act"] = nn.ReLU()
    assert list(net.blocks) == ["proj", "out", "act"] and len(net.blocks) == 3
    assert type(net.blocks.pop("act")).__name__ == "ReLU" and "act" not in net.blocks
    with pytest.raises(KeyError):
        net.blocks["missing"]
    with pytest.raises(MinisporeError):
        nn.CellDict({"a.b": nn.ReLU()})
    with pytest.raises(OpTypeError):
        nn.CellDict({"a": nn.CellList([nn.ReLU()])})


# -- attention and Transformer vs PyTorch ---------------------------------------------------------------

def _copy_mha(ours, theirs):
    theirs.in_proj_weight.data = torch.from_numpy(ours.in_proj_weight.asnumpy())
    theirs.in_proj_bias.data = torch.from_numpy(ours.in_proj_bias.asnumpy())
    theirs.out_proj.weight.data = torch.from_numpy(ours.out_proj.weight.asnumpy())
    theirs.out_proj.bias.data = torch.from_numpy(ours.out_proj.bias.asnumpy())


def test_mha_matches_torch_with_masks():
    ms.set_seed(1)
    ours = nn.MultiheadAttention(8, 2, batch_first=True)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    _copy_mha(ours, theirs)
    q = RNG.uniform(-1, 1, size=(2, 4, 8)).astype(np.float32)
    kv = RNG.uniform(-1, 1, size=(2, 5, 8)).astype(np.float32)
    mask = np.triu(np.ones((4, 5), bool), k=1)
    kpm = np.array([[False] * 4 + [True], [False] * 5])
    out, w = ours(T(q), T(kv), T(kv), attn_mask=ms.Tensor(mask), key_padding_mask=ms.Tensor(kpm))
    t_out, t_w = theirs(torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(kv),
                        attn_mask=torch.from_numpy(mask), key_padding_mask=torch.from_numpy(kpm))
    np.testing.assert_allclose(out.asnumpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.asnumpy(), t_w.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert len(ours(T(q), T(kv), T(kv), need_weights=False)) == 1


def test_mha_names_and_bad_args():
    mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True)
    # the cell's own parameters first, then out_proj's (MindSpore's order too)
    assert [p.name for p in mha.get_parameters()] == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                      "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                                      "out_proj.bias"]
    with pytest.raises(OpValueError, match="MultiheadAttention"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(OpValueError, match="MultiheadAttention"):
        nn.MultiheadAttention(8, 2)(T(np.ones((4,))), T(np.ones((4,))), T(np.ones((4,))))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ms.set_seed(2)
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
    _copy_mha(ours.self_attn, theirs.self_attn)
    for a, b in (("dense1", "linear1"), ("dense2", "linear2")):
        getattr(theirs, b).weight.data = torch.from_numpy(getattr(ours, a).weight.asnumpy())
        getattr(theirs, b).bias.data = torch.from_numpy(getattr(ours, a).bias.asnumpy())
    x = RNG.uniform(-1, 1, size=(5, 2, 8)).astype(np.float32)
    theirs.eval()
    np.testing.assert_allclose(ours(T(x)).asnumpy(), theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_transformer_stack_names_and_identical_layers():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm((8,)))
    names = [p.name for p in enc.get_parameters()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and names[-1] == "norm.beta" and len(names) == 26
    # MindSpore deep-copies one fresh layer: both layers start with the same weights, as distinct Parameters
    w0, w1 = enc.layers[0].dense1.weight, enc.layers[1].dense1.weight
    assert w0 is not w1 and np.array_equal(w0.asnumpy(), w1.asnumpy())
    model = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    src, tgt = T(RNG.uniform(size=(5, 2, 8))), T(RNG.uniform(size=(3, 2, 8)))
    assert model(src, tgt).shape == (3, 2, 8)
    with pytest.raises(OpValueError, match="TransformerEncoderLayer"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(OpValueError):
        nn.TransformerEncoderLayer(8, 2, activation=nn.ReLU())
