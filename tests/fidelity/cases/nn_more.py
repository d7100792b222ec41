"""Differential cases: the long tail of `mindspore.nn` — the extra activation cells (PReLU and its
parameter name, Mish, SeLU, HSwish, ..., RReLU with lower == upper), the padding cells, the small
shape/math cells (PixelShuffle, Unflatten, Roll, OneHot, Moments, ...), CellDict naming,
MultiheadAttention and the Transformer layers (forward, masks, parameter names, gradients), and the
optimizers AdaMax / Adadelta / ASGD / Rprop / FTRL / ProximalAdagrad / LARS after 3 steps, with the
InverseDecay / NaturalExpDecay learning-rate schedules, as MindSpore 2.10 (CPU) computes them."""
import numpy as np

from msdiff import case, dense_norm_dense, fill_params, param_names, rand

GRAD_TOL = dict(rtol=1e-4, atol=1e-5)


def T(ms, a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def _x(ms, *shape, seed=0, low=-3.0, high=3.0):
    return T(ms, rand(*shape, seed=seed, low=low, high=high))


def _value_and_input_grad(ms, cell, x, seed=7):
    """sum(cell(x) * w) and its gradient w.r.t. x, for a fixed w."""
    out = cell(x)
    w = T(ms, rand(*out.shape, seed=seed))
    return ms.value_and_grad(lambda x_: (cell(x_) * w).sum())(x)


# =================================================================================================
# activation cells: forward (with values on both sides of every kink) and input gradients
_SIMPLE = ["Mish", "SeLU", "HSwish", "HSigmoid", "LogSigmoid", "Softsign", "Tanhshrink", "Softmax2d"]

for _name in _SIMPLE:
    @case(f"nn_more/{_name.lower()}_forward")
    def _(ms, _name=_name):
        return getattr(ms.nn, _name)()(_x(ms, 2, 3, 4, seed=1))

# SeLU is left out: MindSpore 2.10's CPU SeLU gradient is wrong for x < 0 (not scale*alpha*exp(x)).
for _name in ["Mish", "HSwish", "LogSigmoid", "Softsign", "Tanhshrink"]:
    @case(f"nn_more/{_name.lower()}_grad", **GRAD_TOL)
    def _(ms, _name=_name):
        return _value_and_input_grad(ms, getattr(ms.nn, _name)(), _x(ms, 3, 5, seed=2))


@case("nn_more/hardtanh_custom_range_and_grad", **GRAD_TOL)
def _(ms):
    cell = ms.nn.Hardtanh(min_val=-0.5, max_val=2.0)
    x = _x(ms, 4, 5, seed=3)
    return cell(x), _value_and_input_grad(ms, cell, x)


@case("nn_more/softshrink_hshrink")
def _(ms):
    x = _x(ms, 3, 6, seed=4, low=-1.0, high=1.0)
    return ms.nn.SoftShrink()(x), ms.nn.SoftShrink(0.3)(x), ms.nn.HShrink()(x), ms.nn.HShrink(lambd=0.8)(x)


@case("nn_more/softmin_axis")
def _(ms):
    x = _x(ms, 2, 3, 4, seed=5)
    return ms.nn.Softmin()(x), ms.nn.Softmin(axis=1)(x), ms.nn.Softmin(0)(x)


@case("nn_more/celu_alpha_and_grad", **GRAD_TOL)
def _(ms):
    x = _x(ms, 3, 4, seed=6)
    return ms.nn.CELU()(x), ms.nn.CELU(alpha=0.5)(x), _value_and_input_grad(ms, ms.nn.CELU(2.0), x)


@case("nn_more/glu_axis_and_grad", **GRAD_TOL)
def _(ms):
    x = _x(ms, 4, 6, seed=7)
    return ms.nn.GLU()(x), ms.nn.GLU(axis=0)(x), _value_and_input_grad(ms, ms.nn.GLU(), x)


@case("nn_more/threshold")
def _(ms):
    x = _x(ms, 3, 5, seed=8)
    return ms.nn.Threshold(0.5, 20.0)(x), ms.nn.Threshold(threshold=-1.0, value=-7.0)(x)


@case("nn_more/rrelu_equal_bounds_is_leaky")
def _(ms):
    return ms.nn.RReLU(0.2, 0.2)(_x(ms, 3, 4, seed=9))


@case("nn_more/rrelu_positive_part_unchanged")
def _(ms):
    x = _x(ms, 4, 4, seed=10)
    y = ms.nn.RReLU()(x).asnumpy()
    xn = x.asnumpy()
    slope = np.where(xn < 0, y / np.where(xn < 0, xn, 1.0), 0.0)
    return y[xn > 0], bool(np.all((slope[xn < 0] >= 0.125 - 1e-6) & (slope[xn < 0] <= 1 / 3 + 1e-6)))


@case("nn_more/prelu_default_forward_and_param_name")
def _(ms):
    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.act = ms.nn.PReLU()

        def construct(self, x):
            return self.act(x)
    net = Net()
    return net(_x(ms, 2, 3, 4, seed=11)), param_names(net), net.act.w


@case("nn_more/prelu_channels_grad", **GRAD_TOL)
def _(ms):
    cell = ms.nn.PReLU(channel=3, w=[0.1, 0.2, 0.3])
    x = _x(ms, 2, 3, 4, seed=12)
    w = T(ms, rand(2, 3, 4, seed=13))
    fn = ms.value_and_grad(lambda x_: (cell(x_) * w).sum(), 0, cell.trainable_params())
    return cell(x), fn(x)


@case("nn_more/prelu_tensor_w")
def _(ms):
    cell = ms.nn.PReLU(2, ms.Tensor(np.array([0.5, -0.5], np.float32)))
    return cell(_x(ms, 3, 2, seed=14))


@case("nn_more/get_activation_names")
def _(ms):
    x = _x(ms, 2, 4, seed=15)
    names = ["hswish", "hsigmoid", "logsigmoid", "softsign", "tanhshrink", "mish", "softshrink", "hshrink",
             "softmin", "hardtanh", "prelu"]
    return [ms.nn.get_activation(n)(x) for n in names]


@case("nn_more/dense_with_new_activation")
def _(ms):
    net = fill_params(ms, ms.nn.Dense(4, 3, activation="hswish"), seed=3, scale=1.0)
    return net(_x(ms, 2, 4, seed=16))


@case("nn_more/hardtanh_bad_range", raises=True)
def _(ms):
    return ms.nn.Hardtanh(1.0, -1.0)


@case("nn_more/prelu_bad_channel", raises=True)
def _(ms):
    return ms.nn.PReLU(channel=0)


@case("nn_more/prelu_w_list_length", raises=True)
def _(ms):
    return ms.nn.PReLU(channel=3, w=[0.1, 0.2])


@case("nn_more/prelu_w_bad_type", raises=True)
def _(ms):
    return ms.nn.PReLU(w="0.25")


@case("nn_more/rrelu_lower_above_upper", raises=True)
def _(ms):
    return ms.nn.RReLU(0.5, 0.1)


@case("nn_more/softmax2d_bad_rank", raises=True)
def _(ms):
    return ms.nn.Softmax2d()(_x(ms, 3, 4))


@case("nn_more/glu_odd_axis", raises=True)
def _(ms):
    return ms.nn.GLU()(_x(ms, 3, 5))


# =================================================================================================
# padding cells
@case("nn_more/pad_constant")
def _(ms):
    x = _x(ms, 2, 3, seed=20)
    return ms.nn.Pad(((1, 1), (2, 2)))(x), ms.nn.Pad(paddings=((0, 1), (1, 0)), mode="CONSTANT")(x)


@case("nn_more/pad_reflect_symmetric")
def _(ms):
    x = _x(ms, 3, 4, seed=21)
    return ms.nn.Pad(((1, 2), (2, 3)), mode="REFLECT")(x), ms.nn.Pad(((1, 2), (2, 3)), mode="SYMMETRIC")(x)


@case("nn_more/pad_symmetric_grad", **GRAD_TOL)
def _(ms):
    return _value_and_input_grad(ms, ms.nn.Pad(((0, 0), (1, 1), (2, 1)), mode="SYMMETRIC"), _x(ms, 2, 3, 3, seed=22))


@case("nn_more/pad_reflect_grad", **GRAD_TOL)
def _(ms):
    return _value_and_input_grad(ms, ms.nn.Pad(((0, 0), (1, 2)), mode="REFLECT"), _x(ms, 2, 4, seed=23))


@case("nn_more/pad_bad_mode", raises=True)
def _(ms):
    return ms.nn.Pad(((1, 1),), mode="EDGE")


@case("nn_more/pad_bad_paddings", raises=True)
def _(ms):
    return ms.nn.Pad([[1, 1]])


@case("nn_more/constant_pads")
def _(ms):
    x = _x(ms, 1, 2, 3, 4, seed=24)
    return (ms.nn.ConstantPad1d((1, 2), 0.5)(x), ms.nn.ConstantPad1d(1, -1)(x),
            ms.nn.ConstantPad2d((1, 0, 2, 1), 3.0)(x), ms.nn.ConstantPad2d(1, 0.25)(x),
            ms.nn.ConstantPad3d((1, 1, 0, 1, 1, 0), 2.0)(x), ms.nn.ZeroPad2d((1, 2, 0, 1))(x), ms.nn.ZeroPad2d(2)(x))


@case("nn_more/constant_pad_negative_crops")
def _(ms):
    return ms.nn.ConstantPad2d((-1, 1, 0, -1), 9.0)(_x(ms, 1, 3, 4, seed=25))


@case("nn_more/constant_pad1d_bad_length", raises=True)
def _(ms):
    return ms.nn.ConstantPad1d((1, 2, 3, 4), 0.0)


@case("nn_more/constant_pad_bad_value", raises=True)
def _(ms):
    return ms.nn.ConstantPad2d(1, "0")


@case("nn_more/reflection_pads")
def _(ms):
    x = _x(ms, 1, 2, 4, 5, seed=26)
    return (ms.nn.ReflectionPad1d(2)(x), ms.nn.ReflectionPad1d((1, 3))(x), ms.nn.ReflectionPad2d(1)(x),
            ms.nn.ReflectionPad2d((2, 1, 0, 3))(x))


@case("nn_more/reflection_pad_grad", **GRAD_TOL)
def _(ms):
    return _value_and_input_grad(ms, ms.nn.ReflectionPad2d((1, 2, 2, 1)), _x(ms, 1, 1, 3, 4, seed=27))


@case("nn_more/reflection_pad_negative", raises=True)
def _(ms):
    return ms.nn.ReflectionPad1d((1, -1))


@case("nn_more/replication_pads")
def _(ms):
    x3 = _x(ms, 2, 3, 4, seed=28)
    x4 = _x(ms, 1, 2, 3, 4, seed=29)
    return (ms.nn.ReplicationPad1d((2, 1))(x3), ms.nn.ReplicationPad1d(3)(x3), ms.nn.ReplicationPad2d(1)(x4),
            ms.nn.ReplicationPad2d((0, 2, 1, 0))(x3))


@case("nn_more/replication_pad_grad", **GRAD_TOL)
def _(ms):
    return _value_and_input_grad(ms, ms.nn.ReplicationPad2d((2, 0, 1, 1)), _x(ms, 1, 1, 3, 3, seed=30))


@case("nn_more/reflection_pad_bad_type", raises=True)
def _(ms):
    return ms.nn.ReflectionPad2d([1, 1, 1, 1])


# =================================================================================================
# shape and math cells
@case("nn_more/pixel_shuffle_unshuffle")
def _(ms):
    x = T(ms, np.arange(2 * 8 * 2 * 3).reshape(2, 8, 2, 3))
    y = ms.nn.PixelShuffle(2)(x)
    return y, ms.nn.PixelUnshuffle(2)(y), ms.nn.PixelUnshuffle(downscale_factor=2)(_x(ms, 1, 4, 6, seed=31))


@case("nn_more/pixel_shuffle_grad", **GRAD_TOL)
def _(ms):
    return _value_and_input_grad(ms, ms.nn.PixelShuffle(3), _x(ms, 1, 9, 2, 2, seed=32))


@case("nn_more/pixel_shuffle_bad_channels", raises=True)
def _(ms):
    return ms.nn.PixelShuffle(2)(_x(ms, 1, 6, 2, 2))


@case("nn_more/unflatten")
def _(ms):
    x = T(ms, np.arange(100).reshape(2, 10, 5))
    return ms.nn.Unflatten(1, (2, 5))(x), ms.nn.Unflatten(-1, [5, 1])(x), ms.nn.Unflatten(0, (1, 2))(x)


@case("nn_more/unflatten_bad_axis_type", raises=True)
def _(ms):
    return ms.nn.Unflatten(1.0, (2, 5))


@case("nn_more/upsample_nearest_bilinear")
def _(ms):
    x = _x(ms, 1, 2, 3, 4, seed=33)
    return (ms.nn.Upsample(size=(5, 6))(x), ms.nn.Upsample(size=(6, 8), mode="bilinear", align_corners=True)(x),
            ms.nn.Upsample(scale_factor=(2.0, 2.0), mode="bilinear", recompute_scale_factor=True)(x))


@case("nn_more/tril_triu")
def _(ms):
    x = _x(ms, 2, 4, 5, seed=34)
    return ms.nn.Tril()(x), ms.nn.Tril()(x, 1), ms.nn.Triu()(x), ms.nn.Triu()(x, -1)


@case("nn_more/onehot")
def _(ms):
    idx = ms.Tensor(np.array([[0, 2], [1, 3]], np.int32))
    return (ms.nn.OneHot(depth=4)(idx), ms.nn.OneHot(axis=0, depth=3, on_value=5.0, off_value=-1.0)(idx),
            ms.nn.OneHot(depth=3, dtype=ms.float16)(idx))


@case("nn_more/matmul_transposes")
def _(ms):
    a = _x(ms, 2, 3, 4, seed=35)
    b = _x(ms, 2, 5, 4, seed=36)
    c = _x(ms, 4, seed=37)
    return (ms.nn.MatMul(transpose_x2=True)(a, b), ms.nn.MatMul(True, False)(a, _x(ms, 3, 2, seed=38)),
            ms.nn.MatMul()(a, c))


@case("nn_more/matmul_bad_flag", raises=True)
def _(ms):
    return ms.nn.MatMul(transpose_x1=1)


@case("nn_more/norm_cell")
def _(ms):
    x = _x(ms, 2, 3, 4, seed=39)
    return ms.nn.Norm()(x), ms.nn.Norm(axis=1)(x), ms.nn.Norm(axis=(0, 2), keep_dims=True)(x)


@case("nn_more/moments")
def _(ms):
    x = _x(ms, 2, 3, 4, seed=40)
    return ms.nn.Moments()(x), ms.nn.Moments(axis=1)(x), ms.nn.Moments(axis=(0, 2), keep_dims=True)(x)


@case("nn_more/moments_grad", **GRAD_TOL)
def _(ms):
    x = _x(ms, 3, 4, seed=41)
    cell = ms.nn.Moments(axis=0)

    def f(x_):
        m, v = cell(x_)
        return (m * 2.0).sum() + (v * T(ms, rand(4, seed=3))).sum()
    return ms.value_and_grad(f)(x)


@case("nn_more/range_cell")
def _(ms):
    return ms.nn.Range(1, 8, 2)(), ms.nn.Range(0.5, 2.0, 0.5)(), ms.nn.Range(5)()


@case("nn_more/roll_bad_lengths", raises=True)
def _(ms):
    return ms.nn.Roll(shift=[1, 2], axis=[0])


@case("nn_more/celldict_names_and_order")
def _(ms):
    nn = ms.nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellDict({"proj": nn.Dense(3, 4), "act": nn.ReLU(), "out": nn.Dense(4, 2)})

        def construct(self, x):
            for k in ("proj", "act", "out"):
                x = self.blocks[k](x)
            return x
    net = fill_params(ms, Net(), seed=4, scale=0.5)
    return net(_x(ms, 2, 3, seed=42)), param_names(net), list(net.blocks.keys()), len(net.blocks), "act" in net.blocks


@case("nn_more/celldict_update_pop")
def _(ms):
    nn = ms.nn
    d = nn.CellDict([("a", nn.Dense(2, 2)), ("b", nn.ReLU())])
    d.update({"c": nn.Dense(2, 1)})
    d["d"] = nn.Tanh()
    popped = d.pop("b")
    return list(d.keys()), type(popped).__name__, [p.name for p in d.get_parameters()]


@case("nn_more/celldict_bad_value", raises=True)
def _(ms):
    return ms.nn.CellDict({"a": ms.nn.CellList([ms.nn.ReLU()])})


@case("nn_more/celldict_dotted_key", raises=True)
def _(ms):
    return ms.nn.CellDict({"a.b": ms.nn.ReLU()})


# =================================================================================================
# MultiheadAttention and the Transformer layers (eval mode: dropout off)
def _seq(ms, *shape, seed=50):
    return _x(ms, *shape, seed=seed, low=-1.0, high=1.0)


def _mha(ms, *args, seed=1, **kw):
    return fill_params(ms, ms.nn.MultiheadAttention(*args, **kw), seed=seed, scale=0.5)


@case("nn_more/mha_self_attention_seq_first", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 2)
    x = _seq(ms, 5, 3, 8)
    out, w = mha(x, x, x)
    return out, w, param_names(mha)


@case("nn_more/mha_cross_attention_batch_first", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 4, batch_first=True, seed=2)
    q, kv = _seq(ms, 2, 3, 8, seed=51), _seq(ms, 2, 6, 8, seed=52)
    out, w = mha(q, kv, kv)
    no_w = mha(q, kv, kv, need_weights=False)
    return out, w, len(no_w), no_w[0]


@case("nn_more/mha_per_head_weights", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 6, 3, seed=3)
    q, k, v = _seq(ms, 4, 2, 6, seed=53), _seq(ms, 5, 2, 6, seed=54), _seq(ms, 5, 2, 6, seed=55)
    return mha(q, k, v, average_attn_weights=False)


@case("nn_more/mha_bool_causal_and_float_masks", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 2, seed=4)
    x = _seq(ms, 4, 2, 8, seed=56)
    causal = ms.Tensor(np.triu(np.ones((4, 4), bool), k=1))
    additive = T(ms, rand(4, 4, seed=57))
    return mha(x, x, x, attn_mask=causal), mha(x, x, x, attn_mask=additive)


@case("nn_more/mha_key_padding_mask", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 2, seed=5)
    x = _seq(ms, 4, 2, 8, seed=58)
    kpm = ms.Tensor(np.array([[False, False, True, True], [False, False, False, True]]))
    per_head = ms.Tensor(np.triu(np.ones((4, 4), bool), k=1)[None].repeat(4, 0))
    return mha(x, x, x, key_padding_mask=kpm), mha(x, x, x, key_padding_mask=kpm, attn_mask=per_head)


@case("nn_more/mha_kdim_vdim_names_and_forward", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 2, kdim=5, vdim=3, seed=6)
    q, k, v = _seq(ms, 3, 2, 8, seed=59), _seq(ms, 4, 2, 5, seed=60), _seq(ms, 4, 2, 3, seed=61)
    return mha(q, k, v), param_names(mha)


@case("nn_more/mha_bias_kv_zero_attn_no_bias", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 8, 2, has_bias=False, add_bias_kv=True, add_zero_attn=True, seed=7)
    x = _seq(ms, 3, 2, 8, seed=62)
    kpm = ms.Tensor(np.array([[False, False, True], [False, False, False]]))
    return mha(x, x, x), mha(x, x, x, key_padding_mask=kpm), param_names(mha)


@case("nn_more/mha_unbatched", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 4, 2, seed=8)
    x = _seq(ms, 3, 4, seed=63)
    return mha(x, x, x)


@case("nn_more/mha_param_grads", **GRAD_TOL)
def _(ms):
    mha = _mha(ms, 4, 2, seed=9)
    x = _seq(ms, 3, 2, 4, seed=64)
    w = T(ms, rand(3, 2, 4, seed=65))
    fn = ms.value_and_grad(lambda x_: (mha(x_, x_, x_)[0] * w).sum(), 0, mha.trainable_params())
    return fn(x)


@case("nn_more/mha_embed_dim_not_divisible", raises=True)
def _(ms):
    return ms.nn.MultiheadAttention(10, 3)


def _enc_layer(ms, seed=10, **kw):
    kw.setdefault("dropout", 0.0)
    return fill_params(ms, ms.nn.TransformerEncoderLayer(8, 2, 16, **kw), seed=seed, scale=0.4)


@case("nn_more/encoder_layer_post_norm", **GRAD_TOL)
def _(ms):
    layer = _enc_layer(ms)
    return layer(_seq(ms, 5, 2, 8, seed=66)), param_names(layer)


@case("nn_more/encoder_layer_norm_first_gelu_batch_first", **GRAD_TOL)
def _(ms):
    layer = _enc_layer(ms, seed=11, activation="gelu", norm_first=True, batch_first=True)
    return layer(_seq(ms, 2, 5, 8, seed=67))


@case("nn_more/encoder_layer_masks", **GRAD_TOL)
def _(ms):
    layer = _enc_layer(ms, seed=12)
    x = _seq(ms, 4, 2, 8, seed=68)
    causal = ms.Tensor(np.triu(np.ones((4, 4), bool), k=1))
    kpm = ms.Tensor(np.array([[False, False, False, True], [False, False, False, False]]))
    return layer(x, src_mask=causal, src_key_padding_mask=kpm)


@case("nn_more/encoder_layer_default_dropout_in_eval", **GRAD_TOL)
def _(ms):
    layer = fill_params(ms, ms.nn.TransformerEncoderLayer(8, 2, 16), seed=13, scale=0.4)
    layer.set_train(False)
    return layer(_seq(ms, 3, 2, 8, seed=69))


@case("nn_more/encoder_layer_grads", **GRAD_TOL)
def _(ms):
    layer = _enc_layer(ms, seed=14)
    x = _seq(ms, 3, 2, 8, seed=70)
    w = T(ms, rand(3, 2, 8, seed=71))
    return ms.value_and_grad(lambda x_: (layer(x_) * w).sum(), 0, layer.trainable_params())(x)


@case("nn_more/encoder_stack_names_and_forward", **GRAD_TOL)
def _(ms):
    enc = ms.nn.TransformerEncoder(ms.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2,
                                   norm=ms.nn.LayerNorm((8,)))
    fill_params(ms, enc, seed=15, scale=0.4)
    return enc(_seq(ms, 4, 2, 8, seed=72)), param_names(enc)


@case("nn_more/decoder_layer_forward", **GRAD_TOL)
def _(ms):
    layer = fill_params(ms, ms.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), seed=16, scale=0.4)
    tgt, mem = _seq(ms, 3, 2, 8, seed=73), _seq(ms, 5, 2, 8, seed=74)
    causal = ms.Tensor(np.triu(np.ones((3, 3), bool), k=1))
    return layer(tgt, mem), layer(tgt, mem, tgt_mask=causal), param_names(layer)


