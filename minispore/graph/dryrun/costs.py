"""Cost rules: how many FLOPs a node does and how many bytes it moves, from shapes alone.

DryRun never runs a kernel, so everything it predicts about time comes from these two numbers
per node, fed into a roofline (devices.py): a node takes `max(flops / peak_flops, bytes / bandwidth)`.

Where the numbers come from, in order:

1. A primitive's own `cost` rule (`defprim(..., cost=...)`, ops/primitive.py) - matmul, bmm and
   conv2d have one: `2 * M * N * K` multiply-adds counted as two FLOPs each.
2. This module's table `COST_RULES` (primitive name -> rule), for every other primitive. It lives
   here rather than in the op files because these are *modelling conventions*, not facts about
   the op: how many FLOPs is an `exp`? (We say 1 per element, like most FLOP counters.)
3. A default for anything else: one FLOP per output element, bytes = inputs read + outputs written.

A fused kernel of jit_level O1 (passes/fusion.py) costs its members' FLOPs but only its own
bytes: one read of each input, one write of each output.

Conventions (the ones FLOP counters such as fvcore or DeepSpeed's profiler also use):

* Matrix products dominate training FLOPs, and their count is exact: `2 * M * N * K`. Fused
  attention (flash_attention_score and its gradient) counts its matmuls the same way, with the
  backward's recomputation (2.5x the forward), and its softmax as vector work.
* Elementwise arithmetic is 1 FLOP per output element; fused elementwise rules (softmax, RMSNorm,
  SiLU, cross-entropy and their gradients) count the arithmetic of their formula, per element
  (see FLOPS_PER_ELEMENT). Reductions are 1 FLOP per *input* element.
* Data movement (concat, split, cast, gather, pad ...) is 0 FLOPs and costs only bytes.
* Bytes = tensor inputs read once + outputs written once, with three exceptions that make the
  bytes match what a device really moves:
    - *views* (reshape, expand_dims, squeeze, flatten, broadcast_to) move nothing: they change
      metadata only, and their consumer reads the bytes;
    - a transpose of the last two axes whose every consumer is a matmul moves nothing: device
      GEMMs take transposed operands (`trans_a`/`trans_b`), so no copy is made. Any other
      transpose is a real copy;
    - gathers (embedding, gather, getitem) read only the rows they return, not the whole table.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import CALL, OPAQUE, Value

# -- tables -------------------------------------------------------------------------------------------

# FLOPs per OUTPUT element of elementwise and fused elementwise rules. The counts follow the
# formula each kernel evaluates (e.g. softmax: max, subtract, exp, sum, divide = 5).
FLOPS_PER_ELEMENT = {
    # arithmetic, comparisons, selection: one operation per element
    **{n: 1 for n in ("add", "sub", "mul", "div", "neg", "abs", "maximum", "minimum", "pow", "floor_div", "mod",
                      "square", "reciprocal", "floor", "ceil", "round", "sign", "clamp", "hardtanh", "relu",
                      "where", "masked_fill", "equal", "not_equal", "less", "less_equal", "greater",
                      "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
                      "isinf", "isfinite", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf")},
    "leaky_relu": 2, "elu": 3, "sigmoid": 3, "softplus": 3, "silu": 4, "gelu": 8,
    "silu_grad": 6,                    # s = sigmoid(x); dout * s * (1 + x * (1 - s))
    "softmax": 5, "log_softmax": 5,    # max, sub, exp, sum, div (log: sub of log-sum)
    "softmax_grad": 4,                 # y * (dy - sum(y * dy))
    "rms_norm": 4,                     # square, mean, rsqrt-scale, weight
    "rms_norm_grad": 9,
    "layer_norm": 7, "layer_norm_grad": 14,
    "dropout": 2, "uniform": 1, "normal": 2,
    "cumsum": 1, "cumprod": 1,
}

# reductions and losses: FLOPs per element of the largest tensor input
FLOPS_PER_INPUT_ELEMENT = {
    "reduce_sum": 1, "reduce_mean": 1, "reduce_max": 1, "reduce_min": 1, "reduce_prod": 1, "reduce_all": 1,
    "reduce_any": 1, "argmax": 1, "argmin": 1, "argmax_with_value": 1, "argmin_with_value": 1,
    "reduce_var": 3, "reduce_std": 3, "logsumexp": 4, "vector_norm": 2,
    "cross_entropy": 5,               # log-softmax over the logits (4) + pick and average (1)
    "cross_entropy_grad": 3,          # per logit: softmax - one_hot, scaled (dout, logits, target)
    "nll_loss": 1,
}

# ops that are free: metadata-only views, and zero-FLOP fills whose bytes are just their output
VIEW_OPS = frozenset({"reshape", "expand_dims", "squeeze", "flatten", "broadcast_to", "stop_gradient"})
MOVE_OPS = frozenset({"concat", "stack", "split", "tile", "repeat_interleave", "flip", "tril", "triu", "pad",
                      "copy", "cast", "transpose", "zeros", "ones", "full", "full_like", "zeros_like", "ones_like",
                      "arange", "linspace", "eye", "one_hot", "setitem", "scatter", "pad_grad",
                      "repeat_interleave_grad", "gather_grad", "getitem_grad", "scatter_add_along_axis",
                      "gather_elements_grad"})
# ops that read only what they return (plus the indices): bytes = indices + 2 * output
GATHER_OPS = frozenset({"embedding", "gather", "gather_along_axis", "gather_elements", "getitem"})
MATMUL_OPS = frozenset({"matmul", "bmm", "conv2d", "conv2d_backprop_input", "conv2d_backprop_filter",
                        "flash_attention_score", "flash_attention_score_grad", "prompt_flash_attention",
                        "incre_flash_attention"})

# rules written as functions: name -> fn(in_avals, out_avals, attrs) -> flops
COST_RULES: dict = {}


def register_cost(name: str, rule):
    """Give primitive `name` a cost rule `rule(in_avals, out_avals, attrs)` (overrides the tables).
    It returns the FLOPs (an int), or a dict with "flops" and optionally "matmul_flops" (the part
    done by the matrix unit; default: all of it for a matmul-kind op, else none), "bytes_read" and
    "bytes_written" (default: tensor inputs + outputs). `in_avals` holds an AbstractTensor for every
    tensor input and the constant itself otherwise."""
    COST_RULES[name] = rule


def _conv_backprop_flops(ins, outs, attrs):
    # the two conv2d gradients are GEMMs of the same size as the forward convolution:
    # 2 * N * Cout * OH * OW * (Cin/groups) * KH * KW, with dout (N, Cout, OH, OW) and w (Cout, Cin/g, KH, KW)
    dout, w = ins[0], ins[1]
    if not hasattr(w, "shape") or len(getattr(w, "shape", ())) != 4:      # backprop_filter(dout, x, ...)
        w = outs[0]
    _, cg, kh, kw = w.shape
    return 2 * _size(dout) * cg * kh * kw


def _sort_flops(ins, outs, attrs):
    import math
    x = ins[0]
    n = x.shape[-1] if x.shape else 1
    return int(_size(x) * max(1.0, math.log2(max(n, 2))))


def _embedding_grad_flops(ins, outs, attrs):
    return _size(ins[0])                           # one add per element of dout (scatter-add)


def _attention_geometry(name, ins, attrs, heads_attr, kv_heads_attr=None):
    """(B, N1, S1, S2, D) of a fused attention op, from the op's own geometry check."""
    from ...ops.prims.fused_attention import _qkv_geometry
    q, k, v = ins[0], ins[1], ins[2]
    kv = attrs.get(kv_heads_attr, 0) if kv_heads_attr else 0
    b, n1, _n2, s1, s2, d = _qkv_geometry(name, q, k, v, attrs[heads_attr], attrs["input_layout"], kv)
    return b, n1, s1, s2, d


