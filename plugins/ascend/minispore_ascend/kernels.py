"""The device-kernel table: minispore primitives -> aclnn operators.

Each entry has the Backend's device-kernel signature `kernel(ins, outs, attrs, stream)`: `ins` are
DeviceTensors (or Python values), `outs` preallocated DeviceTensors whose shapes and dtypes come
from the primitive's own inference; the kernel only enqueues work on `stream`. The eager
(PyNative) kernels are derived from these by the core (staging: copy in, launch, synchronize,
copy out), and the KBK graph executor calls them directly on buffers inside its arena.

`flash_attention_score` and its backward are aclnnFlashAttentionScore(Grad) (attention.py); the
calls aclnn cannot make (float64, dropout, pse, ...) fall back one by one, counted.

Views (reshape, expand_dims, squeeze, flatten) are a device-to-device copy of the same bytes into
the output buffer (an aclrtMemcpyAsync on the stream), so they need no fallback either.
"""
from __future__ import annotations

import numpy as np

from minispore.backend.base import DeviceTensor
from minispore.common import dtype as mstype

from .aclnn import AclnnCall, acl_dtype
from .attention import k_flash_attention_score, k_flash_attention_score_grad


def _scalar_tensor(b, value, dt, stream):
    """A 0-d DeviceTensor holding a Python scalar (freed after the stream's next synchronize)."""
    arr = np.asarray(value, dtype=dt.np)
    buf = b.alloc(max(arr.nbytes, 1))
    b.runtime.memcpy(buf.ptr, buf.nbytes, arr.ctypes.data, arr.nbytes, 1)
    b.free_after_sync(buf, stream)
    return DeviceTensor(buf, (), dt)


def _tensorize(b, x, out, stream):
    return x if isinstance(x, DeviceTensor) else _scalar_tensor(b, x, out.dtype, stream)


# -- elementwise -------------------------------------------------------------------------------------
def _binary(op_name, with_alpha):
    def kernel(b, ins, outs, attrs, stream):
        out = outs[0]
        x, y = (_tensorize(b, v, out, stream) for v in ins)
        with AclnnCall(b, op_name) as c:
            args = [c.tensor(x), c.tensor(y)]
            if with_alpha:
                args.append(c.scalar(1, out.dtype))
            args.append(c.tensor(out))
            c.launch(stream, *args)
    return kernel


def _unary(op_name):
    def kernel(b, ins, outs, attrs, stream):
        with AclnnCall(b, op_name) as c:
            c.launch(stream, c.tensor(ins[0]), c.tensor(outs[0]))
    return kernel


def k_gelu(b, ins, outs, attrs, stream):
    approximate = attrs.get("approximate", "none")
    with AclnnCall(b, "aclnnGeluV2") as c:
        c.launch(stream, c.tensor(ins[0]), 1 if approximate == "tanh" else 0, c.tensor(outs[0]))


def k_cast(b, ins, outs, attrs, stream):
    with AclnnCall(b, "aclnnCast") as c:
        c.launch(stream, c.tensor(ins[0]), acl_dtype(outs[0].dtype), c.tensor(outs[0]))


# -- linear algebra ------------------------------------------------------------------------------------
def k_matmul(b, ins, outs, attrs, stream):
    """aclnnMatmul on rank >= 2 views: a 1-D operand is viewed as (1, K) / (K, 1), and the output
    descriptor re-inserts the dimension inference dropped (same bytes, another shape)."""
    x, y = ins
    out = outs[0]
    xs = (1,) + x.shape if x.ndim == 1 else x.shape
    ys = y.shape + (1,) if y.ndim == 1 else y.shape
    batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    os_ = batch + (xs[-2], ys[-1])
    with AclnnCall(b, "aclnnMatmul") as c:
        c.launch(stream, c.tensor(x, xs), c.tensor(y, ys), c.tensor(out, os_), 1)   # cubeMathType=1


# -- reductions and normalisation ------------------------------------------------------------------------
def k_softmax(b, ins, outs, attrs, stream):
    x = ins[0]
    axis = attrs.get("axis", -1)
    if isinstance(axis, (tuple, list)):
        axis = axis[0]
    if x.ndim == 0:                                  # softmax of a scalar is 1: view it as (1,)
        with AclnnCall(b, "aclnnSoftmax") as c:
            c.launch(stream, c.tensor(x, (1,)), 0, c.tensor(outs[0], (1,)))
        return
    with AclnnCall(b, "aclnnSoftmax") as c:
        c.launch(stream, c.tensor(x), int(axis), c.tensor(outs[0]))