@case("nn_more/decoder_layer_norm_first_memory_mask", **GRAD_TOL)
def _(ms):
    layer = fill_params(ms, ms.nn.TransformerDecoderLayer(8, 4, 16, dropout=0.0, norm_first=True, batch_first=True),
                        seed=17, scale=0.4)
    tgt, mem = _seq(ms, 2, 3, 8, seed=75), _seq(ms, 2, 5, 8, seed=76)
    mkpm = ms.Tensor(np.array([[False] * 4 + [True], [False] * 5]))
    return layer(tgt, mem, memory_key_padding_mask=mkpm)


@case("nn_more/decoder_stack", **GRAD_TOL)
def _(ms):
    dec = ms.nn.TransformerDecoder(ms.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2)
    fill_params(ms, dec, seed=18, scale=0.4)
    return dec(_seq(ms, 3, 2, 8, seed=77), _seq(ms, 4, 2, 8, seed=78)), len(param_names(dec))


@case("nn_more/transformer_full", **GRAD_TOL)
def _(ms):
    model = ms.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16,
                              dropout=0.0)
    fill_params(ms, model, seed=19, scale=0.4)
    src, tgt = _seq(ms, 5, 2, 8, seed=79), _seq(ms, 3, 2, 8, seed=80)
    causal = ms.Tensor(np.triu(np.ones((3, 3), bool), k=1))
    return model(src, tgt, tgt_mask=causal), param_names(model)


