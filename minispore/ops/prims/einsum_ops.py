"""`ops.einsum(equation, *operands)`: Einstein summation, with MindSpore's documented semantics
(MindSpore 2.10's CPU kernel fails on every equation, so NumPy's einsum is the reference):

* an equation of comma-separated subscripts per operand, optionally `->` and the output subscripts;
  letters a-z and A-Z name dimensions, `...` stands for broadcast leading dimensions;
* without `->` the output is the ellipsis dims followed by the letters used exactly once, sorted;
* a letter repeated inside one operand takes a diagonal (`ii->i`); letters missing from the output
  are summed over; dims of size 1 broadcast against the same letter's size elsewhere;
* operands are floating tensors of one dtype.

Inference parses the equation (normalizing `...` into explicit letters) and rejects mismatches
before any kernel runs. The backward rule is einsum again: operand i's gradient contracts dout
with the other operands onto operand i's subscripts, then broadcasts over letters that appear
nowhere else and sums broadcast dims back to size 1. An operand with a repeated letter (a
diagonal) has no gradient rule here; that is an OpValueError when its gradient is requested.
"""
from __future__ import annotations

import string

import numpy as np

from .. import _check as C
from ..primitive import AbstractTensor, defprim
from .activation import upcast_half
from .elementwise import _wanted, sum_to
from .shape import broadcast_to, reshape

_LETTERS = set(string.ascii_letters)


def _parse(equation, shapes):
    """Return (input subscripts, output subscripts, {letter: size}) with `...` replaced by letters.
    Raises OpValueError for anything malformed."""
    op = "einsum"
    if not isinstance(equation, str):
        raise C.OpTypeError(op, "'equation' to be a str", type(equation).__name__)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise C.OpValueError(op, f"{len(terms)} operands for equation '{equation}'", f"{len(shapes)}")
    used = set(eq) & _LETTERS
    spare = [c for c in reversed(string.ascii_uppercase + string.ascii_lowercase) if c not in used]
    bad = set(eq) - _LETTERS - set(",.->")
    if bad or "->" in rhs:
        raise C.OpValueError(op, "subscripts of letters, ',', '...' and one '->'", repr(equation))
    ell_rank = 0
    for t, s in zip(terms, shapes):
        if "..." in t:
            ell_rank = max(ell_rank, len(s) - (len(t) - 3))
    ell = "".join(spare[:ell_rank])[::-1]
    ins = []
    for i, (t, s) in enumerate(zip(terms, shapes)):
        if t.count("...") > 1 or t.replace("...", "").count(".") or not set(t.replace("...", "")) <= _LETTERS:
            raise C.OpValueError(op, "at most one '...' per operand", repr(t))
        if "..." in t:
            k = len(s) - (len(t) - 3)
            if k < 0:
                raise C.OpValueError(op, f"operand {i} with at least {len(t) - 3} dims for '{t}'", f"shape {s}")
            t = t.replace("...", ell[ell_rank - k:])
        if len(t) != len(s):
            raise C.OpValueError(op, f"operand {i} with {len(t)} dims for subscripts '{terms[i]}'", f"shape {s}")
        ins.append(t)
    sizes = {}
    for i, (t, s) in enumerate(zip(ins, shapes)):
        own = {}
        for c, d in zip(t, s):
            # a subscript repeated within one operand takes a diagonal: its dims must match exactly
            if own.setdefault(c, d) != d:
                raise C.OpValueError(op, f"equal dims for the repeated subscript '{c}' of operand {i}",
                                     f"{own[c]} and {d} (shape {tuple(s)})")
        for c, d in zip(t, s):
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = d
            elif d != 1 and d != prev:
                raise C.OpValueError(op, f"one size for subscript '{c}'", f"{prev} and {d} (operand {i})")
    if arrow:
        if rhs.count("...") > 1 or rhs.replace("...", "").count("."):
            raise C.OpValueError(op, "at most one '...' in the output", repr(rhs))
        out = rhs.replace("...", ell)        # (without '...' the broadcast dims are summed away)
    else:
        counts = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    for c in out:
        if c not in sizes:
            raise C.OpValueError(op, f"output subscript '{c}' to appear in an operand", repr(equation))
    if len(set(out)) != len(out):
        raise C.OpValueError(op, "output subscripts without repeats", repr(rhs))
    return ins, out, sizes


def _einsum_infer(*operands, equation):
    if not operands:
        raise C.OpValueError("einsum", "at least one operand", "none")
    for i, x in enumerate(operands):
        C.tensor("einsum", f"operands[{i}]", x)
        if not x.dtype.is_floating:
            raise C.OpTypeError("einsum", "floating operands (Float16, Float32, Float64)", f"{x.dtype} (operand {i})")
        if x.dtype is not operands[0].dtype:
            raise C.OpTypeError("einsum", "operands of one dtype", f"{operands[0].dtype} and {x.dtype}")
    ins, out, sizes = _parse(equation, [tuple(x.shape) for x in operands])
    return AbstractTensor(tuple(sizes[c] for c in out), operands[0].dtype)


def _einsum_kernel(*arrays, equation):
    ins, out, _ = _parse(equation, [a.shape for a in arrays])
    return np.einsum(",".join(ins) + "->" + out, *[upcast_half(a) for a in arrays], optimize=len(arrays) > 2)


def _einsum_bprop(inputs, out, dout, equation):
    ins, outs, sizes = _parse(equation, [tuple(x.shape) for x in inputs])
    grads = []
    for i, x in enumerate(inputs):
        if not _wanted(inputs, i):
            grads.append(None)
            continue
        sub_i = ins[i]
        if len(set(sub_i)) != len(sub_i):
            raise C.OpValueError("einsum", f"no repeated subscript in operand {i} for its gradient", repr(sub_i))
        others = [ins[j] for j in range(len(inputs)) if j != i]
        present = set(outs).union(*others) if others else set(outs)
        keep = "".join(c for c in sub_i if c in present)
        eq = ",".join([outs] + others) + "->" + keep
        g = einsum(eq, dout, *[inputs[j] for j in range(len(inputs)) if j != i])
        # letters only operand i has were summed in the forward pass: broadcast the gradient back
        full = tuple(sizes[c] for c in sub_i)
        if keep != sub_i:
            g = reshape(g, tuple(g.shape[keep.index(c)] if c in keep else 1 for c in sub_i))
        if tuple(g.shape) != full:
            g = broadcast_to(g, full)
        grads.append(sum_to(g, tuple(x.shape)))
    return tuple(grads)


_einsum = defprim("einsum", _einsum_infer, _einsum_kernel, _einsum_bprop, doc="Einstein summation")


def einsum(equation, *operands):
    """`ops.einsum(equation, *operands)`: Einstein summation (see the module docstring), e.g.
    einsum('bij,bjk->bik', a, b) is a batched matmul and einsum('ii->i', a) a diagonal.
    The operands may also be passed as one list/tuple."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise C.OpTypeError("einsum", "'equation' to be a str", type(equation).__name__)
    return _einsum(*operands, equation=equation)


__all__ = ["einsum"]
