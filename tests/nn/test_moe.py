"""nn.MoE (minispore/nn/layers/moe.py): the mixture-of-experts FFN against a naive per-token float64
loop (outputs, dropped counts, expert load, auxiliary and z-losses), finite-difference gradients of
the router, the experts and the input, capacity edge cases with closed-form drop counts, token
groups, the LLaMA integration (config, preset, loss, CLI) and bad input."""
import json
import math

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpTypeError, OpValueError
from minispore.llm import Llama, LlamaConfig
from minispore.llm.config import PRESETS, TransformerOpParallelConfig, get_preset
from minispore.nn.layers.moe import expert_capacity
from minispore.ops import functional as F


# ------------------------------------------------------------------------------------------------
# the oracle: one token at a time, in plain float64 NumPy
def naive_moe(x, wr, w1, w2, w3, top_k, capacity_factor, groups=1):
    """y, dropped, fully_dropped, load, aux, z of the MoE on x (T, d), written as loops."""
    tokens, dim = x.shape
    n = wr.shape[0]
    per = tokens // groups
    cap = math.ceil(capacity_factor * per * top_k / n - 1e-9)       # the formula, independently
    cap = max(cap, 1)
    y = np.zeros_like(x)
    dropped = fully = 0
    load = np.zeros(n, np.int64)
    aux_groups, z_terms = [], []
    for g in range(groups):
        xs = x[g * per:(g + 1) * per]
        probs, choices, gates = [], [], []
        for t in range(per):
            logits = wr @ xs[t]
            m = logits.max()
            z_terms.append((m + math.log(np.exp(logits - m).sum())) ** 2)
            p = np.exp(logits - m) / np.exp(logits - m).sum()
            order = sorted(range(n), key=lambda e: (-p[e], e))[:top_k]
            w = p[order] / p[order].sum() if top_k > 1 else p[order]
            probs.append(p)
            choices.append(order)
            gates.append(w)
        count = [0] * n
        kept = [[False] * top_k for _ in range(per)]
        for j in range(top_k):                    # every first choice before any second choice
            for t in range(per):
                e = choices[t][j]
                if count[e] < cap:
                    count[e] += 1
                    kept[t][j] = True
                else:
                    dropped += 1
        for t in range(per):
            if not any(kept[t]):
                fully += 1
            for j in range(top_k):
                if kept[t][j]:
                    e = choices[t][j]
                    a, b = xs[t] @ w1[e], xs[t] @ w3[e]
                    h = a / (1 + np.exp(-a)) * b
                    y[g * per + t] += gates[t][j] * (h @ w2[e])
                    load[e] += 1
        frac = np.zeros(n)
        for t in range(per):
            for e in choices[t]:
                frac[e] += 1.0 / per
        aux_groups.append(n * float(frac @ np.mean(probs, axis=0)))
    return y, dropped, fully, load, float(np.mean(aux_groups)), float(np.mean(z_terms))


def make_moe(dim=6, hidden=5, n=4, k=2, cf=1.25, groups=1, seed=0, z=0.0, scale=1.0):
    layer = nn.MoE(dim, hidden, n, top_k=k, capacity_factor=cf, token_groups=groups, router_z_loss_coef=z,
                   dtype=ms.float64)
    g = np.random.default_rng(seed)
    layer.router.weight.set_data(ms.Tensor(scale * g.standard_normal((n, dim))))
    for name, shape in (("w1", (n, dim, hidden)), ("w2", (n, hidden, dim)), ("w3", (n, dim, hidden))):
        getattr(layer.experts, name).set_data(ms.Tensor(0.5 * g.standard_normal(shape)))
    return layer


def weights(layer):
    e = layer.experts
    return (layer.router.weight.asnumpy(), e.w1.asnumpy(), e.w2.asnumpy(), e.w3.asnumpy())