def _flash_attention_cost(backward: bool, heads_attr="head_num", kv_heads_attr=None):
    """FlashAttention: QK^T and PV are 2 matmuls of 2*S1*S2*D FLOPs per head; the backward pass
    recomputes QK^T and does dV, dP, dQ, dK: 5 such matmuls, 2.5x the forward (Dao 2023,
    FlashAttention-2, section 3.1). The full S1 x S2 is counted even under a causal mask (PaLM's
    convention; a kernel that skips masked tiles does about half). Softmax work (exp, max, sum,
    rescale: ~5 per score, ~8 in backward) runs on the vector unit. Bytes: what the op reads and
    writes - the S1 x S2 scores never reach memory, which is the point of the kernel."""
    def rule(ins, outs, attrs):
        name = "flash_attention_score" if heads_attr == "head_num" else "prompt_flash_attention"
        if backward:                     # (dout, dlse, q, k, v, ...): the geometry of q, k, v
            ins = ins[2:]
        b, n1, s1, s2, d = _attention_geometry(name, ins, attrs, heads_attr, kv_heads_attr)
        scores = b * n1 * s1 * s2
        mm = (10 if backward else 4) * scores * d
        return {"flops": mm + (8 if backward else 5) * scores, "matmul_flops": mm}
    return rule


