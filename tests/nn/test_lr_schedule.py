"""Learning-rate schedules (cells) and per-step lists, against MindSpore's documented values and
independent re-implementations."""
import math

import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpValueError


def at(cell, step):
    return float(cell(ms.Tensor(np.array([step], np.int32))).asnumpy()[0])


def test_warmup_cosine_polynomial_exponential_cells():
    w = nn.WarmUpLR(0.1, 4)
    assert [at(w, s) for s in (0, 2, 4, 9)] == pytest.approx([0.0, 0.05, 0.1, 0.1])
    c = nn.CosineDecayLR(min_lr=0.01, max_lr=0.1, decay_steps=4)
    assert at(c, 2) == pytest.approx(0.055)                  # MindSpore docs example
    assert [at(c, s) for s in (0, 4, 7)] == pytest.approx([0.1, 0.01, 0.01])
    p = nn.PolynomialDecayLR(0.1, 0.01, decay_steps=4, power=0.5)
    assert at(p, 2) == pytest.approx(0.09 * math.sqrt(0.5) + 0.01)
    assert at(p, 9) == pytest.approx(0.01)
    pu = nn.PolynomialDecayLR(0.1, 0.01, decay_steps=4, power=1.0, update_decay_steps=True)
    assert at(pu, 6) == pytest.approx(0.09 * (1 - 6 / 8) + 0.01)     # period stretched to 8
    e = nn.ExponentialDecayLR(0.1, 0.9, decay_steps=4)
    assert at(e, 2) == pytest.approx(0.1 * 0.9 ** 0.5)
    assert at(nn.ExponentialDecayLR(0.1, 0.9, 4, is_stair=True), 7) == pytest.approx(0.09)
    out = c(ms.Tensor(np.array([0, 4], np.int32)))
    assert out.dtype == ms.float32 and out.shape == (2,)


def nanogpt_get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT train.py's schedule, verbatim in structure."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def test_warmup_cosine_matches_nanogpt():
    s = nn.WarmupCosineDecayLR(max_lr=6e-4, min_lr=6e-5, warmup_steps=20, decay_steps=200)
    steps = list(range(0, 230, 3))
    got = s(ms.Tensor(np.array(steps, np.int32))).asnumpy()
    want = [nanogpt_get_lr(i, 6e-4, 6e-5, 20, 200) for i in steps]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert s.value_at(20) == pytest.approx(6e-4)
    with pytest.raises(OpValueError, match="WarmupCosineDecayLR"):
        nn.WarmupCosineDecayLR(1e-3, 1e-4, warmup_steps=10, decay_steps=10)


def test_dynamic_lr_lists_match_mindspore_docs():
    assert nn.piecewise_constant_lr([2, 5, 10], [0.1, 0.05, 0.01]) == pytest.approx(
        [0.1, 0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01])
    assert nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1) == pytest.approx([0.1, 0.1, 0.09, 0.09, 0.081, 0.081])
    assert nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2) == pytest.approx([0.1, 0.1, 0.055, 0.055, 0.01, 0.01])
    assert nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5) == pytest.approx(
        [0.1, 0.1, 0.07363961030678928, 0.07363961030678928, 0.01, 0.01])
    assert nn.warmup_lr(0.1, 6, 2, 2) == pytest.approx([0.0, 0.0, 0.05, 0.05, 0.1, 0.1])
    # update_decay_epoch: the period carries forward (2 -> 4 -> 8 ...)
    got = nn.polynomial_decay_lr(0.1, 0.0, 6, 1, 2, 1.0, update_decay_epoch=True)
    assert got == pytest.approx([0.1, 0.05, 0.0, 0.025, 0.0, 0.1 * (1 - 5 / 8)])
    with pytest.raises(OpValueError, match="piecewise_constant_lr"):
        nn.piecewise_constant_lr([5, 2], [0.1, 0.2])
    with pytest.raises(OpValueError, match="cosine_decay_lr"):
        nn.cosine_decay_lr(0.1, 0.01, 6, 2, 2)
