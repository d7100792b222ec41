"""More matrix products, in MindSpore 2.x's names: mm, outer (ger), addmm, dense, mv, addmv, addr,
baddbmm, kron, cross, trace, diag.

Their input rules are MindSpore's (checked on the 2.10 CPU wheel): `mm` multiplies exactly two
2-D tensors of one dtype; `dense(input, weight, bias=None)` is input @ weight.T + bias with a
(out, in) or (in,) weight of input's dtype; `outer` flattens both inputs and promotes their dtypes;
`diag` builds the rank-2k "diagonal tensor" of a rank-k input (out[i, j, i, j] = x[i, j]), which is
the familiar diagonal matrix for a vector; `trace` takes a 2-D input.

Backward rules are the products' transposes written with minispore ops (matmul, transpose,
reduce_sum), so they are differentiable again.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.grad_state import wants_grad
from ...common.tensor import Parameter, Tensor
from .. import _check as C
from .. import costs
from .. import sharding_rules as SR
from ..primitive import AbstractTensor, defprim
from .elementwise import add, mul, sum_to
from .linalg import _matmul, _matmul_into, _matmul_kernel, bmm, matmul, swap_last
from .reduction import reduce_sum
from .shape import reshape


_CONCRETE = frozenset((Tensor, Parameter))      # exact types whose `_data` is a real ndarray
_BY_NP = mstype._BY_NP


def _numeric(op, arg, x):
    C.tensor(op, arg, x)
    if x.dtype is mstype.bool_:
        raise C.OpTypeError(op, f"'{arg}' with a numeric dtype", str(x.dtype))
    return x


def _same_dtype(op, x, y, names=("input", "mat2")):
    if x.dtype is not y.dtype:
        raise C.OpTypeError(op, f"'{names[0]}' and '{names[1]}' of the same dtype", f"{x.dtype} and {y.dtype}")


def _matrices(op, x, y, names=("input", "mat2")):
    """Two numeric 2-D tensors of one dtype whose inner dimensions agree."""
    _numeric(op, names[0], x)
    _numeric(op, names[1], y)
    if len(x.shape) != 2 or len(y.shape) != 2:
        raise C.OpValueError(op, "two 2-D tensors", f"shapes {tuple(x.shape)} and {tuple(y.shape)}")
    _same_dtype(op, x, y, names)
    if x.shape[1] != y.shape[0]:
        raise C.OpValueError(op, f"{names[0]}'s columns ({x.shape[1]}) to equal {names[1]}'s rows ({y.shape[0]})",
                             f"shapes {tuple(x.shape)} and {tuple(y.shape)}")
    return (x.shape[0], y.shape[1])


# ------------------------------------------------------------------------------------------------
# mm
def _mm_infer(x, y):
    return AbstractTensor(_matrices("mm", x, y), x.dtype)


def _mm_bprop(inputs, out, dout):
    x, y = inputs
    return mm(dout, swap_last(y)), mm(swap_last(x), dout)


_mm = defprim("mm", _mm_infer, _matmul_kernel, _mm_bprop, doc="product of two matrices", sharding=SR.matmul)


def mm(input, mat2):
    """`ops.mm(input, mat2)`: the product of two 2-D tensors of the same dtype (no broadcasting,
    no vectors: use `ops.matmul` for those)."""
    return _mm(input, mat2)


# ------------------------------------------------------------------------------------------------
# outer
def _outer_infer(x, y):
    _numeric("outer", "input", x)
    _numeric("outer", "vec2", y)
    n, m = int(np.prod(x.shape, dtype=np.int64)), int(np.prod(y.shape, dtype=np.int64))
    return AbstractTensor((n, m), mstype.promote(x.dtype, y.dtype))


def _outer_kernel(a, b):
    return np.multiply.outer(a.reshape(-1), b.reshape(-1))


def _outer_bprop(inputs, out, dout):
    x, y = inputs
    xf, yf = reshape(x, (-1, 1)), reshape(y, (-1, 1))
    gx = reshape(matmul(dout, yf), x.shape)
    gy = reshape(matmul(swap_last(dout), xf), y.shape)
    return gx, gy


_outer = defprim("outer", _outer_infer, _outer_kernel, _outer_bprop, doc="outer product of two flattened tensors")


def outer(input, vec2):
    """`ops.outer(input, vec2)`: out[i, j] = input[i] * vec2[j] (both inputs are flattened; dtypes
    promote)."""
    return _outer(input, vec2)


ger = outer


# ------------------------------------------------------------------------------------------------
# addmm: beta * input + alpha * (mat1 @ mat2)
def _scalar_attr(op, arg, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise C.OpTypeError(op, f"'{arg}' to be a real number", f"{type(v).__name__} {v!r}")
    return v


def _check_broadcasts_to(op, arg, t, shape, what):
    """`t` (an added term) must broadcast to `shape` without enlarging it: the sum keeps the shape
    of the product it is added to, as MindSpore requires."""
    if C.broadcast(op, tuple(t.shape), shape) != shape:
        raise C.OpValueError(op, f"'{arg}' that broadcasts to {what} {shape}", f"shape {tuple(t.shape)}")


def _addmm_infer(x, a, b, beta=1, alpha=1):
    shape = _matrices("addmm", a, b, ("mat1", "mat2"))
    _numeric("addmm", "input", x)
    _same_dtype("addmm", x, a, ("input", "mat1"))
    _check_broadcasts_to("addmm", "input", x, shape, "the product's shape")
    C.int_scalar_fits("addmm", x.dtype, beta)          # (an int scale keeps an integer dtype)
    C.int_scalar_fits("addmm", a.dtype, alpha)
    return AbstractTensor(shape, a.dtype)


def _addmm_kernel(x, a, b, beta=1, alpha=1):
    # beta * x even when beta == 0 (a NaN in x stays NaN), as MindSpore computes it
    return beta * x + alpha * _matmul_kernel(a, b)


def _addmm_bprop(inputs, out, dout, beta=1, alpha=1):
    x, a, b = inputs
    gp = mul(dout, alpha)
    return (sum_to(mul(dout, beta), x.shape), mm(gp, swap_last(b)), mm(swap_last(a), gp))


_addmm = defprim("addmm", _addmm_infer, _addmm_kernel, _addmm_bprop, doc="beta * input + alpha * mat1 @ mat2", sharding=SR.addmm)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """`ops.addmm(input, mat1, mat2, *, beta=1, alpha=1)`: beta * input + alpha * (mat1 @ mat2), with
    2-D mat1/mat2 and `input` broadcasting to the product's shape."""
    return _addmm(input, mat1, mat2, beta=_scalar_attr("addmm", "beta", beta),
                  alpha=_scalar_attr("addmm", "alpha", alpha))


