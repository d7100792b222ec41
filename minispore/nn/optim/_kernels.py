"""The update rules of the fast optimizers as in-place kernels, each beside its plain form.

Why this module exists: written the obvious way, an Adam update (`m = b1*m + (1-b1)*g` ...)
allocates about six temporaries the size of the parameter and walks memory a dozen times. For a
1024x1024 weight every temporary is a fresh 4 MB allocation (page faults) and every pass misses
the cache. PyTorch's `foreach`/`fused` optimizers avoid both; so do MindSpore's fused Adam kernels.
Here every rule is written twice:

* `<rule>_reference(...)`: the plain formula, one NumPy expression per line, temporaries and all.
  This is the definition of the update; read it first.
* `<rule>(...)`: the *same* arithmetic, operation for operation in the same order and the same
  dtype (so the results are bit-identical: tests/nn/test_fast_optim.py checks it), done in place
  on flat arrays, block by block: each block of `BLOCK` elements of w, m, v and g is read once and
  every intermediate lives in a small scratch buffer that stays in the CPU cache. No allocation
  per step, and a parameter's arrays cross the memory bus about once.
  Where a C compiler exists, `<rule>` hands the whole array to a one-pass C loop instead
  (`_native.py`, the same arithmetic again, compiled without FMA contraction: same bits); the
  NumPy blocks are the portable path and what to read for the arithmetic.

Conventions shared by every kernel:
* w, state arrays: flat (1-D), C-contiguous, writable, all of one dtype (float32 or float64),
  updated in place. g: flat, the same dtype, only read.
* Hyper-parameters arrive as Python floats and are rounded once to the compute dtype
  (`dt(x)`), exactly what NumPy does with a Python scalar in `x * array` (NEP 50: a Python
  float takes the array's dtype). So float32 parameters are updated entirely in float32, as in
  MindSpore's and PyTorch's kernels, and float64 ones in float64.
* Scalars derived from several hyper-parameters (Adam's bias-corrected step size, `1 - lr*wd`)
  are computed in Python (double precision) and rounded once, in both forms.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from . import _native

# 32768 elements = 128 KB of float32 per block: the five to seven arrays a block touches (w, m, v,
# g, scratch) stay within a 1 MB L2 cache, and a block is large enough that the ~1 us of
# Python/ufunc dispatch per NumPy call is small beside its work. (Measured on the MLP's Adam
# step: 4096 is dispatch-bound, 8192-65536 are 1.6-2x faster than whole-array passes, which
# spill out of the cache and allocate a 4 MB temporary per operation.)
BLOCK = 32768

_local = threading.local()


def scratch(dtype, n=None):
    """Four scratch vectors of `n` (<= BLOCK, default BLOCK) elements of `dtype`, reused by every
    kernel on this thread (nothing is kept between calls: kernels overwrite them before reading)."""
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    key = np.dtype(dtype)
    s = bufs.get(key)
    if s is None:
        s = bufs[key] = tuple(np.empty(BLOCK, key) for _ in range(4))
    return s if n is None or n == BLOCK else tuple(b[:n] for b in s)


def _c_kernel(rule, *arrays):
    """The C loop of `rule` for these arrays (module `_native`: one pass per element, the same
    numbers), or None: no compiler, an unsupported dtype, or a non-contiguous array."""
    mod = _native.lib()
    if mod is None:
        return None, None
    sfx = _native.suffix(arrays[0].dtype)
    if sfx is None or not _native.usable(*arrays):
        return None, None
    return getattr(mod.lib, f"ms_{rule}_{sfx}"), mod


def _p(mod, a):
    return _native.ptr(mod, a)


def _moments(mb, vb, gb, b1_, c1, b2_, c2, s1, vmax_b):
    """Adam's moment updates of one block, in place: m = b1*m + c1*g, v = b2*v + c2*g*g (c1, c2 =
    1 - b1, 1 - b2), then the running maximum of v when amsgrad keeps one (`vmax_b`). Returns the
    block the denominator's square root is taken of. `s1` is scratch."""
    mb *= b1_
    np.multiply(gb, c1, out=s1)
    mb += s1
    vb *= b2_
    np.multiply(gb, gb, out=s1)
    s1 *= c2
    vb += s1
    if vmax_b is None:
        return vb
    np.maximum(vmax_b, vb, out=vmax_b)
    return vmax_b


def _blocks(n):
    """(start, stop) of each block of a flat array of n elements."""
    return [(i, min(i + BLOCK, n)) for i in range(0, n, BLOCK)]


# -- nn.Adam (MindSpore's Adam: eps on the uncorrected sqrt(v), bias correction in the step size) --

def adam_reference(w, m, v, g, *, b1, b2, eps, step_size, wd=0.0, nesterov=False, vhat=None):
    """nn.Adam, one update. step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t)."""
    if wd > 0:
        g = g + wd * w                              # L2 term
    m *= b1
    m += (1.0 - b1) * g
    v *= b2
    v += (1.0 - b2) * (g * g)
    if vhat is not None:                            # amsgrad
        np.maximum(vhat, v, out=vhat)
        v = vhat
    num = b1 * m + (1.0 - b1) * g if nesterov else m
    w -= w.dtype.type(step_size) * num / (np.sqrt(v) + eps)


