"""Gradients of gradients through the shape_extra and indexing ops.

The backward rules use helper primitives (getitem_grad, gather_grad, pad_grad, ...) whose own
backward rules are only exercised by a second derivative. For each op, with
f(x) = sum(w * sin(op(x))) and h(x) = <grad f(x), u>, the autodiff gradient of h must match
float64 central finite differences of h."""
import numpy as np
import pytest

import minispore as ms
from minispore import Tensor, ops

I = lambda a: Tensor(np.array(a))      # noqa: E731  (integer index tensors)

OPS = {
    "getitem_advanced": ((3, 4), lambda x: x[[0, 2, 2], 1:]),
    "getitem_mask": ((3, 4), lambda x: x[Tensor(np.arange(12).reshape(3, 4) % 3 == 0)]),
    "gather": ((3, 4), lambda x: ops.gather(x, I([[0, 3], [3, 1]]), 1)),
    "gather_batch_dims": ((2, 3, 4), lambda x: ops.gather(x, I([[0, 0, 3], [1, 2, 2]]), 2, batch_dims=1)),
    "index_select": ((4, 3), lambda x: ops.index_select(x, 0, I([1, 1, 3]))),
    "gather_elements": ((3, 4), lambda x: ops.gather_elements(x, 1, I([[0, 0], [3, 1], [2, 2]]))),
    "scatter": ((3, 4), lambda x: ops.scatter(x, 0, I([[2, 0, 1, 2]]), x[:1] * 2)),
    "masked_fill": ((3, 4), lambda x: ops.masked_fill(x, Tensor(np.eye(3, 4, dtype=bool)), x[0, 0] * 3)),
    "embedding_padding": ((5, 3), lambda w: ops.embedding(I([[0, 1, 1], [4, 1, 3]]), w, padding_idx=1)),
    "setitem": ((3, 4), None),
    "squeeze": ((3, 1, 4), lambda x: ops.squeeze(x, 1)),
    "flatten": ((2, 3, 2), lambda x: ops.flatten(x, "F")),
    "concat": ((3, 4), lambda x: ops.concat([x, x[:, :2] * x[:, 2:]], 1)),
    "stack": ((3, 4), lambda x: ops.stack([x, x * x], -1)),
    "split": ((5, 4), lambda x: ops.split(x, (2, 3))[1] * 2),
    "chunk": ((5, 4), lambda x: ops.chunk(x, 3, 1)[0]),
    "tile": ((2, 3), lambda x: ops.tile(x, (2, 1, 2))),
    "repeat_interleave": ((3, 2), lambda x: ops.repeat_interleave(x, [2, 0, 3], 0)),
    "repeat_interleave_int": ((3, 2), lambda x: ops.repeat_interleave(x, 2, 1)),
    "flip": ((3, 4), lambda x: ops.flip(x, (0, 1))),
    "tril": ((4, 4), lambda x: ops.tril(x, -1)),
    "pad_constant": ((3, 4), lambda x: ops.pad(x, (1, -1, 2, 0), value=0.5)),
    "pad_reflect": ((3, 4), lambda x: ops.pad(x, (2, 3, 1, 1), "reflect")),
    "pad_replicate": ((3, 4), lambda x: ops.pad(x, (2, 1), "replicate")),
    "pad_circular": ((3, 4), lambda x: ops.pad(x, (3, 4), "circular")),
}


def _setitem_op(x):
    y = x * 1
    y[1:, [0, 2]] = ops.sin(x[0, :2])
    return y


@pytest.mark.parametrize("name", list(OPS))
def test_grad_of_grad_matches_finite_differences(name):
    shape, op = OPS[name]
    op = op or _setitem_op
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(shape)
    out_shape = op(Tensor(x0)).shape
    w = Tensor(rng.standard_normal(out_shape))
    u = Tensor(rng.standard_normal(shape))

    def f(x):
        return (w * ops.sin(op(x))).sum()

    def h(x):
        return (ms.grad(f)(x) * u).sum()

    g2 = ms.grad(h)(Tensor(x0)).asnumpy()
    eps = 1e-5
    num = np.zeros(shape)
    for pos in np.ndindex(*shape):
        p, m = x0.copy(), x0.copy()
        p[pos] += eps
        m[pos] -= eps
        num[pos] = (h(Tensor(p)).asnumpy() - h(Tensor(m)).asnumpy()) / (2 * eps)
    np.testing.assert_allclose(g2, num, rtol=1e-6, atol=1e-7)
