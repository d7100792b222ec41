"""Matrix products: matmul (NumPy semantics, batch dims broadcast) and bmm."""
from __future__ import annotations

import numpy as np

from ...common import dtype as mstype
from ...common.grad_state import wants_grad
from ...common.tensor import Parameter, Tensor
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim

_CONCRETE = frozenset((Tensor, Parameter))      # exact types whose `_data` is a real ndarray
_BY_NP = mstype._BY_NP


def _matmul_infer(x, y):
    if type(x) in _CONCRETE and type(y) in _CONCRETE:
        # PyNative fast path: two same-dtype matrices (or stacks with equal batch dims) that fit
        a, b = x._data, y._data
        xs, ys = a.shape, b.shape
        if (len(xs) >= 2 and len(xs) == len(ys) and xs[-1] == ys[-2] and xs[:-2] == ys[:-2]
                and a.dtype is b.dtype and a.dtype.kind in "fiu"):
            return AbstractTensor(xs[:-1] + ys[-1:], _BY_NP[a.dtype])
    C.tensor("matmul", "input", x)
    C.tensor("matmul", "other", y)
    if len(x.shape) == 0 or len(y.shape) == 0:
        raise C.OpValueError("matmul", "inputs with at least 1 dimension", f"shapes {x.shape} and {y.shape}")
    if x.dtype is mstype.bool_ or y.dtype is mstype.bool_:
        raise C.OpTypeError("matmul", "numeric inputs", f"{x.dtype} and {y.dtype}")
    xs = (1,) + tuple(x.shape) if len(x.shape) == 1 else tuple(x.shape)
    ys = tuple(y.shape) + (1,) if len(y.shape) == 1 else tuple(y.shape)
    if xs[-1] != ys[-2]:
        raise C.OpValueError("matmul", f"input's last dim ({xs[-1]}) to equal other's "
                             f"second-to-last dim ({ys[-2]})", f"shapes {tuple(x.shape)} and {tuple(y.shape)}")
    batch = C.broadcast("matmul", xs[:-2], ys[:-2])
    shape = batch + (xs[-2], ys[-1])
    if len(x.shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(y.shape) == 1:
        shape = shape[:-1]
    return AbstractTensor(shape, mstype.promote(x.dtype, y.dtype))


def _matmul_kernel(a, b):
    if a.dtype != b.dtype:
        t = np.promote_types(a.dtype, b.dtype)
        a, b = a.astype(t), b.astype(t)
    if a.dtype == mstype.bfloat16.np:      # no bfloat16 BLAS: compute in float32, round once
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


def _matmul_into(out, a, b):
    """The kernel writing into `out`: NumPy's own `out=` when both operands already have out's
    float32/float64 dtype (the same BLAS call as `_matmul_kernel`), else the kernel's result copied in."""
    if a.dtype == out.dtype and b.dtype == out.dtype and out.dtype.kind == "f" and out.dtype.itemsize >= 4:
        np.matmul(a, b, out=out)
    else:
        np.copyto(out, _matmul_kernel(a, b), casting="unsafe")


def _matmul_bprop(inputs, out, dout):
    """dx = dout @ y^T, dy = x^T @ dout (each summed over broadcast batch dims). A gradient the
    tape will not use (an untracked input: a data batch, a constant table) is not computed: that
    is a whole matrix product saved (grad_state.wants_grad)."""
    from .elementwise import sum_to
    from .shape import reshape
    x, y = inputs
    want_x, want_y = wants_grad(inputs, 0), wants_grad(inputs, 1)
    xs, ys = x.shape, y.shape
    if len(xs) >= 2 and len(ys) >= 2:          # the common case: no vector promotion
        gx = sum_to(matmul(dout, swap_last(y)), xs) if want_x else None
        gy = sum_to(matmul(swap_last(x), dout), ys) if want_y else None
        return gx, gy
    # promote vectors to matrices so one formula covers every case
    x2 = reshape(x, (1, xs[0])) if len(xs) == 1 else x
    y2 = reshape(y, (ys[0], 1)) if len(ys) == 1 else y
    d = dout
    if len(xs) == 1:
        d = reshape(d, d.shape[:-1] + (1, d.shape[-1])) if len(ys) > 1 else reshape(d, (1,) + d.shape)
    if len(ys) == 1:
        d = reshape(d, d.shape + (1,))
    gx = gy = None
    if want_x:
        gx = sum_to(matmul(d, swap_last(y2)), x2.shape)
        if len(xs) == 1:
            gx = reshape(gx, xs)
    if want_y:
        gy = sum_to(matmul(swap_last(x2), d), y2.shape)
        if len(ys) == 1:
            gy = reshape(gy, ys)
    return gx, gy


def swap_last(t):
    from .shape import transpose
    n = len(t.shape)
    perm = tuple(range(n - 2)) + (n - 1, n - 2)
    return transpose(t, perm)


def _matmul_flops(ins, outs, attrs):
    """2 * M * N * K: a multiply and an add for each of the K terms of every output element."""
    return {"flops": 2 * outs[0].size * ins[0].shape[-1]}


# a GEMM: on the matrix unit, and it reads a (last-two-axes) transposed operand in place
_matmul_cost = costs.matrix_unit(_matmul_flops, takes_transposed=True)


_matmul = defprim("matmul", _matmul_infer, _matmul_kernel, _matmul_bprop, cost=_matmul_cost, into=_matmul_into,
                  doc="matrix product with broadcast batch dims", sharding=SR.matmul)


def matmul(input, other):
    """`ops.matmul(input, other)`: NumPy matmul semantics (1-d promotion, broadcast batch dims)."""
    return _matmul(input, other)


def _bmm_infer(x, y):
    C.tensor("bmm", "input", x)
    C.tensor("bmm", "mat2", y)
    if len(x.shape) < 3 or len(y.shape) < 3:
        raise C.OpValueError("bmm", "inputs with at least 3 dims (batch, n, m)", f"shapes {x.shape} and {y.shape}")
    return _matmul_infer(x, y)


_bmm = defprim("bmm", _bmm_infer, _matmul_kernel, _matmul_bprop, cost=_matmul_cost,
               doc="batched matrix product (inputs of rank >= 3)", sharding=SR.matmul)


def bmm(input_x, mat2):
    return _bmm(input_x, mat2)


__all__ = ['bmm', 'matmul']