# ------------------------------------------------------------------------------------------------
# dense: input @ weight.T + bias
def _dense_infer(x, w, b=None):
    if type(x) in _CONCRETE and type(w) in _CONCRETE and (b is None or type(b) in _CONCRETE):
        # PyNative fast path (nn.Dense's case): a floating input, a 2-D weight and a 1-D bias of one dtype
        xs, ws, dt = x._data.shape, w._data.shape, x._data.dtype
        if (len(xs) >= 1 and len(ws) == 2 and xs[-1] == ws[1] and w._data.dtype is dt and dt.kind == "f"
                and (b is None or (b._data.shape == ws[:1] and b._data.dtype is dt))):
            return AbstractTensor(xs[:-1] + ws[:1], _BY_NP[dt])
    _numeric("dense", "input", x)
    _numeric("dense", "weight", w)
    _same_dtype("dense", x, w, ("input", "weight"))
    if len(x.shape) == 0 or len(w.shape) not in (1, 2):
        raise C.OpValueError("dense", "an input of rank >= 1 and a 1-D or 2-D weight",
                             f"shapes {tuple(x.shape)} and {tuple(w.shape)}")
    if x.shape[-1] != w.shape[-1]:
        raise C.OpValueError("dense", f"input's last dim ({x.shape[-1]}) to equal weight's last dim ({w.shape[-1]})",
                             f"shapes {tuple(x.shape)} and {tuple(w.shape)}")
    shape = tuple(x.shape[:-1]) + tuple(w.shape[:-1])
    if b is not None:
        _numeric("dense", "bias", b)
        _same_dtype("dense", x, b, ("input", "bias"))
        _check_broadcasts_to("dense", "bias", b, shape, "the output shape")
    return AbstractTensor(shape, x.dtype)