def adam(w, m, v, g, *, b1, b2, eps, step_size, wd=0.0, nesterov=False, vhat=None):
    dt = w.dtype.type
    b1_, c1, b2_, c2 = dt(b1), dt(1.0 - b1), dt(b2), dt(1.0 - b2)
    eps, step, wd_ = dt(eps), dt(step_size), dt(wd)
    fn, mod = _c_kernel("adam", w, m, v, g, vhat)
    if fn is not None:
        fn(_p(mod, w), _p(mod, m), _p(mod, v), _p(mod, g), _p(mod, vhat), w.size, float(b1_), float(c1), float(b2_),
           float(c2), float(eps), float(step), float(wd_), int(wd > 0), int(bool(nesterov)))
        return
    s1, s2, s3, s4 = scratch(w.dtype)
    for i, j in _blocks(w.size):
        if j - i != BLOCK:
            s1, s2, s3, s4 = scratch(w.dtype, j - i)
        wb, mb, vb, gb = w[i:j], m[i:j], v[i:j], g[i:j]
        if wd > 0:
            np.multiply(wb, wd_, out=s3)
            np.add(gb, s3, out=s3)
            gb = s3
        den = _moments(mb, vb, gb, b1_, c1, b2_, c2, s1, None if vhat is None else vhat[i:j])
        if nesterov:
            np.multiply(mb, b1_, out=s2)
            np.multiply(gb, c1, out=s4)
            s2 += s4
            num = s2
        else:
            num = mb
        np.sqrt(den, out=s1)
        s1 += eps
        np.multiply(num, step, out=s2)
        s2 /= s1
        wb -= s2


# -- nn.AdamWeightDecay (MindSpore: no bias correction, decay inside the step) ------------------

def adam_weight_decay_reference(w, m, v, g, *, b1, b2, eps, lr, wd=0.0):
    m *= b1
    m += (1.0 - b1) * g
    v *= b2
    v += (1.0 - b2) * (g * g)
    update = m / (np.sqrt(v) + eps)
    if wd > 0:
        update += wd * w
    w -= lr * update


def adam_weight_decay(w, m, v, g, *, b1, b2, eps, lr, wd=0.0):
    dt = w.dtype.type
    b1_, c1, b2_, c2, eps, lr, wd_ = dt(b1), dt(1.0 - b1), dt(b2), dt(1.0 - b2), dt(eps), dt(lr), dt(wd)
    fn, mod = _c_kernel("adam_wd", w, m, v, g)
    if fn is not None:
        fn(_p(mod, w), _p(mod, m), _p(mod, v), _p(mod, g), w.size, float(b1_), float(c1), float(b2_), float(c2),
           float(eps), float(lr), float(wd_), int(wd > 0))
        return
    s1, s2, _, _ = scratch(w.dtype)
    for i, j in _blocks(w.size):
        if j - i != BLOCK:
            s1, s2, _, _ = scratch(w.dtype, j - i)
        wb, mb, vb, gb = w[i:j], m[i:j], v[i:j], g[i:j]
        vb = _moments(mb, vb, gb, b1_, c1, b2_, c2, s1, None)
        np.sqrt(vb, out=s1)
        s1 += eps
        np.divide(mb, s1, out=s1)
        if wd > 0:
            np.multiply(wb, wd_, out=s2)
            s1 += s2
        s1 *= lr
        wb -= s1


# -- PyTorch's Adam / AdamW (mint.optim): bias-corrected moments, eps outside the sqrt -----------

def torch_adam_reference(w, m, v, g, *, b1, b2, eps, lr, t, wd=0.0, decoupled=True, maximize=False,
                         vmax=None):
    """torch.optim.AdamW (decoupled=True) or Adam (False: wd is an L2 term), update number t."""
    if maximize:
        g = -g
    if wd != 0 and decoupled:
        w *= 1.0 - lr * wd
    elif wd != 0:
        g = g + wd * w
    m *= b1
    m += (1.0 - b1) * g
    v *= b2
    v += (1.0 - b2) * (g * g)
    if vmax is not None:                            # amsgrad
        np.maximum(vmax, v, out=vmax)
        v = vmax
    bc1 = 1.0 - b1 ** t
    bc2_sqrt = math.sqrt(1.0 - b2 ** t)
    w -= (lr / bc1) * m / (np.sqrt(v) / bc2_sqrt + eps)