@case("nn_more/transformer_bad_activation", raises=True)
def _(ms):
    return ms.nn.TransformerEncoderLayer(8, 2, 16, activation="tanh")


@case("nn_more/transformer_relu_cell_activation_refused", raises=True)
def _(ms):
    return ms.nn.TransformerEncoderLayer(8, 2, 16, activation=ms.nn.ReLU())


@case("nn_more/transformer_ops_relu_activation", **GRAD_TOL)
def _(ms):
    layer = fill_params(ms, ms.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=ms.ops.relu), seed=20,
                        scale=0.4)
    return layer(_seq(ms, 3, 2, 8, seed=81))


# =================================================================================================
# optimizers after 3 steps (Dense -> LayerNorm -> Dense, fixed gradients), state names and values
_opt_net = dense_norm_dense


def _run_opt(ms, make_opt, steps=3, flip=True):
    """Apply `steps` fixed gradients (every other step negated when `flip`, so sign-based rules
    see sign changes); return parameters and optimizer state by name."""
    net = _opt_net(ms)
    params = net.trainable_params()
    opt = make_opt(params)
    for step in range(steps):
        sign = -1.0 if (flip and step == 1) else 1.0
        opt(tuple(ms.Tensor(rand(*p.shape, seed=200 + 10 * step + i) * np.float32(sign)) for i, p in enumerate(params)))
    names = {p.name for p in params}
    return ({p.name: p for p in params},
            {p.name: p for p in opt.get_parameters() if p.name not in names and p.name != "learning_rate"})