def _dense_kernel(a, w, b=None):
    """input @ weight.T + bias. The plain version is `a @ w.T + b`; this one differs in two ways:

    * `w.T` is a view, and BLAS reads a transposed operand in place (a GEMM's trans_b): no copy;
    * the bias is added into the product's own fresh memory: one pass, and no second
      (rows, out_features) array (a fresh array costs page faults, which on a small machine take
      longer than the add).

    The product runs through matmul's registered kernel (`_matmul.kernel`, looked up per call), so
    whatever replaces matmul's kernel - a backend, a profiler counting FLOPs - applies here too."""
    y = _matmul.kernel(a, w.T if w.ndim == 2 else w)
    if b is None:
        return y
    if type(y) is np.ndarray and y.dtype == b.dtype:
        y += b                                  # infer checked that b broadcasts to y's shape
        return y
    return y + b


def _dense_into(out, a, w, b=None):
    """The kernel writing into `out` (O2's planned buffer): the GEMM into it, then the bias in place."""
    _matmul_into(out, a, w.T if w.ndim == 2 else w)
    if b is not None:
        np.add(out, b, out=out, casting="unsafe")


def _dense_bprop(inputs, out, dout):
    """dx = dout @ W, dW = dout^T @ x, db = dout summed over the rows.

    Both products come out in their operand's own layout: dx as (..., in), dW as (out, in) like the
    weight (so the optimizer reads a contiguous gradient), each one GEMM whose transposed operand
    BLAS reads in place. A gradient the tape will not use (the data batch feeding the first layer)
    is not computed (grad_state.wants_grad)."""
    x, w, b = inputs
    if len(w.shape) == 1:                        # y[...] = sum_k x[..., k] w[k]
        d = reshape(dout, tuple(dout.shape) + (1,))
        gx = mul(d, w)
        gw = reduce_sum(mul(d, x), tuple(range(len(x.shape) - 1)), keep_dims=False)
    else:
        gx = matmul(dout, w) if wants_grad(inputs, 0) else None
        gw = None
        if wants_grad(inputs, 1):
            d2 = dout if len(dout.shape) == 2 else reshape(dout, (-1, w.shape[0]))
            x2 = x if len(x.shape) == 2 else reshape(x, (-1, w.shape[1]))
            gw = matmul(swap_last(d2), x2)
    gb = sum_to(dout, b.shape) if isinstance(b, Tensor) and wants_grad(inputs, 2) else None
    return gx, gw, gb


def _dense_flops(ins, outs, attrs):
    """2 * M * N * K for the product, plus one add per output element for the bias."""
    k = ins[0].shape[-1] if len(ins[0].shape) else 1
    return {"flops": outs[0].size * (2 * k + (1 if len(ins) > 2 and ins[2] is not None else 0)),
            "matmul_flops": 2 * outs[0].size * k}


_dense = defprim("dense", _dense_infer, _dense_kernel, _dense_bprop, doc="input @ weight.T + bias",
                 cost=costs.matrix_unit(_dense_flops, takes_transposed=True), into=_dense_into, sharding=SR.dense)


