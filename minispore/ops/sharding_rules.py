"""The per-primitive sharding rules of semi-auto parallel (the `sharding` fact of ops/primitive.py).

Every rule has the one signature

    rule(name, ins, outs, layouts, attrs) -> ShardingResult

* `name`    the primitive's name (for the errors);
* `ins`     the inputs as inference sees them: AbstractTensors (anything with .shape/.dtype) for
            tensor inputs, the plain value (a Python number, None) for the others;
* `outs`    the output AbstractTensors, as a tuple (what `infer` returned);
* `layouts` one `TensorLayout` per tensor input (all on one device matrix), None for the others;
* `attrs`   the node's attributes (a missing one has the primitive's default).

A rule is a pure function of shapes, layouts and attributes: it never sees data and never talks
to other processes. It answers the output layouts and, where the op cannot consume an input's
layout as it is, the layout it needs instead (`ShardingResult.requires`); the compiler pass then
inserts the redistribution (AllGather, AllReduce, a local slice ...) that reaches it, cheapest by
bytes. A rule "requires" the *nearest* layout it can use - usually the given one with the offending
splits removed - so that pass has little to move. Inputs that do not fit their layout at all (a dim
not divisible by its split count, a wrong rank, layouts on different device matrices) are errors
naming the op.

Two conventions the rules share. (1) The first tensor input leads: when inputs disagree, the others
are asked to follow it. (2) A partial (pending-sum) input survives only through ops that are linear
in it (sums, reshapes, a matrix product in one operand ...); any other op requires it settled.
Turning a replicated value into a partial one is a local step (devices at coordinate 0 of the
partial axes keep it, the others take zeros), so a sum of a partial and a replicated operand asks
for the replicated one to become partial instead of paying an AllReduce first.

The rules say nothing about op names: each primitive names its rule where it is defined
(`defprim(..., sharding=sharding_rules.pointwise)`).
"""
from __future__ import annotations

import inspect
from functools import lru_cache

from ..common.errors import OpValueError
from .primitive import PRIMITIVES
from .sharding import NOT_SPLIT, MaskedLookup, ShardingResult, TensorLayout


# ------------------------------------------------------------------------------------------------
# shared helpers
@lru_cache(maxsize=None)
def _signature_default(name, key):
    """The default of attribute `key` in primitive `name`'s inference rule (the value a node
    without that attribute stands for), or _MISSING."""
    prim = PRIMITIVES.get(name)
    try:
        param = inspect.signature(prim.infer).parameters.get(key) if prim is not None else None
    except (TypeError, ValueError):
        param = None
    if param is None or param.default is inspect.Parameter.empty:
        return _MISSING
    return param.default


_MISSING = object()


def _attr(name, attrs, key, fallback):
    """Attribute `key` of the node: given, else the primitive's own default, else `fallback`."""
    if key in attrs:
        return attrs[key]
    d = _signature_default(name, key)
    return fallback if d is _MISSING else d


def _is_tensor(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float, complex, bool))


def _entry(axes):
    """A tensor-map entry from a tuple of axes."""
    axes = tuple(axes)
    return NOT_SPLIT if not axes else (axes[0] if len(axes) == 1 else axes)


def _check(name, ins, layouts):
    """Validate the layouts against the inputs; returns the common device matrix."""
    layouts = tuple(layouts)
    if len(layouts) != len(ins):
        raise OpValueError(name, f"one layout (or None) per input ({len(ins)})", f"{len(layouts)} layouts")
    dm = None
    for i, (x, lay) in enumerate(zip(ins, layouts)):
        if not _is_tensor(x):
            if lay is not None:
                raise OpValueError(name, f"no layout for the non-tensor input {i}", repr(lay))
            continue
        if not isinstance(lay, TensorLayout):
            raise OpValueError(name, f"a TensorLayout for tensor input {i}", repr(lay))
        if dm is None:
            dm = lay.device_matrix
        elif lay.device_matrix != dm:
            raise OpValueError(name, f"every input on one device matrix ({dm})",
                               f"device matrix {lay.device_matrix} for input {i}")
        lay.local_shape(x.shape, op=name)
    if dm is None:
        raise OpValueError(name, "at least one tensor input with a layout", "none")
    return dm


def _answer(name, ins, layouts, required, out_layouts, **extra):
    """The ShardingResult, with `requires` None when nothing has to move."""
    required = tuple(required)
    for x, lay in zip(ins, required):
        if lay is not None:
            lay.local_shape(x.shape, op=name)     # (a rule asking for a layout that does not fit is a bug)
    req = None if required == tuple(layouts) else required
    return ShardingResult(tuple(out_layouts), req, **extra)


def _axis(name, axis, ndim):
    if not isinstance(axis, int) or isinstance(axis, bool) or not -max(ndim, 1) <= axis < max(ndim, 1):
        raise OpValueError(name, f"an axis in [{-ndim}, {ndim})", repr(axis))
    return axis % max(ndim, 1)


def _reduced_axes(name, axis, ndim):
    """The reduced dims of a reduction's `axis` attribute: () or None mean every dim."""
    if axis is None or axis == ():
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted({_axis(name, a, ndim) for a in axis}))


def _without(layout, dims, settle=True):
    """`layout` with `dims` not split (and, with `settle`, no partial)."""
    tm = list(layout.tensor_map)
    for d in dims:
        tm[d] = NOT_SPLIT
    return TensorLayout(layout.device_matrix, tuple(tm), () if settle else layout.partial)


def _replicated_like(dm, x):
    return TensorLayout.replicated(dm, len(x.shape))


# ------------------------------------------------------------------------------------------------
# pointwise ops of one tensor
def pointwise(name, ins, outs, layouts, attrs):
    """An elementwise op of one tensor (relu, exp, isnan ...): each device applies it to its block.
    Not linear, so a partial input is settled first. Extra non-tensor inputs are passed along."""
    _check(name, ins, layouts)
    need = layouts[0].settled()
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (need,) * len(outs))


def linear_pointwise(name, ins, outs, layouts, attrs):
    """An elementwise op linear in its tensor (neg, copy, identity): partial sums pass through."""
    _check(name, ins, layouts)
    return _answer(name, ins, layouts, layouts, (layouts[0],) * len(outs))


def cast(name, ins, outs, layouts, attrs):
    """A dtype conversion: linear (partial sums pass) between floating dtypes; a conversion to or
    from integers or Bool truncates, so it needs the settled value."""
    _check(name, ins, layouts)
    floats = ins[0].dtype.is_floating and outs[0].dtype.is_floating
    need = layouts[0] if floats else layouts[0].settled()
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (need,))


def shape_only(name, ins, outs, layouts, attrs):
    """An op whose output depends on the input's shape only (zeros_like, ones_like): the output
    takes the input's split, settled (a constant is whole on every device); nothing moves."""
    _check(name, ins, layouts)
    return _answer(name, ins, layouts, layouts, (layouts[0].settled(),) * len(outs))


