"""Cost rules: how many FLOPs an op does and how many bytes it moves, from shapes alone.

Every primitive's cost is a fact on the primitive (`defprim(..., cost=rule)`, ops/primitive.py),
written next to the op; this module holds the constructors those rules are made from. A rule is

    rule(ins, outs, attrs) -> {"flops": int, "bytes_read": int, "bytes_written": int,
                               "kind": "matmul" | "vector" | "view", "matmul_flops": int, ...}

where `ins` holds an AbstractTensor for every tensor input (and the constant itself for a Python
value), `outs` the output AbstractTensors and `attrs` the node's attributes. Every key but
"flops" is optional: bytes default to tensor inputs read once + outputs written once, "kind" to
"vector", "matmul_flops" (the part done by the matrix unit) to all FLOPs of a "matmul"-kind op and
none of any other. A primitive without a rule costs one FLOP per output element (`ELEMENTWISE`).

DryRun (graph/dryrun) feeds these numbers into a roofline: a node takes
`max(flops / peak_flops, bytes / bandwidth)`, with matrix-unit FLOPs at the matrix unit's peak.

Two extra keys let DryRun see through the one copy a device does not make (below):
"transposed_operand" (this node's output is its input with the last two axes swapped) and
"takes_transposed" (this op reads such an operand in place: a GEMM's trans_a / trans_b).

Conventions (the ones FLOP counters such as fvcore or DeepSpeed's profiler also use). They are
*modelling choices*, not measurements, which is why they are written down here once:

* Matrix products dominate training FLOPs, and their count is exact: `2 * M * N * K`
  multiply-adds counted as two FLOPs each (`matrix_unit`). Fused attention (flash_attention_score
  and its gradient) counts its matmuls the same way, with the backward's recomputation (2.5x the
  forward), and its softmax as vector work.
* Elementwise arithmetic is 1 FLOP per output element (how many FLOPs is an `exp`? We say 1, like
  most FLOP counters); fused elementwise rules (softmax, RMSNorm, SiLU, cross-entropy and their
  gradients) count the arithmetic of their formula, per output element (`per_output_element(k)`,
  e.g. softmax: max, subtract, exp, sum, divide = 5). Reductions and losses are k FLOPs per
  element of their largest input (`per_input_element(k)`).
* Data movement (concat, split, cast, pad ...) is 0 FLOPs and costs only bytes (`data_movement`).
* Bytes = tensor inputs read once + outputs written once, with three exceptions that make the
  bytes match what a device really moves:
    - *views* (reshape, expand_dims, squeeze, flatten, broadcast_to) move nothing (`free`): they
      change metadata only, and their consumer reads the bytes;
    - a transpose of the last two axes whose every consumer takes transposed operands moves
      nothing: device GEMMs read `trans_a`/`trans_b` operands, so no copy is made (`permutation`
      marks the transpose, `matrix_unit(..., takes_transposed=True)` the GEMM; DryRun, which knows
      the consumers, applies it). Any other transpose is a real copy;
    - gathers (embedding, gather, getitem) read only the rows they return, not the whole table
      (`gather`: the indices + the output).
"""
from __future__ import annotations

from .primitive import AbstractTensor


def size_of(a) -> int:
    """Elements of a tensor aval (1 for anything without a shape, as for a scalar)."""
    n = 1
    for s in getattr(a, "shape", ()):
        n *= s
    return n


def tensors(avals) -> list:
    """The tensor avals among `ins` (Python constants and opaque host values dropped)."""
    return [a for a in avals if isinstance(a, AbstractTensor)]


def traffic(ins, outs) -> dict:
    """The default bytes: every tensor input read once, every output written once."""
    return {"bytes_read": sum(a.nbytes for a in tensors(ins)),
            "bytes_written": sum(a.nbytes for a in tensors(outs))}


def per_output_element(k):
    """k FLOPs per element of the (first) output: elementwise and fused elementwise ops."""
    def rule(ins, outs, attrs):
        return {"flops": k * sum(size_of(a) for a in outs[:1]), "kind": "vector", **traffic(ins, outs)}
    rule.__doc__ = f"{k} FLOP(s) per output element"
    return rule


ELEMENTWISE = per_output_element(1)       # also what a primitive without a cost rule costs


def per_input_element(k, index=None):
    """k FLOPs per element of the largest tensor input (`index`: of input `index` instead):
    reductions and losses, whose work scales with what they read."""
    def rule(ins, outs, attrs):
        if index is None:
            n = max((size_of(a) for a in tensors(ins)), default=0)
        else:
            n = size_of(ins[index])
        return {"flops": k * n, "kind": "vector", **traffic(ins, outs)}
    rule.__doc__ = f"{k} FLOP(s) per element of the {'largest input' if index is None else f'input {index}'}"
    return rule


def data_movement(ins, outs, attrs):
    """0 FLOPs: the op only moves (or fills) bytes - concat, split, cast, pad, zeros ..."""
    return {"flops": 0, "kind": "vector", **traffic(ins, outs)}


def gather(ins, outs, attrs):
    """0 FLOPs; reads every tensor input after the first (the indices of `gather(x, indices)`) and
    the rows it returns (as many bytes as the output), not the whole of input 0. (For
    `embedding(ids, table)` the table is the input after the first, so it counts as read whole.)"""
    ts = tensors(ins)
    written = sum(a.nbytes for a in tensors(outs))
    return {"flops": 0, "kind": "vector", "bytes_read": sum(a.nbytes for a in ts[1:]) + written,
            "bytes_written": written}


def free(ins, outs, attrs):
    """A metadata-only view (reshape, squeeze, broadcast_to ...): no FLOPs, no bytes, no kernel."""
    return {"flops": 0, "bytes_read": 0, "bytes_written": 0, "kind": "view"}


def swaps_last_two_axes(perm) -> bool:
    """Whether the permutation `perm` only swaps the last two axes (a matrix transpose)."""
    perm = tuple(perm or ())
    n = len(perm)
    return n >= 2 and perm == tuple(range(n - 2)) + (n - 1, n - 2)


def permutation(perm_of):
    """A transpose: data movement, marked "transposed_operand" when `perm_of(attrs)` swaps only
    the last two axes - a consumer that takes transposed operands then reads it without a copy."""
    def rule(ins, outs, attrs):
        c = data_movement(ins, outs, attrs)
        if swaps_last_two_axes(perm_of(attrs)):
            c["transposed_operand"] = True
        return c
    return rule


def matrix_unit(rule, takes_transposed=False):
    """`rule`'s FLOPs run on the matrix unit (kind "matmul"; "matmul_flops" defaults to all of
    them). `takes_transposed`: the op reads a last-two-axes-transposed operand in place (a GEMM's
    trans_a / trans_b), so such a transpose feeding it costs nothing."""
    def mm_rule(ins, outs, attrs):
        c = dict(rule(ins, outs, attrs))
        c["kind"] = "matmul"
        c.setdefault("matmul_flops", c["flops"])
        if takes_transposed:
            c["takes_transposed"] = True
        for key, value in traffic(ins, outs).items():
            c.setdefault(key, value)
        return c
    mm_rule.__doc__ = f"on the matrix unit: {rule.__doc__ or getattr(rule, '__name__', 'rule')}"
    return mm_rule


__all__ = ["size_of", "tensors", "traffic", "per_output_element", "ELEMENTWISE", "per_input_element",
           "data_movement", "gather", "free", "swaps_last_two_axes", "permutation", "matrix_unit"]