def torch_adam(w, m, v, g, *, b1, b2, eps, lr, t, wd=0.0, decoupled=True, maximize=False, vmax=None):
    dt = w.dtype.type
    b1_, c1, b2_, c2, eps_ = dt(b1), dt(1.0 - b1), dt(b2), dt(1.0 - b2), dt(eps)
    shrink, wd_ = dt(1.0 - lr * wd), dt(wd)
    step, bc2_sqrt = dt(lr / (1.0 - b1 ** t)), dt(math.sqrt(1.0 - b2 ** t))
    fn, mod = _c_kernel("torch_adam", w, m, v, g, vmax)
    if fn is not None:
        mode = 0 if wd == 0 else 1 if decoupled else 2
        fn(_p(mod, w), _p(mod, m), _p(mod, v), _p(mod, g), _p(mod, vmax), w.size, float(b1_), float(c1), float(b2_),
           float(c2), float(eps_), float(step), float(bc2_sqrt), float(shrink), float(wd_), mode, int(bool(maximize)))
        return
    s1, s2, s3, _ = scratch(w.dtype)
    for i, j in _blocks(w.size):
        if j - i != BLOCK:
            s1, s2, s3, _ = scratch(w.dtype, j - i)
        wb, mb, vb, gb = w[i:j], m[i:j], v[i:j], g[i:j]
        if maximize:
            np.negative(gb, out=s3)
            gb = s3
        if wd != 0 and decoupled:
            wb *= shrink
        elif wd != 0:
            np.multiply(wb, wd_, out=s1)
            np.add(gb, s1, out=s3)
            gb = s3
        den = _moments(mb, vb, gb, b1_, c1, b2_, c2, s1, None if vmax is None else vmax[i:j])
        np.sqrt(den, out=s1)
        s1 /= bc2_sqrt
        s1 += eps_
        np.multiply(mb, step, out=s2)
        s2 /= s1
        wb -= s2


# -- nn.Momentum (MindSpore's ApplyMomentum) -----------------------------------------------------

def momentum_reference(w, v, g, *, lr, momentum, wd=0.0, nesterov=False):
    if wd > 0:
        g = g + wd * w
    v *= momentum
    v += g
    if nesterov:
        w -= lr * (g + momentum * v)
    else:
        w -= lr * v


def momentum(w, v, g, *, lr, momentum, wd=0.0, nesterov=False):
    dt = w.dtype.type
    lr, mom, wd_ = dt(lr), dt(momentum), dt(wd)
    fn, mod = _c_kernel("momentum", w, v, g)
    if fn is not None:
        fn(_p(mod, w), _p(mod, v), _p(mod, g), w.size, float(lr), float(mom), float(wd_), int(wd > 0),
           int(bool(nesterov)))
        return
    s1, _, s3, _ = scratch(w.dtype)
    for i, j in _blocks(w.size):
        if j - i != BLOCK:
            s1, _, s3, _ = scratch(w.dtype, j - i)
        wb, vb, gb = w[i:j], v[i:j], g[i:j]
        if wd > 0:
            np.multiply(wb, wd_, out=s3)
            np.add(gb, s3, out=s3)
            gb = s3
        vb *= mom
        vb += gb
        if nesterov:
            np.multiply(vb, mom, out=s1)
            np.add(gb, s1, out=s1)
            s1 *= lr
        else:
            np.multiply(vb, lr, out=s1)
        wb -= s1


# -- SGD with momentum, dampening, Nesterov (nn.SGD and mint.optim.SGD: PyTorch's rule) ----------

def sgd_reference(w, buf, g, *, lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, first=False,
                  maximize=False):
    """`buf` is the momentum buffer (unused when momentum == 0); `first`: the first update (buf = g)."""
    if maximize:
        g = -g
    if wd != 0:
        g = g + wd * w
    if momentum != 0:
        if first:
            buf[...] = g
        else:
            buf *= momentum
            buf += (1.0 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    w -= lr * g


def sgd(w, buf, g, *, lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, first=False, maximize=False):
    dt = w.dtype.type
    lr, mom, keep, wd_ = dt(lr), dt(momentum), dt(1.0 - dampening), dt(wd)
    fn, mod = _c_kernel("sgd", w, buf if momentum != 0 else None, g)
    if fn is not None:
        fn(_p(mod, w), _p(mod, buf if momentum != 0 else None), _p(mod, g), w.size, float(lr), float(mom),
           float(keep), float(wd_), int(wd != 0), int(momentum != 0), int(bool(first)), int(bool(nesterov)),
           int(bool(maximize)))
        return
    s1, s2, s3, _ = scratch(w.dtype)
    for i, j in _blocks(w.size):
        if j - i != BLOCK:
            s1, s2, s3, _ = scratch(w.dtype, j - i)
        wb, gb = w[i:j], g[i:j]
        if maximize:
            np.negative(gb, out=s3)
            gb = s3
        if wd != 0:
            np.multiply(wb, wd_, out=s1)
            np.add(gb, s1, out=s3)
            gb = s3
        if momentum != 0:
            bb = buf[i:j]
            if first:
                np.copyto(bb, gb)
            else:
                bb *= mom
                np.multiply(gb, keep, out=s1)
                bb += s1
            if nesterov:
                np.multiply(bb, mom, out=s1)
                np.add(gb, s1, out=s1)
                gb = s1
            else:
                gb = bb
        np.multiply(gb, lr, out=s2)
        wb -= s2