register_cost("flash_attention_score", _flash_attention_cost(False))
register_cost("flash_attention_score_grad", _flash_attention_cost(True))
register_cost("prompt_flash_attention", _flash_attention_cost(False, "num_heads", "num_key_value_heads"))
register_cost("conv2d_backprop_input", _conv_backprop_flops)
register_cost("conv2d_backprop_filter", _conv_backprop_flops)
register_cost("sort", _sort_flops)
register_cost("topk", _sort_flops)
register_cost("embedding_grad", _embedding_grad_flops)
register_cost("multinomial", lambda ins, outs, attrs: _size(ins[0]) * 3)


# -- per-node cost -------------------------------------------------------------------------------------

@dataclass
class NodeCost:
    """What one node costs. `matmul_flops` of its `flops` run on the device's matrix unit (tensor
    cores, Ascend's cube unit, BLAS on a CPU), the rest on the vector unit. `kind`: 'matmul' (mostly
    matrix work), 'vector', 'view' (free) or 'host' (a host call: not modelled)."""
    flops: int
    bytes_read: int
    bytes_written: int
    kind: str
    matmul_flops: int = -1        # FLOPs done by the matrix unit (-1: all of them if kind is 'matmul')

    def __post_init__(self):
        if self.matmul_flops < 0:
            self.matmul_flops = self.flops if self.kind == "matmul" else 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


def _size(aval) -> int:
    n = 1
    for s in getattr(aval, "shape", ()):
        n *= s
    return n


def _nbytes(aval) -> int:
    if aval is OPAQUE or not hasattr(aval, "dtype"):
        return 0
    return _size(aval) * aval.dtype.np.itemsize


def _aval_of(x):
    return x.aval if isinstance(x, Value) else x


def _is_last_two_swap(attrs) -> bool:
    perm = tuple(attrs.get("perm", ()) or ())
    n = len(perm)
    return n >= 2 and perm == tuple(range(n - 2)) + (n - 1, n - 2)