# ------------------------------------------------------------------------------------------------
# broadcasting elementwise ops of several operands
def _broadcast_rule(linearity):
    """linearity: 'none' (maximum, pow, comparisons, where), 'sum' (add, sub: linear in every
    operand at once), 'product' (mul: linear in each operand alone), 'quotient' (div: linear in
    the numerator)."""

    def rule(name, ins, outs, layouts, attrs):
        dm = _check(name, ins, layouts)
        out_shape = tuple(outs[0].shape)
        n = len(out_shape)
        ts = [i for i, x in enumerate(ins) if _is_tensor(x)]
        partial = ()
        keeps = set()                         # inputs that keep `partial`
        pins = [i for i in ts if layouts[i].partial]
        if pins:
            if linearity == "sum" and len(ts) == len(ins):
                partial, keeps = layouts[pins[0]].partial, set(ts)
            elif linearity in ("product", "quotient") and len(pins) == 1 and (linearity == "product" or pins[0] == 0):
                partial, keeps = layouts[pins[0]].partial, {pins[0]}
        used = set(partial)
        out_map = []
        for d in range(n):
            axes = ()
            for i in ts:
                shp = tuple(ins[i].shape)
                j = d - (n - len(shp))
                if j < 0 or (shp[j] == 1 and out_shape[d] != 1):
                    continue                  # absent or broadcast along d
                axes = tuple(a for a in layouts[i].axes(j) if a not in used)
                break
            used.update(axes)
            out_map.append(_entry(axes))
        required = list(layouts)
        for i in ts:
            shp = tuple(ins[i].shape)
            off = n - len(shp)
            tm = tuple(NOT_SPLIT if (shp[j] == 1 and out_shape[j + off] != 1) else out_map[j + off]
                       for j in range(len(shp)))
            required[i] = TensorLayout(dm, tm, partial if i in keeps else ())
        out = TensorLayout(dm, tuple(out_map), partial)
        return _answer(name, ins, layouts, required, (out,) * len(outs))

    rule.__name__ = rule.__qualname__ = f"elementwise_{linearity}"
    return rule


elementwise = _broadcast_rule("none")
elementwise_sum = _broadcast_rule("sum")
elementwise_product = _broadcast_rule("product")
elementwise_quotient = _broadcast_rule("quotient")


# ------------------------------------------------------------------------------------------------
# matrix products
def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _gathered_elements(ins, layouts, required, out=None, out_layout=None) -> int:
    """How many elements a resolution makes the compiler gather or reduce: the whole size of
    every operand that loses a split axis - slicing a dim further is free - plus twice the
    output's size when it comes out a partial sum (someone all-reduces it later: a ring
    all-reduce moves twice the bytes of a gather of the same tensor)."""
    total = 2 * _numel(out.shape) if out is not None and out_layout is not None and out_layout.partial else 0
    for x, given, need in zip(ins, layouts, required):
        if given is None or need is None or not _is_tensor(x):
            continue
        lost = set(given.partial) - set(need.partial)
        for d in range(len(x.shape)):
            lost |= set(given.axes(d)) - set(need.axes(d))
        if lost:
            total += _numel(x.shape)
    return total


def _contract(name, ins, outs, layouts, xi, yi, bi, ta, tb):
    """x @ y with the cheaper of two resolutions when x's and y's splits collide (the same device
    axis on x's rows and y's columns, say): x's splits lead (`_contract_x_leads`), or - for 2-d
    operands without a bias or partial input - y's lead, computed as (y^T @ x^T)^T. The one that
    gathers fewer elements wins; a tie keeps x leading. (The backward of a sequence-parallel
    row-parallel linear, dout (rows split) @ W (columns split), gathers the activation gradient
    rather than the bigger weight: Megatron's choice.)"""
    a = _contract_x_leads(name, ins, outs, layouts, xi, yi, bi, ta, tb)
    lx, ly = layouts[xi], layouts[yi]
    if (a.requires is None or len(ins[xi].shape) != 2 or len(ins[yi].shape) != 2 or lx.partial or ly.partial
            or (bi is not None and _is_tensor(ins[bi]))):
        return a
    cost_a = _gathered_elements(ins, layouts, a.requires, outs[0], a.out_layouts[0])
    if cost_a == 0:
        return a
    b = _contract_x_leads(name, ins, outs, layouts, yi, xi, None, not tb, not ta)
    cost_b = _gathered_elements(ins, layouts, b.requires if b.requires is not None else layouts,
                                outs[0], b.out_layouts[0])
    if cost_b >= cost_a:
        return a
    out_t = b.out_layouts[0]                     # the layout of out^T: transpose it back
    out = TensorLayout(out_t.device_matrix, tuple(reversed(out_t.tensor_map)), out_t.partial)
    return ShardingResult((out,), b.requires)


def _contract_x_leads(name, ins, outs, layouts, xi, yi, bi, ta, tb):
    """x @ y (NumPy matmul semantics, 1-d operands promoted, batch dims broadcast), with x or y
    read transposed (`ta`, `tb`), plus an optional bias `bi` broadcast to the output.

    Each device multiplies its blocks. The output's row dim (m) takes x's split, its column dim
    (n) y's, its batch dims the leading operand's; when the contracted dim (k) is split on the same
    axes in both, every device holds a partial product and the output is partial over those axes
    (Megatron's row-parallel linear; a column-parallel one splits n). The operands' k splits must
    agree: y follows x. A bias under a partial output is required partial too (each device adds its
    share, so the sum adds it once)."""
    dm = _check(name, ins, layouts)
    x, y = ins[xi], ins[yi]
    lx, ly = layouts[xi], layouts[yi]
    nx, ny = len(x.shape), len(y.shape)
    if nx == 1:
        xb, xm, xk = (), None, 0
    else:
        xb, xm, xk = tuple(range(nx - 2)), (nx - 1 if ta else nx - 2), (nx - 2 if ta else nx - 1)
    if ny == 1:
        yb, yk, yn = (), 0, None
    else:
        yb, yk, yn = tuple(range(ny - 2)), (ny - 1 if tb else ny - 2), (ny - 2 if tb else ny - 1)
    # a partial operand survives (the product is linear in it) when the other one is settled
    p_in, keep = (), None
    if lx.partial and not ly.partial:
        p_in, keep = lx.partial, xi
    elif ly.partial and not lx.partial:
        p_in, keep = ly.partial, yi
    used = set(p_in)
    rx = [tuple(a for a in lx.axes(d) if a not in used) for d in range(nx)]
    for d in range(nx):
        used.update(rx[d])
    ry = [()] * ny
    ry[yk] = rx[xk]
    nb = max(len(xb), len(yb))
    out_batch = []
    for d in range(nb):
        jx, jy = d - (nb - len(xb)), d - (nb - len(yb))
        x_full = jx >= 0 and (x.shape[jx] != 1 or outs[0].shape[d] == 1)
        y_full = jy >= 0 and y.shape[jy] != 1
        if x_full:
            out_batch.append(rx[jx])
            if y_full:
                ry[jy] = rx[jx]
        elif y_full:
            ry[jy] = tuple(a for a in ly.axes(jy) if a not in used)
            used.update(ry[jy])
            out_batch.append(ry[jy])
        else:
            out_batch.append(())
    if yn is not None:
        ry[yn] = tuple(a for a in ly.axes(yn) if a not in used)
        used.update(ry[yn])
    out_map = list(out_batch)
    if xm is not None:
        out_map.append(rx[xm])
    if yn is not None:
        out_map.append(ry[yn])
    partial = tuple(sorted(set(p_in) | set(rx[xk])))
    out = TensorLayout(dm, tuple(_entry(e) for e in out_map), partial)
    required = list(layouts)
    required[xi] = TensorLayout(dm, tuple(_entry(e) for e in rx), p_in if keep == xi else ())
    required[yi] = TensorLayout(dm, tuple(_entry(e) for e in ry), p_in if keep == yi else ())
    if bi is not None and _is_tensor(ins[bi]):
        bs, n = tuple(ins[bi].shape), len(out_map)
        off = n - len(bs)
        tm = tuple(NOT_SPLIT if (bs[j] == 1 and outs[0].shape[j + off] != 1) else out.tensor_map[j + off]
                   for j in range(len(bs)))
        required[bi] = TensorLayout(dm, tm, partial)
    return _answer(name, ins, layouts, required, (out,))


