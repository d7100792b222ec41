"""Loss cells against NumPy float64 references (and PyTorch for cross-entropy)."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn
from minispore.common.errors import OpValueError

rng = np.random.default_rng(0)


def T(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def _log_softmax(z):
    z = z.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_mse_l1_reductions():
    a = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(4, 3)).astype(np.float32)
    d = a.astype(np.float64) - b
    assert nn.MSELoss()(T(a), T(b)).asnumpy() == pytest.approx((d ** 2).mean(), rel=1e-5)
    assert nn.MSELoss("sum")(T(a), T(b)).asnumpy() == pytest.approx((d ** 2).sum(), rel=1e-5)
    np.testing.assert_allclose(nn.L1Loss("none")(T(a), T(b)).asnumpy(), np.abs(d), rtol=1e-6)
    with pytest.raises(OpValueError, match="'MSELoss'.*reduction"):
        nn.MSELoss("average")
    with pytest.raises(OpValueError, match="'MSELoss'"):
        nn.MSELoss()(T(a), T(b[:2]))


def test_cross_entropy_and_nll_against_numpy():
    z = rng.normal(size=(6, 5)).astype(np.float32)
    t = np.array([0, 4, 2, 2, -100, 1])
    lp = _log_softmax(z)
    valid = t != -100
    picked = -lp[np.arange(6)[valid], t[valid]]
    loss = nn.CrossEntropyLoss()(T(z), ms.Tensor(t.astype(np.int32)))
    assert loss.asnumpy() == pytest.approx(picked.mean(), rel=1e-5)
    nll = nn.NLLLoss(reduction="sum")(T(lp), ms.Tensor(t.astype(np.int32)))
    assert nll.asnumpy() == pytest.approx(picked.sum(), rel=1e-5)


def test_cross_entropy_options_match_torch():
    torch = pytest.importorskip("torch")
    z = rng.normal(size=(5, 4)).astype(np.float32)
    t = np.array([1, 0, 3, 3, 2])
    w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
    got = nn.CrossEntropyLoss(weight=T(w), label_smoothing=0.1)(T(z), ms.Tensor(t.astype(np.int32)))
    ref = torch.nn.CrossEntropyLoss(weight=torch.tensor(w), label_smoothing=0.1)(torch.tensor(z), torch.tensor(t))
    assert got.asnumpy() == pytest.approx(ref.item(), rel=1e-5)


def test_softmax_cross_entropy_with_logits():
    z = rng.normal(size=(3, 4)).astype(np.float32)
    t = np.array([3, 0, 1])
    onehot = np.eye(4, dtype=np.float32)[t]
    ref = -_log_softmax(z)[np.arange(3), t]
    np.testing.assert_allclose(nn.SoftmaxCrossEntropyWithLogits()(T(z), T(onehot)).asnumpy(), ref, rtol=1e-5)
    sparse = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")(T(z), ms.Tensor(t.astype(np.int32)))
    assert sparse.asnumpy() == pytest.approx(ref.mean(), rel=1e-5)
