"""The per-primitive sharding rules (ops/sharding_rules.py), checked by simulating every device in NumPy.

For EVERY primitive of the registry that has a `sharding` fact (a new rule is picked up on its
own; a primitive without sample inputs below fails `test_every_rule_has_samples`), and for many
input layouts over the device matrices (2,), (4,) and (2, 2) - split batch dims, split contracted
and reduced dims, partial (pending-sum) inputs - the simulation

1. gives each device its block of each input (`local_block`); a partial input is cut into random
   summands over its partial axes (they sum to the block, and no summand is the block itself);
2. applies the rule's `requires`: the inputs it names are reassembled and re-sliced to the layout
   it asks for (what the compiler's redistribution achieves, whichever collectives it picks);
3. runs the primitive's kernel on each device's blocks, with `local_attrs`, through the
   `MaskedLookup` when the rule gives one, times `scale`;
4. reassembles each output from the devices' blocks per `out_layouts` (`assemble_blocks`: partial
   axes summed, replicas required to agree) and compares it with the kernel on the whole inputs
   (float64: 1e-10 relative).

It also checks that the answer is consistent (one layout per output on the inputs' device matrix,
fitting the output shape, each device's local kernel output of exactly the local shape, no
partial integer/bool outputs, the required layouts a fixed point of the rule), that bad layouts
raise OpValueError naming the op, and - so that a rule which always asks for replicated inputs
cannot pass - hand-derived answers for the layouts that matter in tensor/sequence parallelism
(row/column-parallel matmul, vocabulary-parallel embedding, partial sums through linear ops ...).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import minispore  # noqa: F401  (registers every primitive)
from minispore.common import dtype as mstype
from minispore.common.errors import OpValueError
from minispore.ops import sharding_rules as SR
from minispore.ops.primitive import PRIMITIVES, AbstractTensor
from minispore.ops.sharding import (NOT_SPLIT, MaskedLookup, ShardingResult, TensorLayout, assemble_blocks,
                                    local_block)

F64 = np.float64
DEVICE_MATRICES = ((2,), (4,), (2, 2))
LAYOUTS_PER_CASE = 6           # random input-layout combinations per (sample, device matrix), plus fixed ones


# ------------------------------------------------------------------------------------------------
# sample inputs: prim name -> function(rng) -> [(args, attrs)]. Arrays are tensor inputs; every
# other value (None, a Python number) is a non-tensor input. Dims are multiples of 4 where they
# should be splittable on 4 devices.
def _u(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(F64)


def _pos(rng, *shape):
    return rng.uniform(0.3, 2.0, shape).astype(F64)


def _unary(kind="any"):
    def make(rng):
        g = _pos if kind == "pos" else _u
        return [((g(rng, 4, 8),), {}), ((g(rng, 2, 4, 4),), {})]
    return make


def _unary_bool(rng):
    return [((rng.uniform(size=(4, 8)) > 0.5,), {})]


def _binary(kind="any"):
    def make(rng):
        g = _pos if kind == "pos" else _u
        return [((g(rng, 4, 8), g(rng, 4, 8)), {}),
                ((g(rng, 2, 4, 8), g(rng, 8)), {}),          # broadcast a vector over the rows
                ((g(rng, 4, 1), g(rng, 1, 8)), {}),          # outer broadcast of size-1 dims
                ((g(rng, 4, 8), 1.5), {})]                   # a Python scalar operand
    return make


def _binary_bool(rng):
    return [((rng.uniform(size=(4, 8)) > 0.5, rng.uniform(size=(8,)) > 0.5), {})]


def _binary_int(rng):
    return [((rng.integers(-9, 9, (4, 8)).astype(np.int64), rng.integers(1, 5, (8,)).astype(np.int64)), {})]


def _matmul(rng):
    return [((_u(rng, 4, 8), _u(rng, 8, 4)), {}),
            ((_u(rng, 2, 4, 8), _u(rng, 8, 4)), {}),          # batch on x only
            ((_u(rng, 2, 4, 8), _u(rng, 2, 8, 4)), {}),       # batch on both
            ((_u(rng, 1, 4, 8), _u(rng, 4, 8, 4)), {}),       # a broadcast size-1 batch dim on x
            ((_u(rng, 8), _u(rng, 8, 4)), {}),                # 1-d x
            ((_u(rng, 4, 8), _u(rng, 8)), {})]                # 1-d y


SAMPLES = {
    "abs": _unary(), "ceil": _unary(), "cos": _unary(), "erf": _unary(), "exp": _unary(), "floor": _unary(),
    "gelu": lambda r: [((_u(r, 4, 8),), {"approximate": "none"}), ((_u(r, 4, 8),), {"approximate": "tanh"})],
    "hardtanh": lambda r: [((_u(r, 4, 8),), {"min_val": -1.0, "max_val": 1.0})],
    "elu": lambda r: [((_u(r, 4, 8),), {"alpha": 1.0})],
    "leaky_relu": lambda r: [((_u(r, 4, 8),), {"alpha": 0.2})],
    "softplus": lambda r: [((_u(r, 4, 8),), {"beta": 1.0, "threshold": 20.0})],
    "isfinite": _unary(), "isinf": _unary(), "isnan": _unary(), "log": _unary("pos"),
    "logical_not": _unary_bool, "reciprocal": _unary("pos"), "relu": _unary(), "relu6": _unary(),
    "round": _unary(), "rsqrt": _unary("pos"), "sigmoid": _unary(), "sign": _unary(), "silu": _unary(),
    "sin": _unary(), "sqrt": _unary("pos"), "square": _unary(), "tanh": _unary(),
    "neg": _unary(), "copy": _unary(), "stop_gradient": _unary(),
    "zeros_like": lambda r: [((_u(r, 4, 8),), {"dtype": None})],
    "ones_like": lambda r: [((_u(r, 4, 8),), {"dtype": None})],
    "cast": lambda r: [((_u(r, 4, 8),), {"dtype": mstype.float32}), ((_u(r, 4, 8),), {"dtype": mstype.int32}),
                       ((r.integers(-5, 5, (4, 8)),), {"dtype": mstype.float64})],
    "add": _binary(), "sub": _binary(), "mul": _binary(), "div": _binary("pos"),
    "pow": _binary("pos"), "maximum": _binary(), "minimum": _binary(), "equal": _binary(), "not_equal": _binary(),
    "greater": _binary(), "greater_equal": _binary(), "less": _binary(), "less_equal": _binary(),
    "logical_and": _binary_bool, "logical_or": _binary_bool, "logical_xor": _binary_bool,
    "mod": _binary("pos"), "floor_div": _binary_int, "truncate_div": _binary_int,
    "clamp": lambda r: [((_u(r, 4, 8), -0.5, 0.5), {}), ((_u(r, 4, 8), _u(r, 8) - 1, _u(r, 4, 1) + 1), {})],
    "where": lambda r: [((r.uniform(size=(4, 8)) > 0.5, _u(r, 4, 8), _u(r, 8)), {})],
    "matmul": _matmul,
    "mm": lambda r: [((_u(r, 4, 8), _u(r, 8, 4)), {})],
    "bmm": lambda r: [((_u(r, 2, 4, 8), _u(r, 2, 8, 4)), {}), ((_u(r, 4, 4, 8), _u(r, 4, 8, 4)), {})],
    "dense": lambda r: [((_u(r, 4, 8), _u(r, 4, 8), _u(r, 4)), {}), ((_u(r, 2, 4, 8), _u(r, 4, 8), None), {}),
                        ((_u(r, 2, 4, 8), _u(r, 4, 8)), {})],
    "addmm": lambda r: [((_u(r, 4, 4), _u(r, 4, 8), _u(r, 8, 4)), {"beta": 0.5, "alpha": 2.0}),
                        ((_u(r, 4), _u(r, 4, 8), _u(r, 8, 4)), {"beta": 1, "alpha": 1})],
    "reshape": lambda r: [((_u(r, 4, 8),), {"shape": (32,)}), ((_u(r, 4, 8),), {"shape": (4, 2, 4)}),
                          ((_u(r, 2, 4, 4),), {"shape": (8, 4)}), ((_u(r, 8, 4),), {"shape": (2, 4, 4)}),
                          ((_u(r, 4, 8),), {"shape": (2, 16)}), ((_u(r, 4, 1, 8),), {"shape": (4, 8, 1)})],
    "flatten": lambda r: [((_u(r, 2, 4, 4),), {"start_dim": 1, "end_dim": 2}),
                          ((_u(r, 2, 4, 4),), {"start_dim": 0, "end_dim": 1})],
    "squeeze": lambda r: [((_u(r, 4, 1, 8),), {"axis": (1,)})],
    "expand_dims": lambda r: [((_u(r, 4, 8),), {"axis": 1}), ((_u(r, 4, 8),), {"axis": 0})],
    "transpose": lambda r: [((_u(r, 4, 8),), {"perm": (1, 0)}), ((_u(r, 2, 4, 8),), {"perm": (2, 0, 1)})],
    "broadcast_to": lambda r: [((_u(r, 4, 1),), {"shape": (2, 4, 8)}), ((_u(r, 8),), {"shape": (4, 8)})],
    "concat": lambda r: [((_u(r, 4, 8), _u(r, 4, 4)), {"axis": 1}), ((_u(r, 4, 8), _u(r, 4, 8)), {"axis": 0})],
    "stack": lambda r: [((_u(r, 4, 8), _u(r, 4, 8)), {"axis": 1}), ((_u(r, 4, 8), _u(r, 4, 8)), {"axis": 0})],
    "split": lambda r: [((_u(r, 4, 8),), {"sizes": (4, 4), "axis": 1}), ((_u(r, 4, 8),), {"sizes": (2, 2), "axis": 0})],
    "softmax": lambda r: [((_u(r, 4, 8),), {"axis": -1}), ((_u(r, 2, 4, 8),), {"axis": 1})],
    "log_softmax": lambda r: [((_u(r, 4, 8),), {"axis": -1}), ((_u(r, 2, 4, 8),), {"axis": 0})],
    "layer_norm": lambda r: [((_u(r, 4, 8), _u(r, 8), _u(r, 8)), {"normalized_shape": (8,), "eps": 1e-5}),
                             ((_u(r, 2, 4, 8), None, None), {"normalized_shape": (4, 8), "eps": 1e-5})],
    "rms_norm": lambda r: [((_u(r, 4, 8), _u(r, 8)), {"epsilon": 1e-6}), ((_u(r, 2, 4, 8), _u(r, 4, 8)), {"epsilon": 1e-6})],
    "reduce_sum": lambda r: [((_u(r, 4, 8),), {"axis": (1,), "keep_dims": False}),
                             ((_u(r, 2, 4, 8),), {"axis": (0, 2), "keep_dims": True}),
                             ((_u(r, 4, 8),), {"axis": (), "keep_dims": False})],
    "reduce_mean": lambda r: [((_u(r, 4, 8),), {"axis": (1,), "keep_dims": False}),
                              ((_u(r, 2, 4, 8),), {"axis": (0, 2), "keep_dims": True}),
                              ((_u(r, 4, 8),), {"axis": (), "keep_dims": False})],
    "embedding": lambda r: [((r.integers(0, 8, (4, 4)), _u(r, 8, 4)), {"padding_idx": None, "scale_grad_by_freq": False}),
                            ((r.integers(0, 8, (8,)), _u(r, 8, 4)), {"padding_idx": 0, "scale_grad_by_freq": False})],
    "gather": lambda r: [((_u(r, 8, 4), r.integers(0, 8, (4, 2))), {"axis": 0, "batch_dims": 0}),
                         ((_u(r, 4, 8, 4), r.integers(0, 8, (4, 4))), {"axis": 1, "batch_dims": 0}),
                         ((_u(r, 4, 8, 4), r.integers(0, 8, (4, 4))), {"axis": 1, "batch_dims": 1})],
    "cross_entropy": lambda r: [
        ((_u(r, 4, 8), r.integers(0, 8, (4,)), None), {"ignore_index": -100, "reduction": "none", "label_smoothing": 0.0}),
        ((_u(r, 4, 8), r.integers(0, 8, (4,)), None), {"ignore_index": -100, "reduction": "sum", "label_smoothing": 0.0}),
        ((_u(r, 4, 8), r.integers(0, 8, (4,)), None), {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0}),
        ((_u(r, 4, 8), _pos(r, 4, 8) / 8, None), {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0}),
        ((_u(r, 4, 8, 2), r.integers(0, 8, (4, 2)), _pos(r, 8)),
         {"ignore_index": -100, "reduction": "sum", "label_smoothing": 0.1})],
    "nll_loss": lambda r: [
        ((_u(r, 4, 8), r.integers(0, 8, (4,)), None), {"ignore_index": -100, "reduction": "none", "label_smoothing": 0.0}),
        ((_u(r, 4, 8), r.integers(0, 8, (4,)), _pos(r, 8)), {"ignore_index": -100, "reduction": "sum", "label_smoothing": 0.0})],
}
for _name in ("reduce_max", "reduce_min", "reduce_prod", "logsumexp"):
    SAMPLES[_name] = lambda r: [((_u(r, 4, 8),), {"axis": (1,), "keep_dims": False}),
                                ((_u(r, 2, 4, 8),), {"axis": (0, 2), "keep_dims": True})]
for _name in ("reduce_all", "reduce_any"):
    SAMPLES[_name] = lambda r: [((r.uniform(size=(4, 8)) > 0.3,), {"axis": (1,), "keep_dims": False})]
for _name in ("reduce_std", "reduce_var"):
    SAMPLES[_name] = lambda r: [((_u(r, 4, 8),), {"axis": (1,), "ddof": 1, "keep_dims": False})]
SAMPLES["vector_norm"] = lambda r: [((_u(r, 4, 8),), {"ord": 2.0, "axis": (1,), "keep_dims": False})]


def _fa_attrs(**kw):
    base = dict(head_num=4, keep_prob=1.0, scale_value=0.5, pre_tokens=2147483647, next_tokens=2147483647,
                inner_precise=0, input_layout="BNSD", sparse_mode=0, prefix=None, block_q=2, block_kv=2)
    return {**base, **kw}


def _flash(rng):
    """q (B=2, N1=4, S=4, D=2) with GQA k/v (N2=2 heads), a causal band, a (1, N1, S, S) bias; the
    BSH layout (heads inside H); a batch mask."""
    q, k, v = _u(rng, 2, 4, 4, 2), _u(rng, 2, 2, 4, 2), _u(rng, 2, 2, 4, 2)
    pse = _u(rng, 1, 4, 4, 4)
    mask = rng.uniform(size=(2, 1, 4, 4)) > 0.7
    mask[..., 0] = False                                      # (every row keeps a position)
    bsh = (_u(rng, 2, 4, 8), _u(rng, 2, 4, 4), _u(rng, 2, 4, 4))
    return [((q, k, v, None, None, None), _fa_attrs()),
            ((q, k, v, pse, None, None), _fa_attrs(sparse_mode=2)),
            ((q, k, v, None, None, mask), _fa_attrs()),
            (bsh + (None, None, None), _fa_attrs(input_layout="BSH"))]


def _flash_grad(rng):
    out = []
    prim = PRIMITIVES["flash_attention_score"]
    for args, attrs in _flash(rng)[1:2] + _flash(rng)[3:]:
        o, lse, seed = prim.impl(*args, **attrs)
        dout, dlse = _u(rng, *o.shape), np.zeros(lse.shape)
        out.append(((dout, dlse) + args[:3] + (o, lse, np.asarray(seed)) + args[3:], attrs))
    return out


def _rms_grad(rng):
    x, g = _u(rng, 2, 4, 8), _pos(rng, 8)
    _, rstd = PRIMITIVES["rms_norm"].impl(x, g, 1e-6)
    return [((_u(rng, 2, 4, 8), _u(rng, *rstd.shape), x, g), {"epsilon": 1e-6})]


def _ln_grad(rng):
    x, w = _u(rng, 4, 8), _pos(rng, 8)
    _, mean, rstd = PRIMITIVES["layer_norm"].impl(x, w, None, (8,), 1e-5)
    return [((_u(rng, 4, 8), x, w, mean, rstd), {"normalized_shape": (8,), "eps": 1e-5}),
            ((_u(rng, 2, 4, 8), _u(rng, 2, 4, 8), None, None, None), {"normalized_shape": (4, 8), "eps": 1e-5})]


def _ce_grad(rng):
    out = []
    for red in ("none", "sum", "mean"):
        a = {"ignore_index": -100, "reduction": red, "label_smoothing": 0.1}
        dout = _u(rng, 4) if red == "none" else np.asarray(1.5)
        out.append(((dout, _u(rng, 4, 8), rng.integers(0, 8, (4,)), None), a))
    a = {"ignore_index": 2, "reduction": "sum", "label_smoothing": 0.0}
    out.append(((np.asarray(0.5), _u(rng, 4, 8, 2), rng.integers(0, 8, (4, 2)), _pos(rng, 8)), a))
    return out


def _nll_grad(rng):
    out = []
    for red in ("none", "sum", "mean"):
        a = {"input_shape": (4, 8), "ignore_index": -100, "reduction": red, "label_smoothing": 0.0}
        dout = _u(rng, 4) if red == "none" else np.asarray(1.5)
        out.append(((dout, rng.integers(0, 8, (4,)), None), a))
    a = {"input_shape": (4, 8, 2), "ignore_index": -100, "reduction": "none", "label_smoothing": 0.0}
    out.append(((_u(rng, 4, 2), rng.integers(0, 8, (4, 2)), _pos(rng, 8)), a))
    return out


def _gather_grad(rng):
    return [((_u(rng, 4, 2, 4), rng.integers(0, 8, (4, 2))), {"axis": 0, "batch_dims": 0, "shape": (8, 4)}),
            ((_u(rng, 4, 4, 4), rng.integers(0, 8, (4, 4))), {"axis": 1, "batch_dims": 1, "shape": (4, 8, 4)}),
            ((_u(rng, 4, 4, 2, 4), rng.integers(0, 8, (4, 2))), {"axis": 1, "batch_dims": 0, "shape": (4, 8, 4)})]


def _getitem(rng):
    from minispore.ops.prims._indexspec import normalize
    x = _u(rng, 4, 8, 2)
    out = []
    for index in ((Ellipsis, slice(0, 4), None), (1, slice(None), None), (slice(None), slice(2, 6)),
                  (None, slice(None, None, -1)), (slice(None), 3)):
        spec, _ = normalize("getitem", x.shape, index)
        out.append(((x,), {"spec": spec}))
    spec, _ = normalize("getitem", x.shape, (np.array([0, 3]), slice(None)))
    out.append(((x, np.array([0, 3])), {"spec": spec}))
    return out


def _getitem_grad(rng):
    out = []
    prim = PRIMITIVES["getitem"]
    for (args, attrs) in _getitem(rng):
        y = prim.impl(*args, **attrs)
        out.append(((_u(rng, *y.shape),) + args[1:], {**attrs, "shape": args[0].shape}))
    return out


CONV = {"stride": (1, 1), "pads": (1, 1, 0, 0), "dilation": (1, 1), "groups": 1}


def _conv(rng):
    return [((_u(rng, 4, 2, 4, 4), _u(rng, 4, 2, 3, 3)), CONV), ((_u(rng, 2, 4, 4, 4), _u(rng, 4, 2, 3, 3)), {**CONV, "groups": 2})]


def _conv_grads(rng):
    prim = PRIMITIVES["conv2d"]
    (x, w), a = _conv(rng)[0]
    dy = _u(rng, *prim.impl(x, w, **a).shape)
    return ([((dy, w), {**a, "x_shape": x.shape})], [((dy, x), {**a, "w_shape": w.shape})])


def _ints(rng, *shape, lo=0, hi=16):
    return rng.integers(lo, hi, shape).astype(np.int64)


for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm"):
    SAMPLES[_name] = lambda r: [((_ints(r, 4, 8), _ints(r, 8)), {}), ((_ints(r, 4, 1), _ints(r, 1, 8)), {})]
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    SAMPLES[_name] = lambda r: [((_ints(r, 4, 8, lo=-8), _ints(r, 8, hi=4)), {})]
SAMPLES["invert"] = lambda r: [((_ints(r, 4, 8, lo=-8),), {})]
SAMPLES["polygamma"] = lambda r: [((_pos(r, 4, 8),), {"n": 1})]

SAMPLES.update({
    "conv2d": _conv,
    "conv2d_backprop_input": lambda r: _conv_grads(r)[0],
    "conv2d_backprop_filter": lambda r: _conv_grads(r)[1],
    "max_pool2d": lambda r: [((_u(r, 2, 4, 4, 4),), {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 0, 0),
                                                     "dilation": (1, 1), "ceil_mode": False})],
    "avg_pool2d": lambda r: [((_u(r, 2, 4, 4, 4),), {"kernel": (2, 2), "stride": (1, 1), "pads": (1, 1, 1, 1),
                                                     "ceil_mode": False, "count_include_pad": False,
                                                     "divisor_override": 0})],
    "adaptive_avg_pool2d": lambda r: [((_u(r, 4, 2, 5, 4),), {"out_hw": (2, 3)})],
    "adaptive_max_pool2d": lambda r: [((_u(r, 4, 2, 5, 4),), {"out_hw": (2, 3)})],
    "interpolate": lambda r: [((_u(r, 2, 4, 3, 4),), {"size": (5, 8), "mode": "bilinear", "align_corners": False})],
    "one_hot": lambda r: [((r.integers(0, 4, (4, 2)), 1.0, 0.0), {"depth": 4, "axis": -1}),
                          ((r.integers(0, 4, (4, 2)), 2.0, -1.0), {"depth": 4, "axis": 1})],
    "getitem": _getitem,
    "getitem_grad": _getitem_grad,
    "cross_entropy_grad": _ce_grad,
    "nll_loss_grad": _nll_grad,
    "gather_grad": _gather_grad,
    "rotary_position_embedding": lambda r: [((_u(r, 2, 4, 4, 8), _u(r, 1, 1, 4, 8), _u(r, 1, 1, 4, 8)), {"mode": 0}),
                                            ((_u(r, 4, 2, 8), _u(r, 4, 1, 8), _u(r, 4, 1, 8)), {"mode": 1})],
    "rope_rotate": lambda r: [((_u(r, 4, 2, 8),), {"mode": 0}), ((_u(r, 4, 8),), {"mode": 1})],
    "swiglu": lambda r: [((_u(r, 4, 8),), {"dim": -1}), ((_u(r, 4, 8, 2),), {"dim": 1})],
    "add_rms_norm": lambda r: [((_u(r, 2, 4, 8), _u(r, 2, 4, 8), _pos(r, 8)), {"epsilon": 1e-6})],
    "rms_norm_grad": _rms_grad,
    "layer_norm_grad": _ln_grad,
    "softmax_grad": lambda r: [((_u(r, 4, 8), _u(r, 4, 8)), {"axis": -1}), ((_u(r, 2, 4, 8), _u(r, 2, 4, 8)), {"axis": 1})],
    "log_softmax_grad": lambda r: [((_u(r, 4, 8), _u(r, 4, 8)), {"axis": -1})],
    "embedding_grad": lambda r: [
        ((_u(r, 4, 4, 8), r.integers(0, 8, (4, 4))), {"num_weights": 8, "padding_idx": None, "scale_grad_by_freq": False}),
        ((_u(r, 8, 4), r.integers(0, 8, (8,))), {"num_weights": 8, "padding_idx": 1, "scale_grad_by_freq": True})],
    "flash_attention_score": _flash,
    "flash_attention_score_grad": _flash_grad,
    "tril": lambda r: [((_u(r, 2, 4, 8),), {"diagonal": 1})],
    "triu": lambda r: [((_u(r, 2, 4, 8),), {"diagonal": -1})],
    "flip": lambda r: [((_u(r, 2, 4, 8),), {"dims": (0, 2)}), ((_u(r, 4, 8),), {"dims": (-1,)})],
    "cumsum": lambda r: [((_u(r, 4, 8),), {"axis": 1, "exclusive": False, "reverse": False}),
                         ((_u(r, 2, 4, 8),), {"axis": 0, "exclusive": True, "reverse": True})],
    "cumprod": lambda r: [((_u(r, 4, 8),), {"axis": 1, "exclusive": False, "reverse": False})],
    "cummax": lambda r: [((_u(r, 4, 8),), {"axis": 1})],
    "cummin": lambda r: [((_u(r, 4, 8),), {"axis": 0})],
    "logcumsumexp": lambda r: [((_u(r, 4, 8),), {"axis": 1})],
    "sort": lambda r: [((_u(r, 4, 8),), {"axis": -1, "descending": False}), ((_u(r, 4, 8),), {"axis": 0, "descending": True})],
    "topk": lambda r: [((_u(r, 4, 8),), {"k": 2, "axis": -1, "largest": True, "sorted": True})],
    "argmax": lambda r: [((_u(r, 4, 8),), {"axis": 1, "keep_dims": False}), ((_u(r, 4, 8),), {"axis": None, "keep_dims": False})],
    "argmin": lambda r: [((_u(r, 4, 8),), {"axis": 0, "keep_dims": True})],
    "argmax_with_value": lambda r: [((_u(r, 4, 8),), {"axis": 1, "keep_dims": False})],
    "argmin_with_value": lambda r: [((_u(r, 4, 8),), {"axis": 0, "keep_dims": True})],
    "median": lambda r: [((_u(r, 4, 8),), {"axis": -1, "keep_dims": False})],
    "masked_fill": lambda r: [((_u(r, 4, 8), r.uniform(size=(8,)) > 0.5, 0.5), {}),
                              ((_u(r, 4, 8), r.uniform(size=(4, 8)) > 0.5, np.asarray(-1.0)), {})],
    "full_like": lambda r: [((_u(r, 4, 8),), {"fill_value": 3.0, "dtype": None})],
    "isclose": lambda r: [((_u(r, 4, 8), _u(r, 8)), {"rtol": 0.5, "atol": 0.1, "equal_nan": False})],
    "heaviside": lambda r: [((np.round(_u(r, 4, 8)), _u(r, 8)), {})],
    "lerp": lambda r: [((_u(r, 4, 8), _u(r, 8), 0.25), {}), ((_u(r, 4, 8), _u(r, 4, 8), _u(r, 4, 1)), {})],
    "fmod": _binary("pos"),
    "relu_grad": lambda r: [((_u(r, 4, 8), _u(r, 4, 8)), {})],
    "silu_grad": lambda r: [((_u(r, 4, 8), _u(r, 4, 8)), {}), ((_u(r, 2, 4, 4), _u(r, 2, 4, 4)), {})],
    "gelu_grad": lambda r: [((_u(r, 4, 8), _u(r, 4, 8), _u(r, 4, 8)), {})],
    "nan_to_num": lambda r: [((np.where(r.uniform(size=(4, 8)) > 0.8, np.nan, _u(r, 4, 8)),),
                              {"nan": 0.0, "posinf": None, "neginf": None})],
})


def _default_samples(name):
    """Sample inputs for a primitive of a known rule kind that SAMPLES does not list (a new unary or
    binary elementwise op is covered on its own): float64 inputs in the first domain where the
    kernel is finite, shapes as `_unary` / `_binary`."""
    prim = PRIMITIVES[name]
    if prim.sharding not in (SR.pointwise, SR.linear_pointwise, SR.elementwise, SR.elementwise_sum,
                             SR.elementwise_product, SR.elementwise_quotient):
        return None
    import inspect
    params = [p for p in inspect.signature(prim.infer).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    arity = len(params)

    def make(rng):
        for lo, hi in ((-2.0, 2.0), (0.2, 0.9), (1.2, 3.0)):
            shapes = [((4, 8),) * arity, ((2, 4, 8),) + ((8,),) * (arity - 1), ((4, 1),) + ((1, 8),) * (arity - 1)]
            samples = [(tuple(rng.uniform(lo, hi, sh) for sh in case), {}) for case in shapes[:1 if arity == 1 else 3]]
            try:
                ok = all(np.all(np.isfinite(np.asarray(r, dtype=F64)))
                         for args, _ in samples for r in np.atleast_1d(_kernel(prim, args, {}, _infer(prim, args, {}))))
            except Exception:
                ok = False
            if ok:
                return samples
        raise AssertionError(f"no finite default sample for {name}")
    return make


def samples_for(name):
    return SAMPLES.get(name) or _default_samples(name)


def sharded_primitives():
    return sorted(n for n, p in PRIMITIVES.items() if p.sharding is not None)


# ------------------------------------------------------------------------------------------------
# the simulation
def _is_array(x):
    return isinstance(x, np.ndarray)


def _aval(x):
    return AbstractTensor(x.shape, mstype.from_numpy_dtype(x.dtype))


def _infer(prim, args, attrs):
    out = prim.infer(*[_aval(a) if _is_array(a) else a for a in args], **attrs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _kernel(prim, args, attrs, outs):
    """The primitive's kernel, its results cast to the inferred dtypes (what the executor does)."""
    res = prim.impl(*args, **attrs)
    res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
    return tuple(np.asarray(r).astype(o.dtype.np, copy=False) for r, o in zip(res, outs))