def matmul(name, ins, outs, layouts, attrs):
    """matmul / mm / bmm: input 0 @ input 1 (a `transpose_a` / `transpose_b` attribute, where the
    primitive has one, reads that operand transposed)."""
    return _contract(name, ins, outs, layouts, 0, 1, None,
                     bool(_attr(name, attrs, "transpose_a", False)), bool(_attr(name, attrs, "transpose_b", False)))


def dense(name, ins, outs, layouts, attrs):
    """dense(x, W, b) = x @ W^T + b: W is (out_features, in_features), read transposed."""
    return _contract(name, ins, outs, layouts, 0, 1, 2 if len(ins) > 2 else None, False, True)


def addmm(name, ins, outs, layouts, attrs):
    """addmm(input, mat1, mat2) = beta * input + alpha * mat1 @ mat2: `input` is the bias."""
    return _contract(name, ins, outs, layouts, 1, 2, 0, False, False)


# ------------------------------------------------------------------------------------------------
# shape ops
def _groups(in_shape, out_shape):
    """Pair runs of input dims with runs of output dims holding the same elements (row-major):
    [(in dims, out dims)]; None when a zero-size dim makes the pairing meaningless."""
    if 0 in in_shape or 0 in out_shape:
        return None
    groups, i, j = [], 0, 0
    ni, no = len(in_shape), len(out_shape)
    while i < ni and j < no:
        gi, gj = [i], [j]
        pi, po = in_shape[i], out_shape[j]
        i, j = i + 1, j + 1
        while pi != po:
            if pi < po:
                if i == ni:
                    return None
                gi.append(i)
                pi *= in_shape[i]
                i += 1
            else:
                if j == no:
                    return None
                gj.append(j)
                po *= out_shape[j]
                j += 1
        groups.append((gi, gj))
    # trailing size-1 dims belong to no group (they are never split)
    return groups


def reshape(name, ins, outs, layouts, attrs):
    """Same elements, new shape (reshape, flatten, squeeze, expand_dims).

    Runs of dims that hold the same elements are matched (merging (4, 6) -> 24 or splitting back).
    Each device's block stays a contiguous row-major piece of its run only if the run's split is on
    its leading (non-trivial) input dim and the split axes can be laid, major first, over the leading
    output dims of the run, filling each completely before the next (a split of 4 over 2 x 2 axes
    lands on (2, 6) as (axis, axis) ... ). Splits that cannot follow are required away; partial sums
    pass (a reshape is linear)."""
    dm = _check(name, ins, layouts)
    lx = layouts[0]
    in_shape, out_shape = tuple(ins[0].shape), tuple(outs[0].shape)
    req_map = [NOT_SPLIT] * len(in_shape)
    out_map = [NOT_SPLIT] * len(out_shape)
    groups = _groups(in_shape, out_shape)
    for gi, gj in groups or ():
        lead = next((d for d in gi if in_shape[d] != 1), None)
        if lead is None:
            continue
        placed = [[] for _ in gj]
        k, cur, kept = 0, 1, []
        for a in lx.axes(lead):
            s = lx.axis_size(a)
            while k < len(gj) and out_shape[gj[k]] == 1:
                k += 1
            if k == len(gj) or out_shape[gj[k]] % (cur * s):
                break                        # this axis would straddle two output dims
            placed[k].append(a)
            kept.append(a)
            cur *= s
            if cur == out_shape[gj[k]]:
                k, cur = k + 1, 1
        req_map[lead] = _entry(kept)
        for slot, axes in zip(gj, placed):
            out_map[slot] = _entry(axes)
    need = TensorLayout(dm, tuple(req_map), lx.partial)
    out = TensorLayout(dm, tuple(out_map), lx.partial)
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (out,), **_local_shape_attr(name, attrs, out, outs))


def _local_shape_attr(name, attrs, out, outs):
    """A `shape` attribute names the global shape; each device's kernel needs its block's."""
    if "shape" not in attrs:
        return {}
    return {"local_attrs": {"shape": out.local_shape(outs[0].shape, op=name)}}


def transpose(name, ins, outs, layouts, attrs):
    """Permute dims: the tensor map is permuted the same way (partial sums pass)."""
    _check(name, ins, layouts)
    lx = layouts[0]
    n = lx.ndim
    perm = tuple(p % n for p in attrs["perm"])
    return _answer(name, ins, layouts, layouts, (lx.with_map(tuple(lx.tensor_map[p] for p in perm)),))


def broadcast_to(name, ins, outs, layouts, attrs):
    """broadcast_to: new leading dims and stretched size-1 dims are not split (every device holds
    them whole); the other dims keep their split. Not linear (a partial value would be copied)."""
    _check(name, ins, layouts)
    lx = layouts[0].settled()
    out_shape, in_shape = tuple(outs[0].shape), tuple(ins[0].shape)
    off = len(out_shape) - len(in_shape)
    tm = (NOT_SPLIT,) * off + lx.tensor_map
    out = lx.with_map(tm)
    return _answer(name, ins, layouts, (lx,), (out,), **_local_shape_attr(name, attrs, out, outs))


def concat(name, ins, outs, layouts, attrs):
    """concat / stack: the joined axis unsplit; every input follows the first one's other splits
    (partial sums pass when all inputs share them)."""
    dm = _check(name, ins, layouts)
    first = layouts[0]
    stacking = len(outs[0].shape) == len(ins[0].shape) + 1
    ax = _axis(name, _attr(name, attrs, "axis", 0), len(outs[0].shape)) if stacking else _axis(name, _attr(name, attrs, "axis", 0),
                                                                                      len(ins[0].shape))
    same = all(lay.partial == first.partial for lay in layouts)
    partial = first.partial if same else ()
    tm = list(first.tensor_map)
    if not stacking:
        tm[ax] = NOT_SPLIT
    need = TensorLayout(dm, tuple(tm), partial)
    out_tm = tuple(tm[:ax]) + (NOT_SPLIT,) + tuple(tm[ax:]) if stacking else tuple(tm)
    return _answer(name, ins, layouts, (need,) * len(ins), (TensorLayout(dm, out_tm, partial),))