OPT_TOL = dict(rtol=1e-4, atol=1e-6)


@case("nn_more/adamax_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.AdaMax(p, learning_rate=0.01))


@case("nn_more/adamax_weight_decay_betas", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.AdaMax(p, learning_rate=0.02, beta1=0.8, beta2=0.95, eps=1e-6,
                                               weight_decay=0.1))


@case("nn_more/adamax_bad_beta", raises=True)
def _(ms):
    return ms.nn.AdaMax(_opt_net(ms).trainable_params(), beta1=1.0)


@case("nn_more/adadelta_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.Adadelta(p))


@case("nn_more/adadelta_rho_eps_wd", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.Adadelta(p, learning_rate=0.5, rho=0.8, epsilon=1e-4, weight_decay=0.05))


@case("nn_more/adadelta_bad_rho", raises=True)
def _(ms):
    return ms.nn.Adadelta(_opt_net(ms).trainable_params(), rho=1.5)


@case("nn_more/asgd_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.ASGD(p, learning_rate=0.1))


@case("nn_more/asgd_averaging_kicks_in", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.ASGD(p, learning_rate=0.05, lambd=0.01, alpha=0.5, t0=1.0, weight_decay=0.1),
                    steps=4)


@case("nn_more/asgd_bad_lambd_type", raises=True)
def _(ms):
    return ms.nn.ASGD(_opt_net(ms).trainable_params(), lambd=1)


@case("nn_more/rprop_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.Rprop(p, learning_rate=0.01), steps=4)


@case("nn_more/rprop_etas_clip", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.Rprop(p, learning_rate=0.05, etas=(0.3, 1.5), step_sizes=(0.02, 0.06)),
                    steps=4)


@case("nn_more/rprop_bad_etaplus", raises=True)
def _(ms):
    return ms.nn.Rprop(_opt_net(ms).trainable_params(), etas=(0.5, 0.9))


@case("nn_more/rprop_bad_step_sizes", raises=True)
def _(ms):
    return ms.nn.Rprop(_opt_net(ms).trainable_params(), step_sizes=(1.0, 0.5))


@case("nn_more/ftrl_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.FTRL(p, learning_rate=0.1))


# l1 > 0 is left out: MindSpore 2.10's CPU ApplyFtrl gives w = (l1 - linear) / quadratic for a NEGATIVE
# linear too (it should be (-l1 - linear) / quadratic, shrinking towards 0); minispore follows the formula.
@case("nn_more/ftrl_l2_power_accum", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.FTRL(p, initial_accum=0.5, learning_rate=0.2, lr_power=-0.3, l2=0.1))


@case("nn_more/ftrl_bad_lr_power", raises=True)
def _(ms):
    return ms.nn.FTRL(_opt_net(ms).trainable_params(), lr_power=0.5)


@case("nn_more/ftrl_dynamic_lr_refused", raises=True)
def _(ms):
    return ms.nn.FTRL(_opt_net(ms).trainable_params(), learning_rate=[0.1, 0.2, 0.3])


@case("nn_more/proximal_adagrad_3_steps", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.ProximalAdagrad(p, learning_rate=0.1))


@case("nn_more/proximal_adagrad_l1_l2", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.ProximalAdagrad(p, accum=0.2, learning_rate=0.3, l1=0.05, l2=0.2,
                                                        weight_decay=0.1))


@case("nn_more/proximal_adagrad_bad_l1", raises=True)
def _(ms):
    return ms.nn.ProximalAdagrad(_opt_net(ms).trainable_params(), l1=-0.1)


@case("nn_more/adamax_with_inverse_decay_schedule", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.AdaMax(p, learning_rate=ms.nn.InverseDecayLR(0.05, 0.5, 1)))


@case("nn_more/adadelta_with_natural_exp_list", **OPT_TOL)
def _(ms):
    return _run_opt(ms, lambda p: ms.nn.Adadelta(p, learning_rate=ms.nn.natural_exp_decay_lr(0.5, 0.3, 3, 1, 2)))


# =================================================================================================
# learning-rate schedules
@case("nn_more/inverse_decay_lr_cell")
def _(ms):
    steps = ms.Tensor(np.array(7, np.int32))
    return (ms.nn.InverseDecayLR(0.1, 0.9, 4)(steps), ms.nn.InverseDecayLR(0.1, 0.9, 4, is_stair=True)(steps),
            ms.nn.InverseDecayLR(0.1, 0.5, 1)(ms.Tensor(np.array(0, np.int32))))


@case("nn_more/natural_exp_decay_lr_cell")
def _(ms):
    steps = ms.Tensor(np.array(7, np.int32))
    return ms.nn.NaturalExpDecayLR(0.1, 0.3, 4)(steps), ms.nn.NaturalExpDecayLR(0.1, 0.3, 4, True)(steps)


@case("nn_more/inverse_and_natural_exp_lists")
def _(ms):
    return (ms.nn.inverse_decay_lr(0.1, 0.5, 6, 2, 1), ms.nn.inverse_decay_lr(0.1, 0.5, 8, 1, 3, is_stair=True),
            ms.nn.natural_exp_decay_lr(0.1, 0.5, 6, 2, 2), ms.nn.natural_exp_decay_lr(0.1, 0.5, 8, 1, 3, True))


@case("nn_more/inverse_decay_lr_bad_steps", raises=True)
def _(ms):
    return ms.nn.InverseDecayLR(0.1, 0.9, 0)


@case("nn_more/natural_exp_decay_lr_bad_total", raises=True)
def _(ms):
    return ms.nn.natural_exp_decay_lr(0.1, 0.5, 0, 1, 1)