def node_cost(node, consumers=None) -> NodeCost:
    """The cost of one node. `consumers` (value id -> list of consuming nodes) enables the
    transpose-into-matmul rule; without it every transpose is a copy."""
    if not node.is_primitive:
        if node.op is CALL:                 # a called subgraph (lazy_inline): the sum of its nodes
            parts = graph_costs(node.attrs["graph"])
            flops = sum(c.flops for c in parts)
            kind = "matmul" if any(c.kind == "matmul" for c in parts) else "vector"
            return NodeCost(flops, sum(c.bytes_read for c in parts), sum(c.bytes_written for c in parts), kind,
                            sum(c.matmul_flops for c in parts))
        return NodeCost(0, 0, 0, "host")   # host calls, If/While: not modelled
    name = node.op.name
    ins = [_aval_of(x) for x in node.inputs]
    outs = [o.aval for o in node.outputs]
    tensor_ins = [a for a in ins if hasattr(a, "dtype") and hasattr(a, "shape") and a is not OPAQUE]
    read = sum(_nbytes(a) for a in tensor_ins)
    written = sum(_nbytes(a) for a in outs)

    if name in VIEW_OPS:
        return NodeCost(0, 0, 0, "view")
    if name == "transpose" and consumers is not None and _is_last_two_swap(node.attrs):
        users = consumers.get(node.outputs[0].id, [])
        if users and all(u.is_primitive and u.op.name in ("matmul", "bmm") for u in users):
            return NodeCost(0, 0, 0, "view")
    if name in GATHER_OPS:
        index_bytes = sum(_nbytes(a) for a in tensor_ins[1:])
        read = index_bytes + written

    members = getattr(node.op, "nodes", None)
    if members is not None and hasattr(node.op, "members"):
        # a fused kernel (O1, passes/fusion.py): its members' arithmetic, but its OWN bytes - it
        # reads each input once and writes each output once, which is the point of fusing
        member_users = consumers_of_nodes(members)
        flops = sum(node_cost(m, member_users).flops for m in members)
        return NodeCost(flops, read, written, "vector")

    rule = COST_RULES.get(name)
    matmul_flops = -1
    if rule is not None:
        c = rule(ins, outs, node.attrs)
        if isinstance(c, dict):
            flops = int(c.get("flops", 0))
            read = int(c.get("bytes_read", read))
            written = int(c.get("bytes_written", written))
            matmul_flops = int(c.get("matmul_flops", -1))
        else:
            flops = int(c)
    elif node.op.cost is not None:
        c = node.op.cost(*ins, **node.attrs) if node.attrs else node.op.cost(*ins)
        flops = int(c.get("flops", 0))
        read = int(c.get("bytes_read", read))
        written = int(c.get("bytes_written", written))
    elif name in FLOPS_PER_ELEMENT:
        flops = FLOPS_PER_ELEMENT[name] * sum(_size(a) for a in outs[:1])
    elif name in FLOPS_PER_INPUT_ELEMENT:        # per element of the largest input (the logits, for losses)
        flops = FLOPS_PER_INPUT_ELEMENT[name] * max((_size(a) for a in tensor_ins), default=0)
    elif name in MOVE_OPS or name in GATHER_OPS:
        flops = 0
    else:
        flops = sum(_size(a) for a in outs[:1])
    kind = "matmul" if name in MATMUL_OPS else "vector"
    return NodeCost(flops, read, written, kind, matmul_flops)


def consumers_of(graph) -> dict:
    """value id -> the nodes that read it (for the transpose rule)."""
    return consumers_of_nodes(graph.nodes)


def consumers_of_nodes(nodes) -> dict:
    users: dict = {}
    for node in nodes:
        for x in node.inputs:
            if isinstance(x, Value):
                users.setdefault(x.id, []).append(node)
    return users


def graph_costs(graph) -> list:
    """One NodeCost per node of `graph` (top level), in order."""
    users = consumers_of(graph)
    return [node_cost(n, users) for n in graph.nodes]


__all__ = ["NodeCost", "node_cost", "graph_costs", "consumers_of", "register_cost", "COST_RULES",
           "FLOPS_PER_ELEMENT", "FLOPS_PER_INPUT_ELEMENT", "VIEW_OPS", "MOVE_OPS", "GATHER_OPS", "MATMUL_OPS"]