def split(name, ins, outs, layouts, attrs):
    """split: the cut axis unsplit; every piece keeps the other splits (partial sums pass)."""
    _check(name, ins, layouts)
    ax = _axis(name, _attr(name, attrs, "axis", 0), len(ins[0].shape))
    need = _without(layouts[0], (ax,), settle=False)
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (need,) * len(outs))


# ------------------------------------------------------------------------------------------------
# normalizations over an axis
def softmax(name, ins, outs, layouts, attrs):
    """softmax / log_softmax: each row needs all of its `axis`, so that axis is required unsplit
    (and the value settled: the op is not linear); the other dims keep their split."""
    _check(name, ins, layouts)
    ax = _axis(name, _attr(name, attrs, "axis", -1), len(ins[0].shape))
    need = _without(layouts[0], (ax,))
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (need,) * len(outs))


def _trailing_norm(name, ins, outs, layouts, k, affine):
    dm = _check(name, ins, layouts)
    nd = len(ins[0].shape)
    need = _without(layouts[0], range(nd - k, nd))
    required = [need] + [(_replicated_like(dm, ins[i]) if (i in affine and _is_tensor(ins[i])) else layouts[i])
                         for i in range(1, len(ins))]
    stats = need.with_map(need.tensor_map[:nd - k] + (NOT_SPLIT,) * k)
    return _answer(name, ins, layouts, required, [need] + [stats] * (len(outs) - 1))


def layer_norm(name, ins, outs, layouts, attrs):
    """layer_norm(x, weight, bias) over the trailing `normalized_shape` dims -> (y, mean, rstd):
    the normalized dims unsplit, weight and bias whole; y keeps x's other splits, the statistics
    (x's leading dims, size 1 at the normalized ones) too."""
    return _trailing_norm(name, ins, outs, layouts, len(attrs["normalized_shape"]), (1, 2))


def rms_norm(name, ins, outs, layouts, attrs):
    """rms_norm(x, gamma) over gamma's trailing dims -> (y, rstd): as layer_norm."""
    return _trailing_norm(name, ins, outs, layouts, len(ins[1].shape), (1,))


# ------------------------------------------------------------------------------------------------
# reductions
def _reduction(kind):
    """kind: 'sum' (a split reduced dim leaves a partial sum), 'mean' (the same, each device's mean
    scaled by 1 / split count), 'unsplit' (max, min, prod, logsumexp ...: not a sum of per-device
    parts, so the reduced dims are required unsplit and the value settled)."""

    def rule(name, ins, outs, layouts, attrs):
        _check(name, ins, layouts)
        lx = layouts[0]
        nd = len(ins[0].shape)
        axes = _reduced_axes(name, _attr(name, attrs, "axis", ()), nd)
        keep = bool(_attr(name, attrs, "keep_dims", False))
        if kind == "unsplit":
            need = _without(lx, axes)
            pending, scale = (), 1.0
        else:
            need = lx
            pending = set(lx.partial)
            count = 1
            for d in axes:
                pending.update(lx.axes(d))
                count *= lx.splits(d)
            scale = 1.0 / count if kind == "mean" else 1.0
        tm = tuple((NOT_SPLIT if d in axes else need.tensor_map[d]) for d in range(nd) if keep or d not in axes)
        out = TensorLayout(need.device_matrix, tm, tuple(sorted(pending)))
        return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (out,) * len(outs), scale=scale)

    rule.__name__ = rule.__qualname__ = f"reduce_{kind}"
    return rule


reduce_sum = _reduction("sum")
reduce_mean = _reduction("mean")
reduce_unsplit = _reduction("unsplit")


# ------------------------------------------------------------------------------------------------
# lookups
def embedding(name, ins, outs, layouts, attrs):
    """embedding(ids, table): out = table[ids], shape ids.shape + (hidden,).

    The ids' splits carry to the output's leading dims. A table split along hidden splits the
    output's last dim. A table split along the vocabulary (Megatron's vocabulary-parallel
    embedding) makes each device look up only the rows it holds (a `MaskedLookup`, zero rows for the
    others' ids): the output is a partial sum over those axes. Axes the ids already use are required
    away from the table."""
    dm = _check(name, ins, layouts)
    li, lw = layouts[0].settled(), layouts[1].settled()
    used = set(li.used_axes())
    vocab = tuple(a for a in lw.axes(0) if a not in used)
    used.update(vocab)
    hidden = tuple(a for a in lw.axes(1) if a not in used)
    need_w = TensorLayout(dm, (_entry(vocab), _entry(hidden)))
    out = TensorLayout(dm, li.tensor_map + (_entry(hidden),), vocab)
    required = (li, need_w) + tuple(layouts[2:])
    return _answer(name, ins, layouts, required, (out,), lookup=MaskedLookup(1, 0, 0) if vocab else None)


def gather(name, ins, outs, layouts, attrs):
    """gather(params, indices, axis, batch_dims): out = params[..., indices, ...] along `axis`,
    shape params[:axis] + indices[batch_dims:] + params[axis+1:].

    params' other dims keep their splits; indices' dims carry theirs (their batch dims must match
    params'); params split along `axis` gives a masked lookup with a partial output (see embedding)."""
    dm = _check(name, ins, layouts)
    lp, li = layouts[0].settled(), layouts[1].settled()
    nd, ni = len(ins[0].shape), len(ins[1].shape)
    ax = _axis(name, attrs["axis"], nd)
    b = int(_attr(name, attrs, "batch_dims", 0))
    used = set(lp.used_axes())
    ri = [lp.axes(d) if d < b else tuple(a for a in li.axes(d) if a not in used) for d in range(ni)]
    for d in range(b, ni):
        used.update(ri[d])
    need_i = TensorLayout(dm, tuple(_entry(e) for e in ri))
    looked = lp.axes(ax)
    out_map = lp.tensor_map[:ax] + need_i.tensor_map[b:] + lp.tensor_map[ax + 1:]
    out = TensorLayout(dm, out_map, looked)
    required = (lp, need_i) + tuple(layouts[2:])
    return _answer(name, ins, layouts, required, (out,), lookup=MaskedLookup(0, 1, ax, b) if looked else None)


