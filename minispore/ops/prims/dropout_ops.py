"""Dropout: zero each element with probability p, scale the survivors by 1 / (1 - p).

Design: the random mask is drawn *inside the kernel* and returned as a second output, as
MindSpore's `Dropout` primitive does (`(output, mask)`). Two reasons:

* the backward must replay exactly the forward's mask. As an output, the mask is simply there in
  the backward rule (`out[1]`): dx = dy * mask / (1 - p). Nothing is stashed on the side, and the
  rule is written in ops, so grad-of-grad works;
* randomness belongs to execution, not to tracing: a graph captured once and run every step draws
  a fresh mask each run. A mask drawn in Python during capture would be frozen into the graph.

The mask is Bool (1 byte per element); no gradient flows into it. Random bits come from
`minispore.common.context.rng()`, which `ms.set_seed` seeds; an op-level `seed` gives the call its
own stream, derived from (global seed, op seed) like MindSpore's two-level seeds.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common import context
from ...common import dtype as mstype
from .. import _check as C
from .. import costs
from ..primitive import AbstractTensor, defprim
from . import _nn_common as N

# op seed -> (the global generator it was started under, its own generator). Repeated calls with one
# op seed advance its stream; `ms.set_seed` installs a new global generator, which restarts them all.
_OP_STREAMS: dict = {}


def _generator(seed):
    global_rng = context.rng()
    if seed is None:
        return global_rng
    owner, gen = _OP_STREAMS.get(seed, (None, None))
    if owner is not global_rng:
        g = context.get_seed()
        gen = np.random.default_rng([seed] if g is None else [g, seed])
        _OP_STREAMS[seed] = (global_rng, gen)
    return gen


def _drop_rate(op, p, allow_one):
    """The drop probability as a float, refused unless finite and in range.

    A NaN compares False with every bound, so a plain `lo <= p <= hi` test lets it through and
    `random() >= nan` keeps nothing while 1 / (1 - nan) scales by NaN: all-NaN output, no error.
    `dropout` needs p < 1 (MindSpore: keep_prob = 1 - p must be in (0, 1]; p = 1 would zero
    everything and scale by 1 / 0); `dropout2d` accepts p = 1 (all planes zeroed), as MindSpore does.
    """
    p = C.float_attr(op, "p", p)
    if not (0.0 <= p < 1.0 or (allow_one and p == 1.0)):
        raise C.OpValueError(op, f"'p' as a finite float in [0, 1{']' if allow_one else ')'}", repr(p))
    return p


def _dropout_infer(x, p, seed):
    N.floating("dropout", "input", x)
    _drop_rate("dropout", p, allow_one=True)      # the primitive also serves dropout2d's p = 1
    return AbstractTensor(x.shape, x.dtype), AbstractTensor(x.shape, mstype.bool_)


def _scale(p):
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


def _dropout_kernel(x, p, seed):
    # float32 uniforms are plenty for a keep/drop decision and twice as fast to draw as float64
    keep = _generator(seed).random(x.shape, dtype=np.float32) >= p
    y = x * _scale(p)
    y *= keep
    return y, keep


def _dropout_bprop(inputs, out, dout, p, seed):
    from .elementwise import mul
    return (mul(mul(dout[0], out[1]), _scale(p)),)


_dropout = defprim("dropout", _dropout_infer, _dropout_kernel, _dropout_bprop,
                   doc="random zeroing with rescaling: (output, keep mask)", random=True,
                   cost=costs.per_output_element(2))


def dropout(input, p=0.5, training=True, seed=None):
    """`ops.dropout(input, p=0.5, training=True, seed=None)`.

    Each element is zeroed with probability `p` (a finite float in [0, 1)) and the rest scaled by
    1 / (1 - p). With `training=False` (or p=0) the input is returned unchanged.
    """
    N.floating("dropout", "input", input)
    p = _drop_rate("dropout", p, allow_one=False)
    if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
        raise C.OpValueError("dropout", "'seed' as None or a non-negative int", repr(seed))
    if not isinstance(training, bool):
        raise C.OpTypeError("dropout", "'training' to be a bool", repr(training))
    if not training or p == 0.0:
        return input
    return _dropout(input, p=p, seed=None if seed is None else int(seed))[0]


def dropout2d(input, p=0.5, training=True):
    """`ops.dropout2d(input, p=0.5, training=True)`: input (N, C, H, W); each whole channel plane is
    zeroed with probability p and the kept ones scaled by 1 / (1 - p).

    Composed, not a primitive of its own: the (N, C, 1, 1) channel mask is the dropout primitive
    applied to ones (so it comes from the same seeded random stream), broadcast over H and W. The
    gradient is dy times that mask.
    """
    from .creation import ones
    from .elementwise import mul
    op = "dropout2d"
    N.floating(op, "input", input)
    if len(input.shape) != 4:
        raise C.OpValueError(op, "'input' of rank 4 (N, C, H, W)", f"shape {tuple(input.shape)}")
    p = _drop_rate(op, p, allow_one=True)
    if not isinstance(training, bool):
        raise C.OpTypeError(op, "'training' to be a bool", repr(training))
    if not training or p == 0.0:
        return input
    n, c = input.shape[:2]
    mask = _dropout(ones((n, c, 1, 1), input.dtype), p=p, seed=None)[0]
    return mul(input, mask)


__all__ = ["dropout", "dropout2d"]