def tokens(n_tokens, dim=6, seed=1):
    return np.random.default_rng(seed).standard_normal((n_tokens, dim))


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, cf, groups", [(1, 1.0, 1), (2, 1.0, 1), (2, 0.5, 1), (2, 1.25, 2), (1, 0.6, 3),
                                           (3, 0.75, 2), (2, 100.0, 1)])
def test_forward_equals_the_per_token_loop(k, cf, groups):
    layer = make_moe(k=k, cf=cf, groups=groups, z=0.1)
    x = tokens(12)
    y = layer(ms.Tensor(x)).asnumpy()
    ref_y, dropped, fully, load, aux, z = naive_moe(x, *weights(layer), k, cf, groups)
    np.testing.assert_allclose(y, ref_y, rtol=1e-12, atol=1e-13)
    assert layer.capacity == expert_capacity(12 // groups, 4, k, cf)
    assert (layer.dropped_tokens, layer.fully_dropped_tokens) == (dropped, fully)
    assert layer.expert_load.tolist() == load.tolist()
    assert layer.expert_load.sum() == 12 * k - dropped          # every assignment is kept or dropped
    assert layer.aux_loss.asnumpy() == pytest.approx(aux, rel=1e-12)
    assert layer.z_loss.asnumpy() == pytest.approx(z, rel=1e-12)
    np.testing.assert_allclose(layer.loss_term().asnumpy(), 0.01 * aux + 0.1 * z, rtol=1e-12)
    if cf == 100.0:
        assert dropped == 0
    if cf <= 0.6:
        assert dropped > 0                        # the small factors really drop something


def test_input_of_any_leading_shape():
    layer = make_moe()
    x = tokens(12)
    y2 = layer(ms.Tensor(x)).asnumpy()
    y3 = layer(ms.Tensor(x.reshape(3, 4, 6))).asnumpy()
    assert y3.shape == (3, 4, 6)
    np.testing.assert_array_equal(y3.reshape(12, 6), y2)


def test_capacity_formula():
    assert expert_capacity(8, 4, 2, 1.25) == 5                  # 1.25 * 8 * 2 / 4 = 5 exactly
    assert expert_capacity(10, 4, 2, 1.1) == 6                  # 5.5 -> 6
    assert expert_capacity(10, 7, 1, 0.7) == 1                  # 0.7*10/7 is 1.0000000000000002 in floats
    assert expert_capacity(3, 4, 1, 1e-6) == 1                  # never below one slot
    assert expert_capacity(16, 4, 2, 2.0) == 16                 # capacity_factor = n / k: every token fits


def test_large_capacity_drops_nothing_and_tiny_capacity_drops_exactly():
    x = tokens(40, seed=3)
    big = make_moe(cf=2.0)                                      # n / k = 2: capacity = the token count
    big(ms.Tensor(x))
    assert big.capacity == 40 and big.dropped_tokens == 0 and big.fully_dropped_tokens == 0
    tiny = make_moe(cf=1e-3)                                    # one slot per expert
    tiny(ms.Tensor(x))
    assert tiny.capacity == 1
    # closed form: each expert keeps one assignment, everything else it was given is dropped
    p = x @ tiny.router.weight.asnumpy().T
    chosen = np.argsort(-p, axis=1, kind="stable")[:, :2]
    counts = np.bincount(chosen.reshape(-1), minlength=4)
    assert tiny.dropped_tokens == int(np.maximum(counts - 1, 0).sum())
    assert tiny.expert_load.tolist() == np.minimum(counts, 1).tolist()


def test_drop_order_first_choices_first_in_token_order():
    """Every token prefers expert 0, then expert 1: with S tokens and capacity C = S/2 the first C
    tokens keep both choices, the others lose both (closed form: dropped 2 (S - C), fully S - C)."""
    s, dim = 8, 2
    layer = nn.MoE(dim, 3, 4, top_k=2, capacity_factor=1.0, dtype=ms.float64)
    layer.router.weight.set_data(ms.Tensor(np.array([[3.0, 0], [2.0, 0], [1.0, 0], [0.0, 0]])))
    x = np.column_stack([np.linspace(1, 2, s), np.zeros(s)])
    y = layer(ms.Tensor(x)).asnumpy()
    c = layer.capacity
    assert c == 4
    assert (layer.dropped_tokens, layer.fully_dropped_tokens) == (2 * (s - c), s - c)
    assert layer.expert_load.tolist() == [c, c, 0, 0]
    assert np.all(y[c:] == 0) and np.all(np.abs(y[:c]).sum(axis=1) > 0)   # dropped tokens leave as zero


def test_token_groups_are_independent_layers():
    """groups=2 on 16 tokens equals the layer on each half alone (capacity and losses per group)."""
    x = tokens(16, seed=4)
    two = make_moe(cf=0.75, groups=2)
    y = two(ms.Tensor(x)).asnumpy()
    one = make_moe(cf=0.75)
    halves, aux, dropped = [], [], []
    for part in (x[:8], x[8:]):
        halves.append(one(ms.Tensor(part)).asnumpy())
        aux.append(float(one.aux_loss.asnumpy()))
        dropped.append(one.dropped_tokens)
    np.testing.assert_allclose(y, np.concatenate(halves), rtol=1e-13, atol=1e-14)
    assert two.capacity == one.capacity == 3 and two.dropped_tokens == sum(dropped) > 0
    assert float(two.aux_loss.asnumpy()) == pytest.approx(sum(aux) / 2, rel=1e-13)
    nn.set_token_groups(one, 2)
    np.testing.assert_array_equal(one(ms.Tensor(x)).asnumpy(), y)
    with pytest.raises(OpValueError, match="MoE"):
        two(ms.Tensor(tokens(15)))                             # 15 tokens do not split in 2 groups


# ------------------------------------------------------------------------------------------------
# gradients: central differences in float64
def _numeric(f, array, index, eps=1e-6):
    old = array[index]
    array[index] = old + eps
    up = f()
    array[index] = old - eps
    down = f()
    array[index] = old
    return (up - down) / (2 * eps)


@pytest.mark.parametrize("k, cf", [(1, 1.0), (2, 0.75), (2, 4.0)])
def test_gradients_match_finite_differences(k, cf):
    layer = make_moe(k=k, cf=cf, z=0.05, seed=2)
    layer.aux_loss_coef = 0.3                                   # make the balancing loss's gradient visible
    x = tokens(10, seed=5)
    r = np.random.default_rng(6).standard_normal(x.shape)
    params = [layer.router.weight, layer.experts.w1, layer.experts.w2, layer.experts.w3]

    def objective(xt):
        return (layer(xt) * ms.Tensor(r)).sum() + layer.loss_term()

    _, (gx, grads) = ms.value_and_grad(objective, 0, params)(ms.Tensor(x))
    arrays = [p.asnumpy().copy() for p in params]

    def value(xa=None):
        for p, a in zip(params, arrays):
            p.set_data(ms.Tensor(a))
        return float(objective(ms.Tensor(x if xa is None else xa)).asnumpy())

    g = np.random.default_rng(7)
    for p_index, (a, grad) in enumerate(zip(arrays, grads)):
        grad = grad.asnumpy()
        for _ in range(8):
            idx = tuple(int(g.integers(0, s)) for s in a.shape)
            num = _numeric(value, a, idx)
            assert grad[idx] == pytest.approx(num, rel=1e-5, abs=1e-8), (p_index, idx)
    gx = gx.asnumpy()
    xa = x.copy()
    for _ in range(8):
        idx = tuple(int(g.integers(0, s)) for s in xa.shape)
        num = _numeric(lambda: value(xa), xa, idx)
        assert gx[idx] == pytest.approx(num, rel=1e-5, abs=1e-8)
    assert np.abs(grads[0].asnumpy()).max() > 1e-3              # the router learns (also for top-1)


def test_dropped_assignment_has_no_gradient_to_its_expert():
    """An expert that received only dropped assignments gets a zero gradient."""
    layer = nn.MoE(2, 3, 4, top_k=1, capacity_factor=0.25, dtype=ms.float64)   # 0.5 -> 1 slot
    layer.router.weight.set_data(ms.Tensor(np.array([[3.0, 0], [2.0, 0], [1.0, 0], [0.0, 0]])))
    x = np.column_stack([np.linspace(1, 2, 8), np.zeros(8)])
    params = [layer.experts.w1, layer.experts.w2, layer.experts.w3]
    _, grads = ms.value_and_grad(lambda t: layer(t).sum(), None, params)(ms.Tensor(x))
    assert layer.capacity == 1 and layer.dropped_tokens == 7 and layer.expert_load.tolist() == [1, 0, 0, 0]
    for g in grads:
        g = g.asnumpy()
        assert np.abs(g[0]).sum() > 0 and np.all(g[1:] == 0)


# ------------------------------------------------------------------------------------------------
# the LLaMA family
def moe_config(**kw):
    base = dict(vocab_size=30, dim=16, n_layers=2, n_heads=2, ffn_dim=24, max_seq_len=16, num_experts=4,
                moe_top_k=2, capacity_factor=1.0, aux_loss_coef=0.05, init_std=0.2)
    base.update(kw)
    return LlamaConfig(**base)


def llama64(cfg, seed=0):
    ms.set_seed(seed)
    m = Llama(cfg)
    for p in m.get_parameters():
        p.set_dtype(ms.float64)
    return m


def test_llama_moe_blocks_parameters_and_loss():
    cfg = moe_config()
    m = llama64(cfg)
    ffn = m.layers[0].feed_forward
    assert isinstance(ffn, nn.MoE) and (ffn.num_experts, ffn.top_k) == (4, 2)
    names = dict((n, tuple(p.shape)) for n, p in m.parameters_and_names())
    assert names["layers.0.feed_forward.router.weight"] == (4, 16)
    assert names["layers.1.feed_forward.experts.w1"] == (4, 16, 24)
    assert names["layers.1.feed_forward.experts.w2"] == (4, 24, 16)
    assert m.num_params() == cfg.num_params()
    dense = Llama(moe_config(num_experts=0))
    assert not nn.moe_statistics(dense)["layers"] and isinstance(dense.layers[0].feed_forward.w1, nn.Dense)
    assert cfg.num_params() - dense.config.num_params() == 2 * (3 * 16 * 24 * 3 + 16 * 4)
    g = np.random.default_rng(0)
    x = ms.Tensor(g.integers(0, 30, (2, 8)))
    y = ms.Tensor(g.integers(0, 30, (2, 8)))
    loss = float(m.loss(x, y).asnumpy())
    ce = float(F.cross_entropy(m.forward_2d(x), F.reshape(y, (-1,))).asnumpy())
    stats = nn.moe_statistics(m)
    assert len(stats["layers"]) == 2 and stats["aux_loss"] > 0
    assert loss == pytest.approx(ce + 0.05 * stats["aux_loss"], rel=1e-13)


def test_aux_loss_reaches_the_router_gradient():
    """The balancing loss adds to the routers' gradients (f_e are counts, P_e reads the router), and
    through P_e to what feeds the routers; nothing downstream of the last router changes."""
    x, y = (ms.Tensor(np.random.default_rng(s).integers(0, 30, (2, 8))) for s in (1, 2))
    grads = {}
    for coef in (0.0, 1.0):
        m = llama64(moe_config(aux_loss_coef=coef))
        params = m.trainable_params()
        _, gs = ms.value_and_grad(m.loss, None, params)(x, y)
        grads[coef] = {p.name: g.asnumpy() for p, g in zip(params, gs)}
    changed = {n for n in grads[0.0] if not np.allclose(grads[0.0][n], grads[1.0][n], rtol=1e-12, atol=1e-15)}
    assert {"layers.0.feed_forward.router.weight", "layers.1.feed_forward.router.weight"} <= changed
    # what comes after the last router cannot feel its balancing loss: the last experts, the head
    unchanged = {"output.weight", "norm.weight", "layers.1.feed_forward.experts.w1",
                 "layers.1.feed_forward.experts.w2", "layers.1.feed_forward.experts.w3"}
    assert not unchanged & changed


def test_preset_and_cli_train(tmp_path, capsys):
    from minispore.cli import main
    p = get_preset("llama-moe-tiny")
    assert "llama-moe-tiny" in PRESETS
    assert (p.model.num_experts, p.model.moe_top_k, p.model.n_kv_heads) == (4, 2, 2)
    out = tmp_path / "moe"
    assert main(["train", "--preset", "llama-moe-tiny", "--max-iters", "5", "--out", str(out), "--batch-size", "4",
                 "--block-size", "16", "--eval-interval", "5", "--eval-iters", "1", "--final-eval-iters", "1",
                 "--no-progress", "--no-plot"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["iters"] == 5 and metrics["config"]["num_experts"] == 4
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(out), "--prompt", "AB", "--max-new-tokens", "5", "--seed", "1"]) == 0
    assert capsys.readouterr().out.startswith("AB")


# ------------------------------------------------------------------------------------------------
# bad input
@pytest.mark.parametrize("kw, match", [(dict(top_k=5), "top_k"), (dict(capacity_factor=0.0), "capacity_factor"),
                                       (dict(capacity_factor=-1.0), "capacity_factor"),
                                       (dict(capacity_factor=float("nan")), "capacity_factor"),
                                       (dict(aux_loss_coef=-0.1), "aux_loss_coef"), (dict(top_k=0), "top_k"),
                                       (dict(token_groups=0), "token_groups")])
def test_bad_moe_arguments(kw, match):
    args = dict(top_k=2, capacity_factor=1.0)
    args.update(kw)
    with pytest.raises(OpValueError, match=match) as e:
        nn.MoE(8, 8, 4, **args)
    assert "MoE" in str(e.value)
    with pytest.raises(OpTypeError, match="top_k"):
        nn.MoE(8, 8, 4, top_k=2.0)


def test_bad_input_and_config():
    layer = make_moe()
    with pytest.raises(OpValueError, match="MoE"):
        layer(ms.Tensor(np.zeros((3, 5))))                      # wrong feature size
    with pytest.raises(OpValueError, match="LlamaConfig.*top_k"):
        moe_config(moe_top_k=5)
    with pytest.raises(OpValueError, match="LlamaConfig.*capacity_factor"):
        moe_config(capacity_factor=0)
    with pytest.raises(OpValueError, match="LlamaConfig.*num_experts"):
        moe_config(num_experts=-1)
    with pytest.raises(OpValueError, match="expert_parallel"):
        TransformerOpParallelConfig(data_parallel=2, expert_parallel=3)
    with pytest.raises(OpValueError, match="expert_parallel"):
        TransformerOpParallelConfig(expert_parallel=0)
    with pytest.raises(OpValueError, match="moe_auxiliary_loss"):
        nn.moe_auxiliary_loss(nn.Dense(2, 2))
    with pytest.raises(OpValueError, match="loss_term"):
        make_moe().loss_term()                                  # before any call


def test_tensor_parallel_llama_refuses_an_moe_config():
    """The Megatron-style model splits one SwiGLU's columns; an MoE config gets a clear error
    (its experts are split by minispore.parallel.expert_parallel) instead of an AttributeError."""
    from minispore.llm.config import LlamaConfig
    from minispore.llm.model import Llama
    from minispore.llm.tensor_parallel import TensorParallelLlama
    cfg = LlamaConfig(vocab_size=32, dim=16, n_layers=1, n_heads=2, max_seq_len=8, num_experts=2, moe_top_k=1)
    with pytest.raises(OpValueError, match="num_experts"):
        TensorParallelLlama(Llama(cfg))