# ------------------------------------------------------------------------------------------------
# losses
def cross_entropy(name, ins, outs, layouts, attrs):
    """cross_entropy / nll_loss(x, target, weight): x is (N, C, d1 ...) or (C,).

    The class dim C is required unsplit (a row's log-sum-exp needs every class: the vocabulary-
    parallel loss of Megatron is a composition of several ops, not this one). The batch and spatial
    dims keep their splits; the target follows x, the class weights are whole. reduction='none'
    keeps the split per-element losses; 'sum' leaves a partial sum over x's split axes; 'mean' a
    partial sum of each device's mean scaled by 1 / (number of blocks) - exact when every block has
    the same total target weight (probability targets, no class weights, no ignore_index hits),
    which is what data parallelism assumes too (the result's `note` says so)."""
    dm = _check(name, ins, layouts)
    x, target = ins[0], ins[1]
    nd = len(x.shape)
    cd = 1 if nd >= 2 else 0
    need = _without(layouts[0], (cd,))
    rows = need.tensor_map[:cd] + need.tensor_map[cd + 1:]
    same_shape = tuple(target.shape) == tuple(x.shape)
    need_t = need if same_shape else TensorLayout(dm, rows)
    required = [need, need_t] + [(_replicated_like(dm, v) if _is_tensor(v) else layouts[i])
                                 for i, v in enumerate(ins[2:], start=2)]
    reduction = _attr(name, attrs, "reduction", "mean")
    scale, note = 1.0, ""
    if reduction == "none":
        out = TensorLayout(dm, rows)
    else:
        axes = tuple(sorted(need.used_axes()))
        out = TensorLayout(dm, (), axes)
        if reduction == "mean" and axes:
            blocks = 1
            for d in range(nd):
                blocks *= need.splits(d)
            scale = 1.0 / blocks
            if not same_shape:
                note = ("mean over a split batch: exact when every block holds the same total target weight "
                        "(no class weights, no ignore_index hits)")
    return _answer(name, ins, layouts, required, (out,), scale=scale, note=note)


# ------------------------------------------------------------------------------------------------
# ops that need some dims whole on every device, and are otherwise a simpler rule's kind
def _whole_dims_then(label, inner, dims_of, doc):
    """`inner`'s rule after removing the splits of the dims `dims_of(ins, attrs)` names (counted
    from the right of the first tensor input's rank, so they line up with broadcast operands) from
    every tensor input: rotations of feature pairs, triangles of matrices, flips, scans ..."""

    def rule(name, ins, outs, layouts, attrs):
        _check(name, ins, layouts)
        n = len(ins[0].shape)
        from_right = [n - d for d in dims_of(name, ins, attrs)]            # 1 = the last dim
        adjusted = []
        for x, lay in zip(ins, layouts):
            if lay is None:
                adjusted.append(None)
                continue
            k = len(x.shape)
            adjusted.append(_without(lay, [k - r for r in from_right if 0 < r <= k], settle=False))
        res = inner(name, ins, outs, tuple(adjusted), attrs)
        need = res.requires if res.requires is not None else tuple(adjusted)
        return _answer(name, ins, layouts, need, res.out_layouts, scale=res.scale, lookup=res.lookup,
                       local_attrs=res.local_attrs, note=res.note)

    rule.__doc__ = doc
    rule.__name__ = rule.__qualname__ = label
    return rule


def _last_dim(name, ins, attrs):
    return (len(ins[0].shape) - 1,) if len(ins[0].shape) else ()


def _last_two_dims(name, ins, attrs):
    n = len(ins[0].shape)
    return tuple(range(max(n - 2, 0), n))


def _axis_attr(key, default):
    def dims(name, ins, attrs):
        n = len(ins[0].shape)
        return (_axis(name, _attr(name, attrs, key, default), n),) if n else ()
    return dims


def _dims_attr(name, ins, attrs):
    n = len(ins[0].shape)
    dims = _attr(name, attrs, "dims", ())
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return tuple(_axis(name, d, n) for d in dims)


rotary = _whole_dims_then(
    "rotary", elementwise_quotient, _last_dim,
    """rotary_position_embedding(x, cos, sin): x * cos + rotate(x) * sin, the rotation pairing
    features across the head dim, so that (last) dim is required whole; the other dims split as an
    elementwise op's (cos/sin follow x where they are not broadcast). Linear in x alone, so a
    partial x passes when cos and sin are settled.""")
rotate_pairs = _whole_dims_then(
    "rotate_pairs", linear_pointwise, _last_dim,
    """rope_rotate(u): every feature pair rotated by 90 degrees along the last dim (required whole);
    linear, so partial sums pass.""")
gated = _whole_dims_then(
    "gated", pointwise, _axis_attr("dim", -1),
    """swiglu(x, dim): silu(first half) * second half along `dim`: that dim is required whole (the
    halves sit at opposite ends of it); the output, half as long there, keeps the other splits.""")
triangle = _whole_dims_then(
    "triangle", linear_pointwise, _last_two_dims,
    """tril / triu: the matrix dims (last two) whole, since the zeroed triangle depends on global
    row and column indices; batch dims keep their split; linear (partial sums pass).""")
flip = _whole_dims_then(
    "flip", linear_pointwise, _dims_attr,
    """flip(x, dims): the reversed dims whole (a device's block would land elsewhere); linear.""")
scan = _whole_dims_then(
    "scan", pointwise, _axis_attr("axis", 0),
    """cumsum / cumprod / cummax / logcumsumexp along `axis`: each element depends on everything
    before it along the axis, which is required whole; the other dims keep their split.""")
rowwise = _whole_dims_then(
    "rowwise", pointwise, _axis_attr("axis", -1),
    """sort / topk along `axis` (all outputs laid out alike): the axis whole, the rest split.""")


def rowwise_pair(name, ins, outs, layouts, attrs):
    """softmax_grad / log_softmax_grad(y, dout, axis): both inputs (same shape) follow the first
    with `axis` whole and settled; the output is laid out like them."""
    dm = _check(name, ins, layouts)
    ax = _axis(name, _attr(name, attrs, "axis", -1), len(ins[0].shape))
    need = _without(layouts[0], (ax,))
    required = [need if (_is_tensor(x) and tuple(x.shape) == tuple(ins[0].shape)) else
                (_replicated_like(dm, x) if _is_tensor(x) else None) for x in ins]
    return _answer(name, ins, layouts, required, (need,) * len(outs))


def add_rms_norm(name, ins, outs, layouts, attrs):
    """add_rms_norm(x1, x2, gamma) -> (y, rstd, x1 + x2): x2 follows x1, gamma's (trailing) dims
    whole and gamma replicated; y and the sum keep x1's other splits, rstd too (size 1 at the
    normalized dims). Settled inputs (the norm is not linear)."""
    dm = _check(name, ins, layouts)
    nd, k = len(ins[0].shape), len(ins[2].shape)
    need = _without(layouts[0], range(nd - k, nd))
    stats = need.with_map(need.tensor_map[:nd - k] + (NOT_SPLIT,) * k)
    required = (need, need, _replicated_like(dm, ins[2])) + tuple(layouts[3:])
    return _answer(name, ins, layouts, required, (need, stats, need))