def dense(input, weight, bias=None):
    """`ops.dense(input, weight, bias=None)`: input @ weight.T + bias (nn.Dense's computation).

    `weight` is (out_features, in_features), or (in_features,) for one output per row (that dim is
    then dropped); input, weight and bias share one dtype."""
    return _dense(input, weight, bias)


# ------------------------------------------------------------------------------------------------
# compositions: mv, addmv, addr, baddbmm, kron
def mv(mat, vec):
    """`ops.mv(mat, vec)`: matrix (n, m) times vector (m,)."""
    C.tensor("mv", "mat", mat)
    C.tensor("mv", "vec", vec)
    if len(mat.shape) != 2 or len(vec.shape) != 1:
        raise C.OpValueError("mv", "a 2-D 'mat' and a 1-D 'vec'", f"shapes {tuple(mat.shape)} and {tuple(vec.shape)}")
    return matmul(mat, vec)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """`ops.addmv(input, mat, vec, *, beta=1, alpha=1)`: beta * input + alpha * (mat @ vec)."""
    C.tensor("addmv", "input", input)
    beta, alpha = _scalar_attr("addmv", "beta", beta), _scalar_attr("addmv", "alpha", alpha)
    return add(mul(input, beta), mul(mv(mat, vec), alpha))


def addr(x, vec1, vec2, *, beta=1, alpha=1):
    """`ops.addr(x, vec1, vec2, *, beta=1, alpha=1)`: beta * x + alpha * outer(vec1, vec2)."""
    C.tensor("addr", "x", x)
    for arg, v in (("vec1", vec1), ("vec2", vec2)):
        C.tensor("addr", arg, v)
        if len(v.shape) != 1:
            raise C.OpValueError("addr", f"a 1-D '{arg}'", f"shape {tuple(v.shape)}")
    return add(mul(x, _scalar_attr("addr", "beta", beta)), mul(outer(vec1, vec2), _scalar_attr("addr", "alpha", alpha)))


def baddbmm(input, batch1, batch2, beta=1, alpha=1):
    """`ops.baddbmm(input, batch1, batch2, beta=1, alpha=1)`: beta * input + alpha * (batch1 @ batch2)
    for 3-D batches."""
    C.tensor("baddbmm", "input", input)
    for arg, b in (("batch1", batch1), ("batch2", batch2)):
        C.tensor("baddbmm", arg, b)
        if len(b.shape) != 3:
            raise C.OpValueError("baddbmm", f"a 3-D '{arg}'", f"shape {tuple(b.shape)}")
    prod = bmm(batch1, batch2)
    return add(mul(input, _scalar_attr("baddbmm", "beta", beta)), mul(prod, _scalar_attr("baddbmm", "alpha", alpha)))


def kron(input, other):
    """`ops.kron(input, other)`: the Kronecker product (ranks are padded to match with leading 1s)."""
    C.tensor("kron", "input", input)
    C.tensor("kron", "other", other)
    n = max(len(input.shape), len(other.shape))
    a = reshape(input, (1,) * (n - len(input.shape)) + tuple(input.shape))
    b = reshape(other, (1,) * (n - len(other.shape)) + tuple(other.shape))
    # interleave: a[i0, 1, i1, 1, ...] * b[1, j0, 1, j1, ...] -> (i0*B0 + j0, i1*B1 + j1, ...)
    a_shape, b_shape = [], []
    for sa, sb in zip(a.shape, b.shape):
        a_shape += [sa, 1]
        b_shape += [1, sb]
    prod = mul(reshape(a, tuple(a_shape)), reshape(b, tuple(b_shape)))
    return reshape(prod, tuple(sa * sb for sa, sb in zip(a.shape, b.shape)))


