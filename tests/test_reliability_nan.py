"""Issue 12 §1: NaN / inf / -1 arguments that used to give silent wrong results.

Each test failed on the code before the fix: `ops.dropout(p=nan)` returned all NaN,
`broadcast_to(x, (-1, -1))` returned a (3, 3) array for a (3,) input, optimizers and LR schedules
accepted NaN hyper-parameters (every weight NaN after one step), and greedy generation from a model
with NaN weights emitted token 0 until max_new_tokens without a word.
"""
import math

import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, nn, ops
from minispore.common.errors import MinisporeRuntimeError, OpValueError
from minispore.llm import Llama, LlamaConfig, generate, generate_batch

NAN, INF = float("nan"), float("inf")


# -------------------------------------------------------------------------------------------------
# (a) dropout's p: a finite float in [0, 1) (MindSpore: keep_prob = 1 - p in (0, 1])
@pytest.mark.parametrize("p", [NAN, INF, -INF, 1.0, -0.1])
def test_dropout_refuses_a_non_finite_or_out_of_range_p(p):
    x = Tensor(np.ones((4, 5), np.float32))
    with pytest.raises(OpValueError, match="'dropout'.*finite float in \\[0, 1\\)"):
        ops.dropout(x, p=p)


def test_dropout2d_and_the_dropout_cell_refuse_nan():
    x4 = Tensor(np.ones((2, 3, 2, 2), np.float32))
    with pytest.raises(OpValueError, match="dropout2d"):
        ops.dropout2d(x4, p=NAN)
    with pytest.raises(OpValueError, match="Dropout"):
        nn.Dropout(p=NAN)
    with pytest.raises(OpValueError, match="Dropout"):
        nn.Dropout(keep_prob=NAN)
    with pytest.raises(OpValueError, match="Dropout2d"):
        nn.Dropout2d(p=NAN)


def test_dropout_just_below_one_still_rescales_the_survivors():
    x = Tensor(np.ones((2000,), np.float64))
    y = ops.dropout(x, p=0.75).asnumpy()
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 4.0)                          # 1 / (1 - 0.75)
    assert 0.15 < kept.size / y.size < 0.35


# -------------------------------------------------------------------------------------------------
# (b) broadcast_to: -1 keeps the input's size, so only where the input has that dimension
def test_broadcast_to_minus_one_on_a_new_leading_dim_is_an_error():
    y = Tensor(np.arange(3, dtype=np.float32))
    for shape in [(-1, -1), (-1, 3), (4, -1, 3)]:
        with pytest.raises(OpValueError, match="'broadcast_to'.*-1.*index"):
            ops.broadcast_to(y, shape)
    with pytest.raises(OpValueError, match="broadcast_to"):
        ops.broadcast_to(y, (-2, 3))                               # no negative size but -1 means anything


@pytest.mark.parametrize("src, shape, want", [((3,), (2, -1), (2, 3)), ((2, 3), (-1, -1), (2, 3)),
                                              ((2, 3), (4, -1, 3), (4, 2, 3)), ((2, 1), (5, -1, 4), (5, 2, 4))])
def test_broadcast_to_minus_one_keeps_the_input_size(src, shape, want):
    a = np.arange(math.prod(src), dtype=np.float32).reshape(src)
    out = ops.broadcast_to(Tensor(a), shape)
    assert out.shape == want
    np.testing.assert_array_equal(out.asnumpy(), np.broadcast_to(a, want))


# -------------------------------------------------------------------------------------------------
# (c) optimizers and LR schedules refuse NaN / inf hyper-parameters at construction
def _params():
    return nn.Dense(3, 2).trainable_params()


OPTIMIZER_CASES = [
    (nn.Adam, "learning_rate"), (nn.Adam, "beta1"), (nn.Adam, "beta2"), (nn.Adam, "eps"),
    (nn.Adam, "weight_decay"), (nn.Adam, "loss_scale"),
    (nn.AdamWeightDecay, "learning_rate"), (nn.AdamWeightDecay, "eps"), (nn.AdamWeightDecay, "weight_decay"),
    (nn.SGD, "learning_rate"), (nn.SGD, "momentum"), (nn.SGD, "dampening"), (nn.SGD, "weight_decay"),
    (lambda p, **kw: nn.Momentum(p, kw.pop("learning_rate", 0.1), kw.pop("momentum", 0.9), **kw), "momentum"),
    (lambda p, **kw: nn.Momentum(p, kw.pop("learning_rate", 0.1), kw.pop("momentum", 0.9), **kw), "learning_rate"),
    (nn.RMSProp, "decay"), (nn.RMSProp, "momentum"), (nn.RMSProp, "epsilon"),
    (nn.Adagrad, "accum"), (nn.Adadelta, "rho"), (nn.Adadelta, "epsilon"),
    (nn.AdaMax, "beta1"), (nn.AdaMax, "eps"), (nn.ASGD, "lambd"), (nn.ASGD, "alpha"), (nn.ASGD, "t0"),
    (lambda p, **kw: nn.Lamb(p, kw.pop("learning_rate", 1e-3), **kw), "beta2"),
    (nn.FTRL, "l1"), (nn.FTRL, "lr_power"), (nn.ProximalAdagrad, "l2"),
]


@pytest.mark.parametrize("bad", [NAN, INF])
@pytest.mark.parametrize("make, arg", OPTIMIZER_CASES)
def test_every_optimizer_refuses_non_finite_hyper_parameters(make, arg, bad):
    with pytest.raises(OpValueError, match="finite"):
        make(_params(), **{arg: bad})