def _norm_grad(name, ins, outs, layouts, x_i, row_like, stats_like, affine, k):
    """A normalization's fused backward: the inputs shaped like x follow x (normalized dims whole,
    settled), the saved statistics follow x's rows, the affine parameters are whole; dx is laid
    out like x, and each parameter gradient (a sum over the rows) is a partial sum over the axes
    that split x's rows."""
    dm = _check(name, ins, layouts)
    nd = len(ins[x_i].shape)
    need = _without(layouts[x_i], range(nd - k, nd))
    stats = need.with_map(need.tensor_map[:nd - k] + (NOT_SPLIT,) * k)
    required = list(layouts)
    for i, x in enumerate(ins):
        if not _is_tensor(x):
            continue
        required[i] = need if i in row_like else stats if i in stats_like else _replicated_like(dm, x)
    rows = tuple(sorted(need.used_axes()))
    grads = tuple(TensorLayout(dm, (NOT_SPLIT,) * len(o.shape), rows) for o in outs[1:])
    return _answer(name, ins, layouts, required, (need,) + grads)


def rms_norm_grad(name, ins, outs, layouts, attrs):
    """rms_norm_grad(dy, drstd, x, gamma) -> (dx, dgamma): see `_norm_grad`."""
    return _norm_grad(name, ins, outs, layouts, 2, (0, 2), (1,), (3,), len(ins[3].shape))


def layer_norm_grad(name, ins, outs, layouts, attrs):
    """layer_norm_grad(dy, x, weight, mean, rstd) -> (dx, dweight, dbias): see `_norm_grad`."""
    return _norm_grad(name, ins, outs, layouts, 1, (0, 1), (3, 4), (2,), len(attrs["normalized_shape"]))


def embedding_grad(name, ins, outs, layouts, attrs):
    """embedding_grad(dout, ids) -> the (num_weights, hidden) table gradient, a scatter-add of the
    rows of dout at the ids. Each device scatters its own tokens: the table gradient is a partial
    sum over the axes that split the ids (the data-parallel gradient sum, found by the rule), and
    dout's hidden split carries to the gradient's columns. dout follows the ids on its leading dims
    and may itself be partial (the op is linear in it). `scale_grad_by_freq` divides by counts over
    the whole batch, which a device cannot see: the ids are then required whole."""
    dm = _check(name, ins, layouts)
    ld, li = layouts[0], layouts[1].settled()
    if _attr(name, attrs, "scale_grad_by_freq", False):
        li = li.with_map((NOT_SPLIT,) * li.ndim)
    part = () if set(ld.partial) & li.used_axes() else ld.partial       # (an axis cannot split and sum)
    used = set(li.used_axes()) | set(part)
    hidden = tuple(a for a in ld.axes(ld.ndim - 1) if a not in used)
    need_d = TensorLayout(dm, li.tensor_map + (_entry(hidden),), part)
    out = TensorLayout(dm, (NOT_SPLIT, _entry(hidden)), tuple(sorted(set(part) | set(li.used_axes()))))
    return _answer(name, ins, layouts, (need_d, li) + tuple(layouts[2:]), (out,))


def _loss_grad(name, ins, outs, layouts, attrs, x_shape, lead, target_i, weight_i, dout_i):
    """The layouts of a loss's fused backward (cross_entropy_grad, nll_loss_grad): the input-shaped
    outputs split like the loss input `lead` (class dim whole), the target following it, the class
    weights whole, the loss cotangent laid out like the forward's loss (the rows for
    reduction='none', else a replicated scalar). The gradient of a *mean* over split rows needs the
    global count (or total target weight), which no device has, and its two outputs would need
    different scales (log_softmax is not scaled): so a 'mean' requires the rows whole."""
    dm = _check(name, ins, layouts)
    nd = len(x_shape)
    cd = 1 if nd >= 2 else 0
    reduction = _attr(name, attrs, "reduction", "mean")
    need = _without(lead, (cd,))
    if reduction == "mean":
        need = TensorLayout(dm, (NOT_SPLIT,) * nd)
    rows = TensorLayout(dm, need.tensor_map[:cd] + need.tensor_map[cd + 1:])
    target = ins[target_i]
    required = list(layouts)
    for i, x in enumerate(ins):
        if not _is_tensor(x):
            continue
        if i == target_i:
            required[i] = need if tuple(target.shape) == tuple(x_shape) else rows
        elif i == dout_i:
            required[i] = rows if reduction == "none" else TensorLayout(dm, (NOT_SPLIT,) * len(x.shape))
        elif i == weight_i:
            required[i] = _replicated_like(dm, x)
        else:
            required[i] = need
    return dm, need, required


def cross_entropy_grad(name, ins, outs, layouts, attrs):
    """cross_entropy_grad(dout, x, target, weight) -> (dx, log_softmax(x)): see `_loss_grad`."""
    _, need, required = _loss_grad(name, ins, outs, layouts, attrs, tuple(ins[1].shape), layouts[1], 2, 3, 0)
    return _answer(name, ins, layouts, required, (need,) * len(outs))


def nll_loss_grad(name, ins, outs, layouts, attrs):
    """nll_loss_grad(dout, target, weight) -> d log-probabilities of shape `input_shape`: laid out
    from the target's rows (the class dim whole); see `_loss_grad`. Each device's kernel gets its
    block's `input_shape`."""
    dm = _check(name, ins, layouts)
    x_shape = tuple(attrs["input_shape"])
    lt = layouts[1].settled()
    cd = 1 if len(x_shape) >= 2 else 0
    if tuple(ins[1].shape) == x_shape:
        lead = lt
    else:
        lead = TensorLayout(dm, lt.tensor_map[:cd] + (NOT_SPLIT,) + lt.tensor_map[cd:])
    _, need, required = _loss_grad(name, ins, outs, layouts, attrs, x_shape, lead, 1, 2, 0)
    return _answer(name, ins, layouts, required, (need,),
                   local_attrs={"input_shape": need.local_shape(x_shape, op=name)})


def gather_grad(name, ins, outs, layouts, attrs):
    """gather_grad(dout, indices) -> the params-shaped scatter-add of dout at the indices along
    `axis` (gather's backward). dout is params[:axis] + indices[batch_dims:] + params[axis+1:];
    its splits of the params dims carry to the output, the gathered axis is whole, and the indices
    follow dout's splits of their dims: each device scatters its own rows, so the output is a
    partial sum over the axes that split the indices' non-batch dims (plus dout's own partial:
    the op is linear in dout). Each device's kernel gets its block's `shape`."""
    dm = _check(name, ins, layouts)
    shape = tuple(outs[0].shape)
    nd, ni = len(shape), len(ins[1].shape)
    ax = _axis(name, attrs["axis"], nd)
    b = int(_attr(name, attrs, "batch_dims", 0))
    ld = layouts[0]
    looked = list(range(ax, ax + ni - b))                      # dout's dims that came from the indices
    ri = [ld.axes(d) for d in range(b)] + [ld.axes(d) for d in looked]
    out_map = [ld.axes(d) for d in range(ax)] + [()] + [ld.axes(ax + ni - b + j) for j in range(nd - ax - 1)]
    partial = set(ld.partial)
    for d in looked:
        partial.update(ld.axes(d))
    need_i = TensorLayout(dm, tuple(_entry(e) for e in ri))
    out = TensorLayout(dm, tuple(_entry(e) for e in out_map), tuple(sorted(partial)))
    return _answer(name, ins, layouts, (ld, need_i) + tuple(layouts[2:]), (out,),
                   local_attrs={"shape": out.local_shape(shape, op=name)})