def _group_key(layout, rank):
    """Devices with the same key hold summands of one partial block."""
    c = layout.coords(rank)
    return tuple(c[a] for a in range(len(layout.device_matrix)) if a not in layout.partial)


def _distribute(x, layout, rng):
    """Every device's block of `x`; under a partial layout, random summands of the block."""
    n = layout.device_num
    blocks = {r: np.array(local_block(x, layout, r)) for r in range(n)}
    if not layout.partial:
        return blocks
    groups = {}
    for r in range(n):
        groups.setdefault(_group_key(layout, r), []).append(r)
    for ranks in groups.values():
        first = ranks[0]
        for r in ranks[1:]:                  # random summands; the first device holds the rest
            noise = rng.standard_normal(blocks[r].shape) if np.issubdtype(x.dtype, np.floating) else \
                rng.integers(-3, 4, blocks[r].shape)
            blocks[first] = blocks[first] - noise
            blocks[r] = noise.astype(x.dtype)
    return blocks


def _fits(layout, shape):
    try:
        layout.local_shape(shape)
        return True
    except OpValueError:
        return False


def simulate(name, args, attrs, layouts, rng, expect_requires=None):
    """Run `name` on every device for `layouts`; returns the rule's answer after checking it."""
    prim = PRIMITIVES[name]
    outs = _infer(prim, args, attrs)
    ins = tuple(_aval(a) if _is_array(a) else a for a in args)
    res = prim.sharding(name, ins, outs, tuple(layouts), dict(attrs))
    assert isinstance(res, ShardingResult), f"{name}: the rule answered {res!r}"
    dm = next(lay for lay in layouts if lay is not None).device_matrix
    n = int(np.prod(dm))
    where = f"{name} {attrs} with layouts {layouts} -> {res}"

    # consistency of the answer
    assert isinstance(res.out_layouts, tuple) and len(res.out_layouts) == len(outs), where
    for o, lay in zip(outs, res.out_layouts):
        assert isinstance(lay, TensorLayout) and lay.device_matrix == dm, where
        assert _fits(lay, o.shape), f"out layout does not fit the output {o.shape}: {where}"
        if lay.partial:
            assert o.dtype is not mstype.bool_, f"a partial bool output: {where}"
    if res.scale != 1.0:
        assert all(o.dtype.is_floating for o in outs), where
    required = res.requires if res.requires is not None else tuple(layouts)
    assert len(required) == len(args), where
    for a, lay in zip(args, required):
        if _is_array(a):
            assert isinstance(lay, TensorLayout) and lay.device_matrix == dm and _fits(lay, a.shape), where
            if lay.partial:
                assert a.dtype != np.bool_, f"a partial bool input required: {where}"
        else:
            assert lay is None, where
    if res.requires is not None:
        assert tuple(res.requires) != tuple(layouts), f"`requires` equal to the given layouts (use None): {where}"
        # the required layouts are a fixed point: the rule accepts them as they are, with the same outputs
        again = prim.sharding(name, ins, outs, tuple(required), dict(attrs))
        assert again.requires is None and again.out_layouts == res.out_layouts, f"{where}\n  then {again}"
    if expect_requires is not None:
        assert (res.requires is not None) == expect_requires, where

    # 1. distribute the inputs (partial ones as random summands); 2. redistribute per `requires`
    local = [dict() for _ in args]
    for i, (a, lay) in enumerate(zip(args, layouts)):
        if _is_array(a):
            local[i] = _distribute(a, lay, rng)
    for i, (a, lay, need) in enumerate(zip(args, layouts, required)):
        if _is_array(a) and need != lay:
            whole = assemble_blocks(local[i], lay, a.shape)
            np.testing.assert_allclose(whole, a, rtol=1e-12, atol=1e-12)
            local[i] = _distribute(a, need, rng)      # (the value itself: summing summands rounds)

    # 3. the local kernels
    kattrs = dict(attrs) if res.local_attrs is None else {**attrs, **res.local_attrs}
    per_out = [dict() for _ in outs]
    for r in range(n):
        largs = [local[i][r] if _is_array(a) else a for i, a in enumerate(args)]
        if res.lookup is not None:
            lk = res.lookup
            got = lk.run(prim.impl, largs, kattrs, required[lk.table], r)
            got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
            got = tuple(np.asarray(g).astype(o.dtype.np, copy=False) for g, o in zip(got, outs))
        else:
            got = _kernel(prim, largs, kattrs, outs)
        assert len(got) == len(outs), where
        for k, (g, o, lay) in enumerate(zip(got, outs, res.out_layouts)):
            assert g.shape == lay.local_shape(o.shape), \
                f"device {r} output {k}: local kernel shape {g.shape} != layout's {lay.local_shape(o.shape)}: {where}"
            per_out[k][r] = g * res.scale if res.scale != 1.0 else g

    # 4. reassemble and compare with the whole computation
    full = _kernel(prim, list(args), dict(attrs), outs)
    for k, (o, lay, want) in enumerate(zip(outs, res.out_layouts, full)):
        rtol, atol = (1e-10, 1e-11) if o.dtype == mstype.float64 else (1e-5, 1e-5)   # (a cast to float32)
        got = assemble_blocks(per_out[k], lay, o.shape, rtol=rtol, atol=atol)
        if o.dtype.is_floating:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"output {k}: {where}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {k}: {where}")
    return res


