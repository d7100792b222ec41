"""clip_by_global_norm against NumPy and torch.nn.utils.clip_grad_norm_."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import OpTypeError, OpValueError

rng = np.random.default_rng(0)


def grads():
    return [rng.normal(size=s).astype(np.float32) for s in [(3, 4), (4,), (2, 2, 2)]]


def test_clip_scales_only_above_threshold():
    gs = grads()
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in gs))
    out = ops.clip_by_global_norm(tuple(ms.Tensor(g) for g in gs), clip_norm=1.0)
    assert isinstance(out, tuple) and len(out) == 3
    for o, g in zip(out, gs):
        np.testing.assert_allclose(o.asnumpy(), g / norm, rtol=1e-5)
    big = nn.clip_by_global_norm([ms.Tensor(g) for g in gs], clip_norm=norm * 2)
    for o, g in zip(big, gs):
        np.testing.assert_allclose(o.asnumpy(), g, rtol=1e-6)
    used = nn.clip_by_global_norm([ms.Tensor(g) for g in gs], 1.0, use_norm=ms.Tensor(4.0))
    np.testing.assert_allclose(used[0].asnumpy(), gs[0] / 4.0, rtol=1e-6)


def test_clip_matches_torch():
    torch = pytest.importorskip("torch")
    gs = [g * 3 for g in grads()]
    tp = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
    for p, g in zip(tp, gs):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_norm_(tp, max_norm=0.5)
    out = nn.clip_by_global_norm(tuple(ms.Tensor(g) for g in gs), clip_norm=ms.Tensor(0.5))
    for o, p in zip(out, tp):
        # torch divides by (norm + 1e-6); MindSpore by max(norm, clip): equal to ~1e-6 relative
        np.testing.assert_allclose(o.asnumpy(), p.grad.numpy(), rtol=1e-5)


def test_clip_is_differentiable_and_bad_input():
    x = ms.Tensor(np.array([3.0, 4.0], np.float32))
    g = ms.grad(lambda a: nn.clip_by_global_norm((a,), 1.0)[0].sum())(x)
    # d/dx sum(x/|x|) = 1/|x| - x * sum(x) / |x|^3
    xd = np.array([3.0, 4.0])
    np.testing.assert_allclose(g.asnumpy(), 1 / 5 - xd * 7 / 125, rtol=1e-5)
    with pytest.raises(OpTypeError, match="clip_by_global_norm"):
        nn.clip_by_global_norm(x)
    with pytest.raises(OpValueError, match="clip_by_global_norm"):
        nn.clip_by_global_norm((x,), clip_norm=0.0)
    with pytest.raises(OpTypeError, match="clip_by_global_norm"):
        nn.clip_by_global_norm((x, 3.0))