def _basic_index_map(spec, in_shape):
    """For a basic index spec (ints, slices, None, Ellipsis; see ops/prims/_indexspec.py): per input
    dim, (its output dim or None when an int removes it, whether the item takes the dim whole - a
    full slice - so a split of it can stay); and the output rank. None when the spec holds an
    advanced (tensor) index."""
    n = len(in_shape)
    if any(hasattr(e, "position") for e in spec):
        return None
    n_indexing = sum(1 for e in spec if e is not None and e is not Ellipsis)
    dims, d, o = {}, 0, 0
    for e in spec:
        if e is Ellipsis:
            for _ in range(n - n_indexing):
                dims[d] = (o, True)
                d, o = d + 1, o + 1
        elif e is None:
            o += 1
        elif hasattr(e, "start"):
            start, stop, step = e
            full = start in (None, 0) and step in (None, 1) and (stop is None or stop >= in_shape[d])
            dims[d] = (o, full)
            d, o = d + 1, o + 1
        else:                                 # an int
            dims[d] = (None, False)
            d += 1
    while d < n:
        dims[d] = (o, True)
        d, o = d + 1, o + 1
    return dims, o


def getitem(name, ins, outs, layouts, attrs):
    """x[index] with a basic index (ints, slices, None, Ellipsis): a dim taken whole by a full slice
    keeps its split (the same spec works on every block), a dim cut by an int or a partial slice is
    required whole (the slice bounds are global positions); new axes are not split; linear
    (partial sums pass). An advanced (tensor) index gathers arbitrary elements: everything is
    required whole."""
    dm = _check(name, ins, layouts)
    lx = layouts[0]
    plan = _basic_index_map(attrs["spec"], tuple(ins[0].shape))
    if plan is None:
        required = [_replicated_like(dm, x) if _is_tensor(x) else None for x in ins]
        return _answer(name, ins, layouts, required, tuple(TensorLayout(dm, (NOT_SPLIT,) * len(o.shape)) for o in outs))
    dims, n_out = plan
    need_map, out_map = [NOT_SPLIT] * lx.ndim, [NOT_SPLIT] * n_out
    for d, (o, full) in dims.items():
        if full:
            need_map[d] = lx.tensor_map[d]
            out_map[o] = lx.tensor_map[d]
    need = TensorLayout(dm, tuple(need_map), lx.partial)
    return _answer(name, ins, layouts, (need,) + tuple(layouts[1:]), (TensorLayout(dm, tuple(out_map), lx.partial),))


def getitem_grad(name, ins, outs, layouts, attrs):
    """getitem's backward, dout scattered into zeros of `shape` (x's): for a basic index the
    inverse of `getitem` - x's dims taken whole by full slices take dout's split, dout's other dims
    are required whole - and each device's kernel gets its block's `shape`; linear in dout. An
    advanced index: everything whole."""
    dm = _check(name, ins, layouts)
    shape = tuple(attrs["shape"])
    ld = layouts[0]
    plan = _basic_index_map(attrs["spec"], shape)
    if plan is None:
        required = [_replicated_like(dm, x) if _is_tensor(x) else None for x in ins]
        return _answer(name, ins, layouts, required, (TensorLayout(dm, (NOT_SPLIT,) * len(shape)),))
    dims, n_out = plan
    need_map, out_map = [NOT_SPLIT] * n_out, [NOT_SPLIT] * len(shape)
    for d, (o, full) in dims.items():
        if full:
            need_map[o] = ld.tensor_map[o]
            out_map[d] = ld.tensor_map[o]
    out = TensorLayout(dm, tuple(out_map), ld.partial)
    return _answer(name, ins, layouts, (TensorLayout(dm, tuple(need_map), ld.partial),) + tuple(layouts[1:]), (out,),
                   local_attrs={"shape": out.local_shape(shape, op=name)})


planewise = _whole_dims_then(
    "planewise", pointwise, _last_two_dims,
    """Pooling and resizing of the (H, W) planes (max/avg/adaptive pools, interpolate): each
    (batch, channel) plane is independent, so the leading dims keep their split and the two
    spatial dims are required whole; every output (pooled values, argmax positions in the plane)
    is laid out alike.""")


def one_hot(name, ins, outs, layouts, attrs):
    """one_hot(indices, on_value, off_value, depth, axis): the indices' splits carry to the output,
    the new `depth` dim (inserted at `axis`, -1 = last) is not split."""
    dm = _check(name, ins, layouts)
    li = layouts[0].settled()
    nd = li.ndim
    ax = int(_attr(name, attrs, "axis", -1))
    ax = nd if ax == -1 else ax
    out = TensorLayout(dm, li.tensor_map[:ax] + (NOT_SPLIT,) + li.tensor_map[ax:])
    return _answer(name, ins, layouts, (li,) + tuple(layouts[1:]), (out,))


def _conv_batch(lay, nd):
    """A conv input's layout with only the batch dim (N of a 4-d NCHW tensor) kept split."""
    keep = lay.tensor_map[0] if nd == 4 else NOT_SPLIT
    return TensorLayout(lay.device_matrix, (keep,) + (NOT_SPLIT,) * (nd - 1))


def conv2d(name, ins, outs, layouts, attrs):
    """conv2d(x, w): data parallel over the batch - x's N split (a 4-d NCHW input) carries to the
    output; channels are contracted and the windows cross the spatial dims, so the rest of x is
    required whole and the weight replicated."""
    dm = _check(name, ins, layouts)
    need = _conv_batch(layouts[0], len(ins[0].shape))
    required = (need, _replicated_like(dm, ins[1])) + tuple(layouts[2:])
    return _answer(name, ins, layouts, required, (_conv_batch(need, len(outs[0].shape)),))


def conv2d_backprop_input(name, ins, outs, layouts, attrs):
    """conv2d_backprop_input(dy, w) -> dx of `x_shape`: dy's batch split carries to dx (each
    device's kernel gets its block's `x_shape`); w replicated."""
    dm = _check(name, ins, layouts)
    need = _conv_batch(layouts[0], len(ins[0].shape))
    out = _conv_batch(need, len(outs[0].shape))
    required = (need, _replicated_like(dm, ins[1])) + tuple(layouts[2:])
    return _answer(name, ins, layouts, required, (out,),
                   local_attrs={"x_shape": out.local_shape(outs[0].shape, op=name)})


def conv2d_backprop_filter(name, ins, outs, layouts, attrs):
    """conv2d_backprop_filter(dy, x) -> dw: dy and x split over the batch alike; the filter
    gradient sums over the batch, so it is a partial sum over the batch's axes."""
    dm = _check(name, ins, layouts)
    need = _conv_batch(layouts[0], len(ins[0].shape))
    need_x = _conv_batch(need, len(ins[1].shape)) if len(ins[1].shape) == len(ins[0].shape) else \
        _replicated_like(dm, ins[1])
    if need_x.is_replicated():
        need = _replicated_like(dm, ins[0])
    out = TensorLayout(dm, (NOT_SPLIT,) * len(outs[0].shape), tuple(sorted(need.used_axes())))
    return _answer(name, ins, layouts, (need, need_x) + tuple(layouts[2:]), (out,))