@pytest.mark.parametrize("etas, steps", [((0.5, NAN), (1e-6, 50.0)), ((NAN, 1.2), (1e-6, 50.0)),
                                         ((0.5, 1.2), (NAN, 50.0)), ((0.5, 1.2), (1e-6, INF))])
def test_rprop_refuses_non_finite_etas_and_step_sizes(etas, steps):
    with pytest.raises(OpValueError, match="Rprop"):
        nn.Rprop(_params(), etas=etas, step_sizes=steps)


@pytest.mark.parametrize("lr", [[0.1, NAN, 0.1], np.array([0.1, INF]), Tensor(np.float32(NAN))])
def test_learning_rate_lists_and_tensors_refuse_non_finite_values(lr):
    with pytest.raises(OpValueError, match="Adam.*finite"):
        nn.Adam(_params(), learning_rate=lr)
    with pytest.raises(OpValueError, match="SGD.*finite"):
        nn.SGD([{"params": _params(), "lr": lr}])


@pytest.mark.parametrize("make", [
    lambda: nn.WarmUpLR(NAN, 10), lambda: nn.CosineDecayLR(0.0, NAN, 10), lambda: nn.CosineDecayLR(INF, 1.0, 10),
    lambda: nn.PolynomialDecayLR(0.1, 0.01, 10, NAN), lambda: nn.ExponentialDecayLR(0.1, NAN, 10),
    lambda: nn.WarmupCosineDecayLR(NAN, 0.0, 2, 10), lambda: nn.InverseDecayLR(0.1, NAN, 10),
    lambda: nn.NaturalExpDecayLR(INF, 0.5, 10),
    lambda: nn.cosine_decay_lr(0.0, NAN, 10, 2, 2), lambda: nn.warmup_lr(NAN, 10, 2, 2),
    lambda: nn.piecewise_constant_lr([2, 5], [0.1, NAN]), lambda: nn.exponential_decay_lr(0.1, NAN, 10, 2, 1),
])
def test_lr_schedules_refuse_non_finite_arguments(make):
    with pytest.raises(OpValueError, match="finite"):
        make()


def test_a_valid_optimizer_still_trains_after_the_checks():
    # the checks must not change a healthy step: one SGD step against w - lr * g by hand
    net = nn.Dense(3, 1, has_bias=False)
    w0 = net.weight.asnumpy().astype(np.float64)
    x = np.array([[1.0, 2.0, -1.0]], np.float32)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.5)
    loss_fn = lambda xx: ops.sum(net(xx))          # noqa: E731
    _, grads = ms.value_and_grad(loss_fn, None, opt.parameters)(Tensor(x))
    opt(grads)
    np.testing.assert_allclose(net.weight.asnumpy(), w0 - 0.5 * x.astype(np.float64), rtol=1e-6)


# -------------------------------------------------------------------------------------------------
# (d) generation stops with a clear error on non-finite logits, naming the step
def _tiny_llama():
    ms.set_seed(3)
    m = Llama(LlamaConfig(vocab_size=13, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32,
                          multiple_of=8, tie_embeddings=False))
    for p in m.get_parameters():                     # peaked logits: greedy picks vary with the context
        p.set_data(Tensor(p.asnumpy() * 20 if p.ndim == 2 else p.asnumpy()))
    return m


@pytest.mark.parametrize("kv_cache", ["contiguous", "paged", None])
def test_nan_weights_stop_greedy_generation_at_step_zero(kv_cache):
    m = _tiny_llama()
    w = m.layers[0].attention.wq.weight
    bad = w.asnumpy()
    bad[0, 0] = np.nan
    w.set_data(Tensor(bad))
    with pytest.raises(MinisporeRuntimeError, match="'generate'.*non-finite logits at generation step 0"):
        generate_batch(m, [[1, 2, 3]], 50, temperature=0.0, kv_cache=kv_cache)
    with pytest.raises(MinisporeRuntimeError, match="NaN"):
        generate(m, [1, 2, 3], 500, temperature=0.0)      # context="slide": would never end on its own


@pytest.mark.parametrize("kv_cache", ["contiguous", "paged", None])
def test_a_nan_embedding_row_is_reported_at_the_step_after_its_token(kv_cache):
    m = _tiny_llama()
    prompt = [1, 2]
    clean = generate_batch(m, [prompt], 12, temperature=0.0, kv_cache=kv_cache)[0].token_ids
    # the first generated token not seen before: poisoning its embedding row changes nothing
    # until it is fed back, so the logits of the next step are the first non-finite ones
    k = next(i for i, t in enumerate(clean) if t not in prompt + clean[:i])
    table = m.tok_embeddings.embedding_table
    rows = table.asnumpy()
    rows[clean[k]] = np.nan
    table.set_data(Tensor(rows))
    with pytest.raises(MinisporeRuntimeError, match=f"generation step {k + 1} "):
        generate_batch(m, [prompt], 12, temperature=0.0, kv_cache=kv_cache)


def test_minus_inf_logits_masking_tokens_are_still_allowed():
    from minispore.llm.generate import _check_logits, _Row
    row = _Row([1, 2], np.random.default_rng(0))
    _check_logits(row, np.array([0.5, -np.inf, 2.0]))             # a masked-out token is fine
    with pytest.raises(MinisporeRuntimeError, match=r"all 3 logits -inf"):
        _check_logits(row, np.full(3, -np.inf))
    with pytest.raises(MinisporeRuntimeError, match=r"0 NaN and 1 \+inf"):
        _check_logits(row, np.array([0.5, np.inf, 2.0]))