# ------------------------------------------------------------------------------------------------
# layouts to try
def _maps(ndim, n_axes):
    """Every (tensor_map, partial) using each device-matrix axis at most once: an axis goes to one
    dim, to `partial`, or nowhere; a dim may take several axes (in either order)."""
    out = []
    for assign in itertools.product(range(-2, ndim), repeat=n_axes):     # -2: partial, -1: unused
        dims = [[] for _ in range(ndim)]
        for a, d in enumerate(assign):
            if d >= 0:
                dims[d].append(a)
        partial = tuple(a for a, d in enumerate(assign) if d == -2)
        orders = [list(itertools.permutations(axes)) if axes else [()] for axes in dims]
        for choice in itertools.product(*orders):
            out.append((tuple(NOT_SPLIT if not c else (c[0] if len(c) == 1 else c) for c in choice), partial))
    return out


def _candidates(x, dm):
    """The layouts `x` fits on `dm` (partial ones only for floating inputs)."""
    floating = np.issubdtype(x.dtype, np.floating)
    out = []
    for tm, part in _maps(x.ndim, len(dm)):
        if part and not floating:
            continue
        lay = TensorLayout(dm, tm, part)
        if _fits(lay, x.shape):
            out.append(lay)
    return out


def layout_cases(args, dm, rng, k=LAYOUTS_PER_CASE):
    """All-replicated, each input's splits alone (others replicated), and `k` random combinations."""
    cands = [(_candidates(a, dm) if _is_array(a) else [None]) for a in args]
    repl = [TensorLayout.replicated(dm, a.ndim) if _is_array(a) else None for a in args]
    cases = [tuple(repl)]
    for i, c in enumerate(cands):
        if _is_array(args[i]):
            picks = c if len(c) <= 4 else [c[j] for j in rng.choice(len(c), 4, replace=False)]
            for lay in picks:
                case = list(repl)
                case[i] = lay
                cases.append(tuple(case))
    first = next((i for i, a in enumerate(args) if _is_array(a)), None)
    if first is not None:                     # the same layout on every input shaped like the first
        same = [i for i, a in enumerate(args) if _is_array(a) and a.shape == args[first].shape]
        if len(same) > 1:
            for j in rng.choice(len(cands[first]), min(4, len(cands[first])), replace=False):
                case = list(repl)
                for i in same:
                    case[i] = cands[first][j] if np.issubdtype(args[i].dtype, np.floating) or \
                        not cands[first][j].partial else cands[first][j].settled()
                cases.append(tuple(case))
    for _ in range(k):
        cases.append(tuple(c[rng.integers(len(c))] for c in cands))
    return list(dict.fromkeys(cases))