_FA_DIMS = {"BNSD": (0, 1), "BSND": (0, 2), "BSH": (0, 2), "SBH": (1, 2)}     # (batch dim, heads dim)


def _attention_splits(name, q, k, lq, attrs):
    """(batch dim, heads dim, batch axes, head axes) a flash attention call can be split over:
    q's splits of its batch and heads dims, the heads split only when it divides both the query
    and the key/value head numbers (GQA groups stay on one device), nothing when the call cannot be
    cut (an unknown layout, per-batch `prefix` lengths, dropout drawn without a mask)."""
    layout = _attr(name, attrs, "input_layout", "BSH")
    if layout not in _FA_DIMS:
        return None
    bd, hd = _FA_DIMS[layout]
    n1 = int(attrs["head_num"])
    if layout in ("BSH", "SBH"):
        d = q.shape[2] // n1
        n2 = k.shape[2] // d
    else:
        n2 = k.shape[hd]
    batch = lq.axes(bd)
    if _attr(name, attrs, "prefix", None) is not None:
        batch = ()
    heads = lq.axes(hd)
    split = 1
    for a in heads:
        split *= lq.axis_size(a)
    if n1 % split or n2 % split:
        heads = ()
    return bd, hd, batch, heads, n1, n2


def _fa_plan(name, ins, outs, layouts, attrs, qi, ki, vi, like_q, like_lse, shift_i, drop_i, mask_i):
    dm = _check(name, ins, layouts)
    q, k = ins[qi], ins[ki]
    lq = layouts[qi].settled()
    random_dropout = _attr(name, attrs, "keep_prob", 1.0) < 1.0 and not _is_tensor(ins[drop_i])
    plan = None if random_dropout else _attention_splits(name, q, k, lq, attrs)
    if plan is None:
        bd, hd, batch, heads, n1 = 0, 1, (), (), int(attrs["head_num"])
    else:
        bd, hd, batch, heads, n1, _ = plan
    nq = len(q.shape)
    b = q.shape[bd]
    heads_split = 1
    for a in heads:
        heads_split *= lq.axis_size(a)

    def qmap(n):
        tm = [NOT_SPLIT] * n
        tm[bd], tm[hd] = _entry(batch), _entry(heads)
        return TensorLayout(dm, tuple(tm))

    def bias(x, part=False):
        """A (B|1, N1|1, S1, S2) bias/mask, (B|1, S1, S2) mask or a 2-d one: split where not broadcast."""
        sh = tuple(x.shape)
        tm = [NOT_SPLIT] * len(sh)
        bcast = []
        if len(sh) in (3, 4):
            if sh[0] == b and b > 1:
                tm[0] = _entry(batch)
            else:
                bcast.extend(batch)
        else:
            bcast.extend(batch)
        if len(sh) == 4:
            if sh[1] == n1 and n1 > 1:
                tm[1] = _entry(heads)
            else:
                bcast.extend(heads)
        elif len(sh) in (2, 3):
            bcast.extend(heads)
        return TensorLayout(dm, tuple(tm), tuple(sorted(bcast)) if part else ())

    lse_lay = TensorLayout(dm, (_entry(batch), _entry(heads), NOT_SPLIT))
    required = list(layouts)
    for i, x in enumerate(ins):
        if not _is_tensor(x):
            continue
        if i in (qi, ki, vi) or i in like_q:
            required[i] = qmap(nq)
        elif i in like_lse:
            required[i] = lse_lay
        elif i in (shift_i, drop_i, mask_i):
            required[i] = bias(x)
        else:
            required[i] = _replicated_like(dm, x)       # the dropout seed
    local = {**attrs, "head_num": n1 // heads_split} if heads_split > 1 else None
    return dm, required, qmap(nq), lse_lay, bias, local


def flash_attention(name, ins, outs, layouts, attrs):
    """flash_attention_score(q, k, v, real_shift, drop_mask, attn_mask) -> (out, softmax_lse, seed).

    Attention is independent per batch entry and per head: q's splits of the batch dim and the
    heads dim (H for the BSH / SBH layouts: a split of H into whole heads) carry to k and v, to the
    batch/head dims of the bias and masks where they are not broadcast, to the output (q's layout)
    and to softmax_lse (B, N1, S1); each device's kernel runs with `head_num` / split. A heads split
    must divide the key/value head number too (a GQA group stays on one device). The sequence and
    head-size dims are required whole (causal bands and the softmax need all positions), as is
    everything when dropout is drawn inside the kernel (no drop_mask) or `prefix` lists per-batch
    lengths. The inputs are required settled."""
    dm, required, out, lse, _, local = _fa_plan(name, ins, outs, layouts, attrs, 0, 1, 2, (), (), 3, 4, 5)
    seed = TensorLayout(dm, ())
    return _answer(name, ins, layouts, required, (out, lse, seed)[:len(outs)], local_attrs=local)


def flash_attention_grad(name, ins, outs, layouts, attrs):
    """flash_attention_score_grad(dout, dlse, q, k, v, out, lse, seed, real_shift, drop_mask,
    attn_mask) -> (dq, dk, dv[, d real_shift]): split as the forward (`flash_attention`) over q's
    batch/heads splits. The bias gradient sums over the dims the bias broadcasts along, so where
    a split batch or heads dim is broadcast in the bias, its gradient is a partial sum over those
    axes."""
    dm, required, q_lay, _, bias, local = _fa_plan(name, ins, outs, layouts, attrs, 2, 3, 4, (0, 5), (1, 6),
                                                   8, 9, 10)
    out = [q_lay, q_lay, q_lay]
    if len(outs) > 3:
        out.append(bias(ins[8], part=True))
    return _answer(name, ins, layouts, required, tuple(out), local_attrs=local)


__all__ = ["pointwise", "linear_pointwise", "cast", "shape_only", "elementwise", "elementwise_sum",
           "elementwise_product", "elementwise_quotient", "matmul", "dense", "addmm", "reshape", "transpose",
           "broadcast_to", "concat", "split", "softmax", "layer_norm", "rms_norm", "reduce_sum", "reduce_mean",
           "reduce_unsplit", "embedding", "gather", "cross_entropy", "rotary", "rotate_pairs", "gated", "triangle",
           "flip", "scan", "rowwise", "rowwise_pair", "add_rms_norm", "rms_norm_grad", "layer_norm_grad",
           "embedding_grad", "flash_attention", "flash_attention_grad", "cross_entropy_grad", "nll_loss_grad",
           "gather_grad", "getitem", "getitem_grad", "planewise", "one_hot", "conv2d", "conv2d_backprop_input",
           "conv2d_backprop_filter"]