def k_reduce_sum(b, ins, outs, attrs, stream):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", ())
    if axis is None or axis == () or x.ndim == 0:
        dims = list(range(x.ndim))
    else:
        dims = [axis] if isinstance(axis, int) else list(axis)
    shape, out_shape = (x.shape, out.shape) if x.ndim else ((1,), (1,))
    with AclnnCall(b, "aclnnReduceSum") as c:
        c.launch(stream, c.tensor(x, shape), c.int_array(dims or [0]), bool(attrs.get("keep_dims", False)),
                 acl_dtype(out.dtype), c.tensor(out, out_shape))


def k_rms_norm(b, ins, outs, attrs, stream):
    x, gamma = ins[0], ins[1]
    with AclnnCall(b, "aclnnRmsNorm") as c:
        c.launch(stream, c.tensor(x), c.tensor(gamma), float(attrs["epsilon"]), c.tensor(outs[0]), c.tensor(outs[1]))


# -- shape ------------------------------------------------------------------------------------------------
def k_transpose(b, ins, outs, attrs, stream):
    with AclnnCall(b, "aclnnPermute") as c:
        c.launch(stream, c.tensor(ins[0]), c.int_array(attrs["perm"]), c.tensor(outs[0]))


def k_concat(b, ins, outs, attrs, stream):
    out = outs[0]
    with AclnnCall(b, "aclnnCat") as c:
        lst = c.tensor_list([c.tensor(t) for t in ins])
        c.launch(stream, lst, int(attrs.get("axis", 0)), c.tensor(out))


def k_same_bytes(b, ins, outs, attrs, stream):
    """reshape/expand_dims/squeeze/flatten: the output holds the input's bytes unchanged."""
    x, out = ins[0], outs[0]
    if x.dtype is not out.dtype:
        raise TypeError(f"a view op changed dtype {x.dtype} -> {out.dtype}")
    if out.nbytes:
        b.copy_d2d_async(out, x, stream)


def k_embedding(b, ins, outs, attrs, stream):
    ids, weight = ins[0], ins[1]
    with AclnnCall(b, "aclnnEmbedding") as c:
        c.launch(stream, c.tensor(weight), c.tensor(ids), c.tensor(outs[0]))


TABLE = {
    "add": ("aclnnAdd", _binary("aclnnAdd", True)),
    "sub": ("aclnnSub", _binary("aclnnSub", True)),
    "mul": ("aclnnMul", _binary("aclnnMul", False)),
    "div": ("aclnnDiv", _binary("aclnnDiv", False)),
    "exp": ("aclnnExp", _unary("aclnnExp")),
    "neg": ("aclnnNeg", _unary("aclnnNeg")),
    "silu": ("aclnnSilu", _unary("aclnnSilu")),
    "gelu": ("aclnnGeluV2", k_gelu),
    "cast": ("aclnnCast", k_cast),
    "matmul": ("aclnnMatmul", k_matmul),
    "bmm": ("aclnnMatmul", k_matmul),
    "softmax": ("aclnnSoftmax", k_softmax),
    "reduce_sum": ("aclnnReduceSum", k_reduce_sum),
    "rms_norm": ("aclnnRmsNorm", k_rms_norm),
    "transpose": ("aclnnPermute", k_transpose),
    "concat": ("aclnnCat", k_concat),
    "embedding": ("aclnnEmbedding", k_embedding),
    "reshape": ("aclrtMemcpyAsync", k_same_bytes),
    "expand_dims": ("aclrtMemcpyAsync", k_same_bytes),
    "squeeze": ("aclrtMemcpyAsync", k_same_bytes),
    "flatten": ("aclrtMemcpyAsync", k_same_bytes),
    # fused attention (attention.py): what aclnn cannot do falls back per call, counted
    "flash_attention_score": ("aclnnFlashAttentionScore", k_flash_attention_score),
    "flash_attention_score_grad": ("aclnnFlashAttentionScoreGrad", k_flash_attention_score_grad),
}


def build_device_kernels(backend) -> dict:
    """{primitive name: kernel(ins, outs, attrs, stream)} for every op whose aclnn symbol exists."""
    table = {}
    for prim, (acl_name, fn) in TABLE.items():
        if acl_name.startswith("aclnn") and acl_name in backend.libs.missing:
            continue                               # the library lacks it: the core falls back, counted

        def kernel(ins, outs, attrs, stream, _fn=fn):
            return _fn(backend, ins, outs, attrs, stream)

        kernel.__name__ = f"ascend_{prim}"
        kernel.aclnn = acl_name
        table[prim] = kernel
    return table