# ------------------------------------------------------------------------------------------------
# the tests
def test_every_rule_has_samples():
    missing = [n for n in sharded_primitives() if samples_for(n) is None]
    assert not missing, f"primitives with a sharding rule but no sample inputs here: {missing}"
    assert len(sharded_primitives()) >= 180


@pytest.mark.parametrize("name", sharded_primitives())
def test_rule_matches_the_whole_computation(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    samples = samples_for(name)(rng)
    assert samples
    checked = 0
    for args, attrs in samples:
        for dm in DEVICE_MATRICES:
            for layouts in layout_cases(args, dm, rng):
                simulate(name, args, attrs, layouts, rng)
                checked += 1
    assert checked >= 10 * len(samples)


@pytest.mark.parametrize("name", sharded_primitives())
def test_bad_layouts_name_the_op(name):
    rng = np.random.default_rng(0)
    args, attrs = samples_for(name)(rng)[0]
    prim = PRIMITIVES[name]
    ins = tuple(_aval(a) if _is_array(a) else a for a in args)
    outs = _infer(prim, args, attrs)
    tensors = [i for i, a in enumerate(args) if _is_array(a)]
    repl = [TensorLayout.replicated((2,), a.ndim) if _is_array(a) else None for a in args]

    def raises(layouts):
        with pytest.raises(OpValueError, match=f"For '{name}'"):
            prim.sharding(name, ins, outs, tuple(layouts), dict(attrs))

    i = tensors[0]
    x = args[i]
    # a dim not divisible by its split count: split dim 0 on a device matrix one larger than it
    bad = [TensorLayout.replicated((x.shape[0] + 1,), a.ndim) if _is_array(a) else None for a in args]
    bad[i] = TensorLayout((x.shape[0] + 1,), (0,) + (NOT_SPLIT,) * (x.ndim - 1))
    raises(bad)
    # the wrong rank
    wrong = list(repl)
    wrong[i] = TensorLayout.replicated((2,), x.ndim + 1)
    raises(wrong)
    # one layout too few
    raises(repl[:-1])
    # a layout for a non-tensor input / none for a tensor input
    wrong = list(repl)
    wrong[i] = None
    raises(wrong)
    # inputs on different device matrices
    if len(tensors) > 1:
        mixed = list(repl)
        mixed[tensors[1]] = TensorLayout.replicated((4,), args[tensors[1]].ndim)
        raises(mixed)


# ------------------------------------------------------------------------------------------------
# hand-derived answers (the layouts tensor / sequence / data parallelism use)
def L(dm, tm, partial=()):
    return TensorLayout(dm, tm, partial)


def _rule(name, args, attrs, layouts):
    rng = np.random.default_rng(1)
    return simulate(name, args, attrs, layouts, rng)


def test_column_and_row_parallel_matmul():
    rng = np.random.default_rng(2)
    x, w = _u(rng, 4, 8), _u(rng, 8, 4)
    # column parallel: W split along n -> the output split along n, nothing moves
    r = _rule("matmul", (x, w), {}, (L((2,), (-1, -1)), L((2,), (-1, 0))))
    assert r.requires is None and r.out_layouts == (L((2,), (-1, 0)),)
    # row parallel: k split in both -> a partial output over that axis, nothing moves
    r = _rule("matmul", (x, w), {}, (L((2,), (-1, 0)), L((2,), (0, -1))))
    assert r.requires is None and r.out_layouts == (L((2,), (-1, -1), (0,)),)
    # data x model on (2, 2): batch on axis 1, k on axis 0
    r = _rule("matmul", (x, w), {}, (L((2, 2), (1, 0)), L((2, 2), (0, -1))))
    assert r.requires is None and r.out_layouts == (L((2, 2), (1, -1), (0,)),)
    # y's k split disagrees with x's: y follows x
    r = _rule("matmul", (x, w), {}, (L((2,), (-1, -1)), L((2,), (0, -1))))
    assert r.requires == (L((2,), (-1, -1)), L((2,), (-1, -1)))
    # a partial x times a settled weight stays partial (the product is linear in x)
    r = _rule("matmul", (x, w), {}, (L((2,), (-1, -1), (0,)), L((2,), (-1, -1))))
    assert r.requires is None and r.out_layouts[0].partial == (0,)


def test_dense_bias_under_a_row_parallel_split():
    rng = np.random.default_rng(3)
    x, w, b = _u(rng, 4, 8), _u(rng, 4, 8), _u(rng, 4)
    r = _rule("dense", (x, w, b), {}, (L((2,), (-1, 0)), L((2,), (-1, 0)), L((2,), (-1,))))
    assert r.out_layouts == (L((2,), (-1, -1), (0,)),)
    assert r.requires[2] == L((2,), (-1,), (0,))        # each device adds its share of the bias
    r = _rule("dense", (x, w, b), {}, (L((2,), (-1, -1)), L((2,), (0, -1)), L((2,), (0,))))
    assert r.requires is None and r.out_layouts == (L((2,), (-1, 0)),)   # column parallel


EMB = {"padding_idx": None, "scale_grad_by_freq": False}


def test_vocabulary_parallel_embedding():
    rng = np.random.default_rng(4)
    ids, table = rng.integers(0, 8, (4, 4)), _u(rng, 8, 4)
    r = _rule("embedding", (ids, table), EMB, (L((2,), (-1, -1)), L((2,), (0, -1))))
    assert r.requires is None and r.lookup is not None
    assert r.out_layouts == (L((2,), (-1, -1, -1), (0,)),)
    # ids split over the batch (data parallel) and the table over vocab (model parallel)
    r = _rule("embedding", (ids, table), EMB, (L((2, 2), (1, -1)), L((2, 2), (0, -1))))
    assert r.requires is None and r.out_layouts == (L((2, 2), (1, -1, -1), (0,)),)
    # the table split along hidden: the output's last dim split, no lookup mask
    r = _rule("embedding", (ids, table), EMB, (L((2,), (-1, -1)), L((2,), (-1, 0))))
    assert r.lookup is None and r.out_layouts == (L((2,), (-1, -1, 0)),)


def test_gather_split_along_the_gathered_axis():
    rng = np.random.default_rng(5)
    p, i = _u(rng, 8, 4), rng.integers(0, 8, (4, 2))
    r = _rule("gather", (p, i), {"axis": 0, "batch_dims": 0}, (L((4,), (0, -1)), L((4,), (-1, -1))))
    assert r.lookup is not None and r.out_layouts == (L((4,), (-1, -1, -1), (0,)),)


def test_reductions_leave_partial_sums():
    rng = np.random.default_rng(6)
    x = _u(rng, 4, 8)
    r = _rule("reduce_sum", (x,), {"axis": (1,), "keep_dims": False}, (L((2,), (-1, 0)),))
    assert r.requires is None and r.out_layouts == (L((2,), (-1,), (0,)),)
    r = _rule("reduce_mean", (x,), {"axis": (), "keep_dims": False}, (L((2, 2), (1, 0)),))
    assert r.requires is None and r.scale == 0.25 and r.out_layouts == (L((2, 2), (), (0, 1)),)
    r = _rule("reduce_max", (x,), {"axis": (1,), "keep_dims": False}, (L((2,), (-1, 0)),))
    assert r.requires == (L((2,), (-1, -1)),)
    r = _rule("reduce_max", (x,), {"axis": (1,), "keep_dims": False}, (L((2,), (0, -1)),))
    assert r.requires is None and r.out_layouts == (L((2,), (0,)),)


def test_partial_sums_through_linear_ops():
    rng = np.random.default_rng(7)
    x, y = _u(rng, 4, 8), _u(rng, 4, 8)
    p = L((2,), (-1, -1), (0,))
    assert _rule("add", (x, y), {}, (p, p)).requires is None
    r = _rule("add", (x, y), {}, (p, L((2,), (-1, -1))))       # the replicated operand becomes partial
    assert r.requires == (p, p) and r.out_layouts == (p,)
    assert _rule("mul", (x, y), {}, (p, L((2,), (-1, -1)))).requires is None
    assert _rule("mul", (x, y), {}, (p, p)).requires is not None
    assert _rule("div", (x, np.abs(y) + 1), {}, (p, L((2,), (-1, -1)))).requires is None
    assert _rule("neg", (x,), {}, (p,)).requires is None
    assert _rule("relu", (x,), {}, (p,)).requires == (L((2,), (-1, -1)),)
    assert _rule("reshape", (x,), {"shape": (32,)}, (p,)).out_layouts == (L((2,), (-1,), (0,)),)
    assert _rule("transpose", (x,), {"perm": (1, 0)}, (L((2, 2), (1, -1), (0,)),)).out_layouts == \
        (L((2, 2), (-1, 1), (0,)),)


def test_norms_and_softmax_keep_the_token_split():
    rng = np.random.default_rng(8)
    x = _u(rng, 2, 4, 8)
    r = _rule("softmax", (x,), {"axis": -1}, (L((2, 2), (1, 0, -1)),))
    assert r.requires is None and r.out_layouts == (L((2, 2), (1, 0, -1)),)
    r = _rule("softmax", (x,), {"axis": -1}, (L((2,), (-1, -1, 0)),))
    assert r.requires == (L((2,), (-1, -1, -1)),)
    r = _rule("rms_norm", (x, _u(rng, 8)), {"epsilon": 1e-6}, (L((2,), (-1, 0, -1)), L((2,), (-1,))))
    assert r.requires is None and r.out_layouts[0] == L((2,), (-1, 0, -1))
    r = _rule("layer_norm", (x, _u(rng, 8), _u(rng, 8)), {"normalized_shape": (8,), "eps": 1e-5},
              (L((2,), (0, -1, -1)), L((2,), (0,)), L((2,), (-1,))))
    assert r.requires[1] == L((2,), (-1,)) and r.out_layouts[0] == L((2,), (0, -1, -1))


def test_reshape_moves_a_split_with_its_elements():
    rng = np.random.default_rng(9)
    x = _u(rng, 4, 8)
    r = _rule("reshape", (x,), {"shape": (2, 2, 8)}, (L((2,), (0, -1)),))
    assert r.requires is None and r.out_layouts == (L((2,), (0, -1, -1)),)
    assert r.local_attrs["shape"] == (1, 2, 8)
    r = _rule("reshape", (x,), {"shape": (32,)}, (L((2, 2), (1, 0)),))      # a split inner dim cannot follow
    assert r.requires == (L((2, 2), (1, -1)),) and r.out_layouts == (L((2, 2), (1,)),)


def test_cross_entropy_over_a_split_batch():
    rng = np.random.default_rng(10)
    x, t = _u(rng, 4, 8), rng.integers(0, 8, (4,))
    attrs = {"ignore_index": -100, "reduction": "sum", "label_smoothing": 0.0}
    r = _rule("cross_entropy", (x, t, None), attrs, (L((2,), (0, -1)), L((2,), (0,)), None))
    assert r.requires is None and r.out_layouts == (L((2,), (), (0,)),)
    r = _rule("cross_entropy", (x, t, None), {**attrs, "reduction": "none"}, (L((2,), (-1, 0)), L((2,), (-1,)), None))
    assert r.requires == (L((2,), (-1, -1)), L((2,), (-1,)), None)


def test_local_block_and_assemble_blocks():
    a = np.arange(48.0).reshape(8, 6)
    lay = L((2, 3), (1, 0))
    blocks = {r: local_block(a, lay, r) for r in range(6)}
    np.testing.assert_array_equal(blocks[4], a[4:8, 2:4])                # device (1, 1)
    np.testing.assert_array_equal(assemble_blocks(blocks, lay, a.shape), a)
    part = L((2, 2), (0, -1), (1,))
    np.testing.assert_array_equal(local_block(a[:, :4], part, 1), a[4:8, :4])   # partial: as if replicated
    halves = {r: local_block(a[:, :4], part, r) / 2 for r in range(4)}
    np.testing.assert_allclose(assemble_blocks(halves, part, (8, 4)), a[:, :4])
    repl = L((2,), (-1, -1))
    with pytest.raises(OpValueError, match="assemble_blocks"):          # replicas that disagree
        assemble_blocks({0: a, 1: a + 1}, repl, a.shape)
    with pytest.raises(OpValueError, match="assemble_blocks"):          # a missing rank
        assemble_blocks({0: a}, repl, a.shape)
    with pytest.raises(OpValueError, match="local_block"):              # not divisible
        local_block(a, L((4,), (-1, 0)), 0)


def test_masked_lookup_alone():
    table = np.arange(16.0).reshape(8, 2)
    ids = np.array([[0, 5], [7, 2]])
    lay = L((2,), (0, -1))
    lk = MaskedLookup(1, 0, 0)
    parts = [lk.run(lambda i, w: w[i], (ids, local_block(table, lay, r)), {}, lay, r) for r in range(2)]
    np.testing.assert_array_equal(parts[0] + parts[1], table[ids])
    np.testing.assert_array_equal(parts[1][0, 0], [0.0, 0.0])            # id 0 lives on device 0


def test_flash_attention_splits_batch_and_whole_head_groups():
    rng = np.random.default_rng(11)
    (q, k, v, *rest), attrs = _flash(rng)[0]
    args = (q, k, v, None, None, None)
    none3 = (None, None, None)
    # heads (dim 1 in BNSD) over 2 devices: 2 query heads and 1 key/value head each
    r = _rule("flash_attention_score", args, attrs, (L((2,), (-1, 0, -1, -1)),) * 3 + none3)
    assert r.requires is None and r.local_attrs["head_num"] == 2
    assert r.out_layouts[:2] == (L((2,), (-1, 0, -1, -1)), L((2,), (-1, 0, -1)))
    # batch x heads on (2, 2)
    r = _rule("flash_attention_score", args, attrs, (L((2, 2), (1, 0, -1, -1)),) * 3 + none3)
    assert r.requires is None and r.out_layouts[1] == L((2, 2), (1, 0, -1))
    # 4 head blocks would cut the 2 key/value heads' groups: the heads are required whole
    r = _rule("flash_attention_score", args, attrs, (L((4,), (-1, 0, -1, -1)),) + (L((4,), (-1,) * 4),) * 2 + none3)
    assert r.requires[0] == L((4,), (-1, -1, -1, -1)) and r.local_attrs is None
    # a split sequence is required whole; k and v follow q
    r = _rule("flash_attention_score", args, attrs,
              (L((2,), (0, -1, -1, -1)), L((2,), (-1, -1, 0, -1)), L((2,), (-1, -1, -1, -1))) + none3)
    assert r.requires[:3] == (L((2,), (0, -1, -1, -1)),) * 3
    # BSH: a split of H into whole heads
    (qb, kb, vb, *_), attrs_bsh = _flash(rng)[3]
    r = _rule("flash_attention_score", (qb, kb, vb, None, None, None), attrs_bsh, (L((2,), (-1, -1, 0)),) * 3 + none3)
    assert r.requires is None and r.local_attrs["head_num"] == 2


def test_flash_attention_grad_sums_a_broadcast_bias_gradient():
    rng = np.random.default_rng(12)
    args, attrs = _flash_grad(rng)[0]                          # with a (1, N1, S, S) bias
    qlay = L((2,), (0, -1, -1, -1))
    lse = L((2,), (0, -1, -1))
    lays = (qlay, lse, qlay, qlay, qlay, qlay, lse, L((2,), ()), L((2,), (-1, -1, -1, -1)), None, None)
    r = _rule("flash_attention_score_grad", args, attrs, lays)
    assert r.requires is None
    assert r.out_layouts == (qlay, qlay, qlay, L((2,), (-1, -1, -1, -1), (0,)))


def test_rope_swiglu_and_scans_need_their_dim_whole():
    rng = np.random.default_rng(13)
    x, cos, sin = _u(rng, 2, 4, 4, 8), _u(rng, 1, 1, 4, 8), _u(rng, 1, 1, 4, 8)
    rep = L((2,), (-1, -1, -1, -1))
    r = _rule("rotary_position_embedding", (x, cos, sin), {"mode": 0}, (L((2,), (-1, 0, -1, -1)), rep, rep))
    assert r.requires is None and r.out_layouts == (L((2,), (-1, 0, -1, -1)),)
    r = _rule("rotary_position_embedding", (x, cos, sin), {"mode": 0}, (L((2,), (-1, -1, -1, 0)), rep, rep))
    assert r.requires[0] == rep
    r = _rule("rotary_position_embedding", (x, cos, sin), {"mode": 1}, (L((2,), (-1, -1, -1, -1), (0,)), rep, rep))
    assert r.requires is None and r.out_layouts[0].partial == (0,)            # linear in x
    y = _u(rng, 4, 8)
    assert _rule("swiglu", (y,), {"dim": -1}, (L((2,), (0, -1)),)).requires is None
    assert _rule("swiglu", (y,), {"dim": -1}, (L((2,), (-1, 0)),)).requires == (L((2,), (-1, -1)),)
    assert _rule("cumsum", (y,), {"axis": 1, "exclusive": False, "reverse": False}, (L((2,), (0, -1)),)).requires is None
    assert _rule("cumsum", (y,), {"axis": 0, "exclusive": False, "reverse": False}, (L((2,), (0, -1)),)).requires \
        == (L((2,), (-1, -1)),)


def test_backward_ops_leave_the_parameter_gradients_partial():
    rng = np.random.default_rng(14)
    dout, ids = _u(rng, 4, 4, 8), rng.integers(0, 8, (4, 4))
    attrs = {"num_weights": 8, "padding_idx": None, "scale_grad_by_freq": False}
    r = _rule("embedding_grad", (dout, ids), attrs, (L((2, 2), (1, -1, 0)), L((2, 2), (1, -1))))
    assert r.requires is None and r.out_layouts == (L((2, 2), (-1, 0), (1,)),)   # the DP sum, hidden split
    (dy, drstd, x, g), a = _rms_grad(rng)[0]
    tok = L((2,), (0, -1, -1))
    r = _rule("rms_norm_grad", (dy, drstd, x, g), a, (tok, tok, tok, L((2,), (-1,))))
    assert r.requires is None and r.out_layouts == (tok, L((2,), (-1,), (0,)))


def test_cross_entropy_mean_over_a_split_batch_says_when_it_is_exact():
    rng = np.random.default_rng(15)
    x, t = _u(rng, 4, 8), rng.integers(0, 8, (4,))
    attrs = {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0}
    r = _rule("cross_entropy", (x, t, None), attrs, (L((2,), (0, -1)), L((2,), (0,)), None))
    assert r.scale == 0.5 and r.out_layouts == (L((2,), (), (0,)),) and "exact when" in r.note
    probs = _pos(rng, 4, 8) / 8
    r = _rule("cross_entropy", (x, probs, None), attrs, (L((2,), (0, -1)), L((2,), (0, -1)), None))
    assert r.scale == 0.5 and r.note == ""                # probability targets: always exact


def test_loss_and_gather_backward_keep_the_batch_split():
    rng = np.random.default_rng(16)
    (dout, x, t, w), a = _ce_grad(rng)[1]                          # reduction='sum'
    rows = L((2,), (0, -1))
    r = _rule("cross_entropy_grad", (dout, x, t, w), a, (L((2,), ()), rows, L((2,), (0,)), None))
    assert r.requires is None and r.out_layouts == (rows, rows)
    (dout, x, t, w), a = _ce_grad(rng)[2]                          # 'mean': needs the global count
    r = _rule("cross_entropy_grad", (dout, x, t, w), a, (L((2,), ()), rows, L((2,), (0,)), None))
    assert r.requires[1] == L((2,), (-1, -1))
    (dout, idx), a = _gather_grad(rng)[0]                          # dout (4, 2, 4) from params (8, 4)
    r = _rule("gather_grad", (dout, idx), a, (L((2,), (0, -1, -1)), L((2,), (0, -1))))
    assert r.requires is None and r.out_layouts == (L((2,), (-1, -1), (0,)),)
    assert r.local_attrs["shape"] == (8, 4)


def test_basic_getitem_keeps_the_splits_of_whole_dims():
    (x,), a = _getitem(np.random.default_rng(17))[0]             # x[..., 0:4, None] on (4, 8, 2)
    r = _rule("getitem", (x,), a, (L((2, 2), (1, 0, -1)),))
    assert r.requires is None and r.out_layouts == (L((2, 2), (1, 0, -1, -1)),)
    (x,), a = _getitem(np.random.default_rng(17))[2]             # x[:, 2:6]: dim 1 cut by global bounds
    r = _rule("getitem", (x,), a, (L((2, 2), (1, 0, -1)),))
    assert r.requires == (L((2, 2), (1, -1, -1)),) and r.out_layouts == (L((2, 2), (1, -1, -1)),)


def test_conv_data_parallel_leaves_the_filter_gradient_partial():
    rng = np.random.default_rng(18)
    (x, w), a = _conv(rng)[0]
    batch = L((2, 2), (1, -1, -1, -1))
    r = _rule("conv2d", (x, w), a, (L((2, 2), (1, 0, -1, -1)), L((2, 2), (-1, -1, -1, -1))))
    assert r.requires[0] == batch and r.out_layouts == (batch,)
    (dy, x), a = _conv_grads(rng)[1][0]
    r = _rule("conv2d_backprop_filter", (dy, x), a, (batch, batch))
    assert r.requires is None and r.out_layouts == (L((2, 2), (-1, -1, -1, -1), (1,)),)
