"""The checks every OpInfo entry is put through: forward vs the float64 reference, and float64
finite-difference gradients (central differences of a random projection of the output)."""
from __future__ import annotations

import numpy as np

from ..common import dtype as mstype
from ..common.tensor import Tensor
from .opinfo import OpInfo, SampleInput


def to_tensors(sample: SampleInput, np_dtype=None):
    return tuple(Tensor(a) if isinstance(a, np.ndarray) else a for a in sample.args)


def _as64(x):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" or (isinstance(x, np.ndarray) and x.dtype == mstype.bfloat16.np):
        return x.astype(np.float64)
    return x


def _flatten(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flatten(x)]
    return [out]


def run_op(info: OpInfo, sample: SampleInput):
    return info.op(*to_tensors(sample), **sample.kwargs)


def check_forward(info: OpInfo, sample: SampleInput, dtype):
    """Run the op at `dtype` and compare every output with the float64 reference."""
    out = _flatten(run_op(info, sample))
    ref_args = tuple(_as64(a) for a in sample.args)
    ref = _flatten(info.ref(*ref_args, **sample.kwargs))
    assert len(out) == len(ref), f"{info.name}: {len(out)} outputs, reference has {len(ref)}"
    rtol, atol = info.tol(dtype)
    for i, (o, r) in enumerate(zip(out, ref)):
        assert isinstance(o, Tensor), f"{info.name}: output {i} is {type(o).__name__}, not a Tensor"
        r = np.asarray(r)
        assert o.shape == r.shape, f"{info.name} {sample}: output {i} shape {o.shape}, reference {r.shape}"
        got = o.asnumpy()
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(got, r, err_msg=f"{info.name} {sample} output {i}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), r, rtol=rtol, atol=atol,
                                       err_msg=f"{info.name} {sample} output {i} ({dtype})")


def _grad_positions(info, sample):
    if sample.grad_args is not None:
        return tuple(sample.grad_args)
    return tuple(i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def check_grad(info: OpInfo, sample: SampleInput, seed=0):
    """Compare autodiff gradients with float64 central finite differences.

    The scalar checked is L = sum_i <w_i, out_i> over the differentiable outputs, with fixed random
    weights w_i, so every output element's gradient is exercised.
    """
    from ..autograd import grad
    positions = _grad_positions(info, sample)
    if not positions:
        return
    rng = np.random.default_rng(seed)
    args64 = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in sample.args]
    outs = _flatten(info.op(*[Tensor(a) if isinstance(a, np.ndarray) else a for a in args64], **sample.kwargs))
    if info.grad_output is not None:
        outs = [outs[info.grad_output]]
    weights = [rng.standard_normal(o.shape) for o in outs]

    def scalar_np(arrs):
        res = _flatten(info.op(*[Tensor(a) if isinstance(a, np.ndarray) else a for a in arrs], **sample.kwargs))
        if info.grad_output is not None:
            res = [res[info.grad_output]]
        return float(sum(np.sum(r.asnumpy().astype(np.float64) * w) for r, w in zip(res, weights)))

    def scalar_t(*tensors):
        res = _flatten(info.op(*tensors, **sample.kwargs))
        if info.grad_output is not None:
            res = [res[info.grad_output]]
        total = None
        for r, w in zip(res, weights):
            term = (r * Tensor(w)).sum()
            total = term if total is None else total + term
        return total

    g = grad(scalar_t, grad_position=positions)(*[Tensor(a) if isinstance(a, np.ndarray) else a for a in args64])
    g = g if isinstance(g, tuple) else (g,)          # (MindSpore returns one position's gradient bare)
    rtol, atol = info.grad_tol
    for gi, p in zip(g, positions):
        x = args64[p]
        num = np.zeros_like(x, dtype=np.float64)
        for idx in np.ndindex(*x.shape):
            plus = [a.copy() if isinstance(a, np.ndarray) else a for a in args64]
            minus = [a.copy() if isinstance(a, np.ndarray) else a for a in args64]
            plus[p][idx] += info.fd_eps
            minus[p][idx] -= info.fd_eps
            num[idx] = (scalar_np(plus) - scalar_np(minus)) / (2 * info.fd_eps)
        assert gi.shape == x.shape, f"{info.name}: grad of input {p} has shape {gi.shape}, input {x.shape}"
        np.testing.assert_allclose(gi.asnumpy().astype(np.float64), num, rtol=rtol, atol=atol,
                                   err_msg=f"{info.name} {sample}: gradient of input {p}")