# ------------------------------------------------------------------------------------------------
# cross
def _cross_infer(x, y, dim=-1):
    _numeric("cross", "input", x)
    _numeric("cross", "other", y)
    _same_dtype("cross", x, y, ("input", "other"))
    if tuple(x.shape) != tuple(y.shape):
        raise C.OpValueError("cross", "'input' and 'other' of the same shape", f"{tuple(x.shape)} and {tuple(y.shape)}")
    ax = C.axis("cross", dim, len(x.shape))
    if len(x.shape) == 0 or x.shape[ax] != 3:
        raise C.OpValueError("cross", "size 3 along 'dim'", f"shape {tuple(x.shape)}, dim {dim}")
    return AbstractTensor(x.shape, x.dtype)


def _cross_kernel(a, b, dim=-1):
    return np.cross(a, b, axisa=dim, axisb=dim, axisc=dim)


def _cross_bprop(inputs, out, dout, dim=-1):
    # d(a x b) = da x b + a x db, and <g, da x b> = <b x g, da>
    x, y = inputs
    return _cross(y, dout, dim=dim), _cross(dout, x, dim=dim)


_cross = defprim("cross", _cross_infer, _cross_kernel, _cross_bprop, doc="3-vector cross product along a dim")


def cross(input, other, dim=None):
    """`ops.cross(input, other, dim=None)`: cross product of 3-vectors along `dim` (None: the first
    dim of size 3, as MindSpore/PyTorch's legacy default)."""
    C.tensor("cross", "input", input)
    if dim is None:
        dim = next((i for i, s in enumerate(input.shape) if s == 3), -1)
    return _cross(input, other, dim=dim)


# ------------------------------------------------------------------------------------------------
# trace / diag
def _trace_infer(x):
    _numeric("trace", "input", x)
    if len(x.shape) != 2:
        raise C.OpValueError("trace", "a 2-D input", f"shape {tuple(x.shape)}")
    return AbstractTensor((), x.dtype)


def _trace_bprop(inputs, out, dout):
    x = inputs[0]
    n, m = x.shape
    eye = Tensor(np.eye(n, m, dtype=x.dtype.np))
    return (mul(eye, dout),)


_trace = defprim("trace", _trace_infer, lambda a: np.asarray(np.trace(a), dtype=a.dtype), _trace_bprop,
                 doc="sum of the main diagonal of a matrix")


def trace(input):
    """`ops.trace(input)`: the sum of the main diagonal of a 2-D tensor (0-d result, input's dtype)."""
    return _trace(input)


def _diag_infer(x):
    C.tensor("diag", "input", x)
    if len(x.shape) == 0:
        raise C.OpValueError("diag", "an input of rank >= 1", "a 0-d tensor")
    return AbstractTensor(tuple(x.shape) * 2, x.dtype)


def _diag_kernel(a):
    out = np.zeros(a.shape + a.shape, dtype=a.dtype)
    flat = out.reshape(a.size, a.size)
    flat[np.arange(a.size), np.arange(a.size)] = a.reshape(-1)
    return out


def _diag_bprop(inputs, out, dout):
    x = inputs[0]
    n = int(np.prod(x.shape, dtype=np.int64))
    return (reshape(_diag_part(reshape(dout, (n, n))), x.shape),)


def _diag_part(m):
    """The main diagonal of a square matrix, as a differentiable op (a masked row sum)."""
    n = m.shape[0]
    return reduce_sum(mul(m, Tensor(np.eye(n, dtype=m.dtype.np))), 1, keep_dims=False)


_diag = defprim("diag", _diag_infer, _diag_kernel, _diag_bprop, doc="diagonal tensor out[i.., i..] = x[i..]")


def diag(input):
    """`ops.diag(input)`: a tensor of shape input.shape * 2 that is zero except out[i, .., i, ..] =
    input[i, ..]: for a vector, the diagonal matrix (MindSpore's semantics, not NumPy's np.diag,
    which extracts a diagonal from a matrix — use `ops.diagonal` for that)."""
    return _diag(input)


__all__ = ["addmm", "addmv", "addr", "baddbmm", "cross", "dense", "diag", "ger", "kron", "mm", "mv", "outer",
           "trace"]
