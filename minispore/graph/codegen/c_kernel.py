"""Generate the C source of one fused kernel from a `KernelSpec` (built by passes/fusion.py).

The iteration space is the group's *domain* `D` (the shape of its full-size values), seen as a
matrix of `R` rows by `C` columns: the last `split` dimensions are the columns (for a group with
a reduction, exactly the reduced axes). Every kernel is one loop over rows; per row:

    for (long r = 0; r < R; r++) {
        <per-row input offsets; inputs broadcast along the columns are loaded once here>
        <row values of level 0>
        stage 1: for c in 0..C: compute the elementwise values the level-1 reductions need,
                 accumulate them (sum in double, max/min with NaN propagation)
        <row values of level 1: e.g. rsqrt(mean + eps)>  ... stage 2 ...
        final:   for c in 0..C: compute the full-size outputs, store each once
        <row outputs: store each once>
    }

A full-size value one pass computes and a later pass needs (softmax's `exp(x - max)`, needed by
the sum and by the division) is kept in a row buffer `s<i>[C]` (on the stack, in L1) when a row
is at most STASH_BYTES long; longer rows recompute it.

A pure elementwise group has no stages: just the final loop. Each input is read from memory once
per row (later passes over the same row hit the cache), each output written once. Values inside
the loop are C locals (`v3`), never memory. Loops carry `#pragma omp simd` (compiled with
`-fopenmp-simd`: vectorization only, no threads) so they vectorize, calling glibc's vector math
(libmvec) for exp/tanh/erf...

Broadcasting is by strides, resolved at generation time (shapes are static): an input's offset is
`base(r) + col(c)`, where the column part is `c` (the input has the domain's trailing shape),
absent (broadcast along the columns) or, rarely, a div/mod expression (a partial broadcast inside
the columns).

Operand references in a spec: `("i", j)` input j, `("m", i)` member i's value, `("c", value)` a
Python constant (None for clamp's missing bound).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from . import c_types as T

STASH_BYTES = 16384     # a row this short keeps values between passes in a stack buffer (in L1)


@dataclass
class InputSpec:
    ctype: T.CType
    shape: tuple                 # the shape the kernel reads (a reshape member may reinterpret it)
    strides: tuple = None        # element strides of that shape in the buffer (None: C order; a
                                 # transpose member reads its input's buffer with permuted strides)
    nelems: int = None           # elements in the buffer (default: the product of `shape`)

    @property
    def buffer_elems(self):
        return self.nelems if self.nelems is not None else _prod(self.shape)


@dataclass
class MemberSpec:
    op: str                      # the primitive's name, for people (the kernel's comment line)
    ctype: T.CType               # output type
    role: str                    # "domain" (domain-shaped), "row" (one value per row), "reduce"
    operands: list               # ("i", j) | ("m", i) | ("c", value)
    attrs: dict = field(default_factory=dict)
    rule: object = None          # the primitive's FusionRule (minispore/ops/c_expr.py): its C
                                 # expression, or how it accumulates when it is a reduction


@dataclass
class KernelSpec:
    name: str                    # for people: "fused_elementwise_3"
    domain: tuple
    split: int                   # number of trailing dims that form the columns
    inputs: list                 # InputSpec
    members: list                # MemberSpec, in a valid evaluation order
    outputs: list                # member indices whose values the kernel writes

    @property
    def rows(self):
        return _prod(self.domain[:len(self.domain) - self.split])

    @property
    def cols(self):
        return _prod(self.domain[len(self.domain) - self.split:])


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


# -- input addressing ---------------------------------------------------------------------------
def _strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return list(reversed(out))


def _index_terms(var, dims, in_dims, in_strides):
    """Offset terms for flat index `var` over `dims` (C order) into an input with `in_dims`
    (1 = broadcast) and `in_strides`."""
    terms, inner = [], 1
    for d, ind, st in reversed(list(zip(dims, in_dims, in_strides))):
        if ind != 1 and d != 1:
            idx = var if inner == 1 else f"({var} / {inner}L)"
            if inner * d != _prod(dims):          # not the outermost: wrap
                idx = f"({idx} % {d}L)"
            terms.append(idx if st == 1 else f"{idx} * {st}L")
        inner *= d
    return " + ".join(reversed(terms)) if terms else "0"


class _Access:
    """Where input j's element (r, c) is: `base` (per row) and the column kind/expression."""

    def __init__(self, shape, domain, split, strides=None):
        nd = len(domain)
        pad = nd - len(shape)
        aligned = (1,) * pad + tuple(shape)
        st = [0] * pad + list(strides if strides is not None else _strides(tuple(shape)))
        st = [0 if d == 1 else x for d, x in zip(aligned, st)]          # a size-1 dim is never stepped
        rdims, cdims = domain[:nd - split], domain[nd - split:]
        r_in, c_in = aligned[:nd - split], aligned[nd - split:]
        r_st, c_st = st[:nd - split], st[nd - split:]
        c_order = [0 if d == 1 else x for d, x in zip(aligned, _strides(aligned))]
        c_size = _prod(c_in)
        if tuple(r_in) == tuple(rdims) and r_st == c_order[:nd - split]:
            self.base = f"r * {c_size}L" if c_size != 1 else "r"
        elif all(s == 1 for s in r_in):
            self.base = "0"
        else:
            self.base = _index_terms("r", rdims, r_in, r_st)
        if tuple(c_in) == tuple(cdims) and _prod(cdims) != 1 and c_st == c_order[nd - split:]:
            self.col = "contig"
        elif all(s == 1 for s in c_in):
            self.col = "bcast"
        else:
            self.col = "general"
            self.col_expr = _index_terms("c", cdims, c_in, c_st)


# -- generation ----------------------------------------------------------------------------------
class _Gen:
    def __init__(self, spec: KernelSpec):
        self.spec = spec
        self.acc = [_Access(i.shape, spec.domain, spec.split, i.strides) for i in spec.inputs]
        self.level = self._levels()

    def _levels(self):
        lv = []
        for m in self.spec.members:
            deps = [lv[x[1]] for x in m.operands if x[0] == "m"]
            base = max(deps, default=0)
            lv.append(base + 1 if m.role == "reduce" else base)
        return lv

    # the C expression of one operand, converted to `want`
    def operand(self, ref, want):
        kind, x = ref
        if kind == "c":
            return None if x is None else want.lit(x)
        if kind == "i":
            return T.convert(f"x{x}", self.spec.inputs[x].ctype, want)
        return T.convert(f"v{x}", self.spec.members[x].ctype, want)

    def operand_ctype(self, ref):
        kind, x = ref
        if kind == "c":
            return None
        return self.spec.inputs[x].ctype if kind == "i" else self.spec.members[x].ctype

    def expression(self, i):
        m = self.spec.members[i]
        rule = m.rule
        in_types = [self.operand_ctype(x) for x in m.operands]
        want = T.operand_types(rule, m.ctype, in_types)
        uses = range(len(m.operands)) if rule.uses is None else rule.uses
        args = [self.operand(x, w) if k in uses else None for k, (x, w) in enumerate(zip(m.operands, want))]
        raw = [x[1] if x[0] == "c" else None for x in m.operands]
        expr = rule.emit(args, m.ctype, m.attrs, raw)
        natural = T.BOOL if rule.out_bool else (want[0] if rule.operands == "asis" else m.ctype)
        return T.convert(expr, natural, m.ctype)

    def deps(self, i):
        """Members and inputs member i's expression reads."""
        m = self.spec.members[i]
        rule = m.rule
        uses = range(len(m.operands)) if rule is None or rule.uses is None else rule.uses
        return [x for k, x in enumerate(m.operands) if k in uses and x[0] in "mi"]

    def closure(self, targets, available):
        """Members (in order) needed to compute `targets` given already-`available` members."""
        need, stack = set(), list(targets)
        while stack:
            i = stack.pop()
            if i in need or i in available:
                continue
            need.add(i)
            stack.extend(x[1] for x in self.deps(i) if x[0] == "m")
        return sorted(need)

    def inputs_of(self, members):
        used = set()
        for i in members:
            used.update(x[1] for x in self.deps(i) if x[0] == "i")
        return sorted(used)

    def _plan_loops(self, max_level, full_outs):
        """The passes over a row and what each computes. A full-size value computed in one pass and
        needed by a later one is kept in a per-row buffer (`s3[c]`, in L1) instead of being
        recomputed - softmax's exp is computed once - when the row is short enough."""
        spec, members = self.spec, self.spec.members
        loops = []                                    # (stage, reductions, targets)
        for stage in range(1, max_level + 1):
            reds = [i for i, m in enumerate(members) if m.role == "reduce" and self.level[i] == stage]
            if reds:
                loops.append((stage, reds, [x[1] for x in (members[i].operands[0] for i in reds) if x[0] == "m"]))
        if full_outs:
            loops.append((max_level + 1, [], full_outs))
        width = max((m.ctype.dtype.itemsize for m in members), default=4)
        stash_ok = len(loops) > 1 and spec.cols * width <= STASH_BYTES
        avail, stash, plans = set(), set(), []
        for stage, reds, targets in loops:
            rows_done = {i for i, m in enumerate(members) if m.role in ("row", "reduce") and self.level[i] < stage}
            need = self.closure(targets, rows_done | avail)
            loads = {x[1] for i in need for x in self.deps(i) if x[0] == "m" and x[1] in avail}
            loads |= {t for t in targets if t in avail}
            for i in reds:
                x = members[i].operands[0]
                if x[0] == "m" and x[1] in avail:
                    loads.add(x[1])
            stash |= loads
            plans.append((stage, reds, targets, need, sorted(loads)))
            if stash_ok:
                avail.update(i for i in need if members[i].role == "domain")
        return plans, stash

    def generate(self, symbol):
        spec = self.spec
        R, C = spec.rows, spec.cols
        ins = spec.inputs
        lines = []
        params = [f"void *restrict o{k}_" for k in range(len(spec.outputs))] + \
                 [f"const void *restrict i{j}_" for j in range(len(ins))]
        lines.append(f"/* {', '.join(m.op for m in spec.members)}; domain {list(spec.domain)} "
                     f"as {R} rows x {C} columns */")
        lines.append(f"void {symbol}({', '.join(params) or 'void'})")
        lines.append("{")
        for k, mi in enumerate(spec.outputs):
            t = spec.members[mi].ctype.c
            lines.append(f"    {t} *restrict o{k} = ({t} *)o{k}_;")
        for j, i in enumerate(ins):
            lines.append(f"    const {i.ctype.c} *restrict in{j} = (const {i.ctype.c} *)i{j}_;")
        members = spec.members
        max_level = max(self.level, default=0)
        full_outs = [mi for mi in spec.outputs if members[mi].role == "domain"]
        plans, stash = self._plan_loops(max_level, full_outs)
        for i in sorted(stash):
            lines.append(f"    {members[i].ctype.c} s{i}[{C}];   /* kept for a later pass over the row */")
        lines.append(f"    for (long r = 0; r < {R}L; r++) {{")
        body = []
        # per-row input bases; column-broadcast inputs are row values: load them here
        for j, a in enumerate(self.acc):
            body.append(f"const long b{j} = {a.base};")
            if a.col == "bcast":
                body.append(f"const {ins[j].ctype.c} x{j} = in{j}[b{j}];")
        row_inputs = {j for j, a in enumerate(self.acc) if a.col == "bcast"}
        out_of = {}
        for k, mi in enumerate(spec.outputs):
            out_of.setdefault(mi, []).append(k)
        done: set = set()                       # row-level members computed so far

        def row_section(level):
            for i, m in enumerate(members):
                if m.role == "row" and self.level[i] == level and i not in done:
                    body.append(f"const {m.ctype.c} v{i} = {self.expression(i)};")
                    done.add(i)
            for i, m in enumerate(members):
                if m.role in ("row", "reduce") and self.level[i] == level:
                    for k in out_of.get(i, ()):
                        body.append(f"o{k}[r] = v{i};")

        row_section(0)
        by_stage = {p[0]: p for p in plans}
        for stage in range(1, max_level + 1):
            if stage in by_stage:
                _, reds, targets, need, loads = by_stage[stage]
                self._loop(body, reds, targets, need, loads, stash, row_inputs, C)
                done.update(reds)
            row_section(stage)
        if full_outs:
            _, reds, targets, need, loads = by_stage[max_level + 1]
            self._loop(body, [], targets, need, loads, stash, row_inputs, C, out_of=out_of)
        lines += ["        " + s for s in body]
        lines.append("    }")
        lines.append("}")
        return "\n".join(lines)

    def _loop(self, body, reds, targets, need, loads, stash, row_inputs, C, out_of=None):
        """One pass over the columns: load kept values, compute `need`, accumulate reductions `reds`,
        keep values later passes need, store outputs."""
        members = self.spec.members
        red_inputs = [members[i].operands[0] for i in reds]
        used_inputs = set(self.inputs_of(need)) | {x[1] for x in red_inputs if x[0] == "i"}
        clauses = []
        for i in reds:
            kind = members[i].rule.reduce
            t = members[i].ctype
            if kind in ("sum", "mean"):
                body.append(f"double a{i} = 0.0;")
                clauses.append(f"reduction(+:a{i})")
            else:
                init = "INFINITY" if kind == "min" else "-INFINITY"
                body.append(f"{t.c} a{i} = ({t.c}){init}; int n{i} = 0;")
                clauses.append(f"reduction({kind}:a{i}) reduction(|:n{i})")
        body.append("#pragma omp simd " + " ".join(clauses))
        body.append(f"for (long c = 0; c < {C}L; c++) {{")
        inner = []
        for j in sorted(used_inputs - row_inputs):
            a = self.acc[j]
            col = "c" if a.col == "contig" else a.col_expr
            inner.append(f"const {self.spec.inputs[j].ctype.c} x{j} = in{j}[b{j} + {col}];")
        for i in loads:
            inner.append(f"const {members[i].ctype.c} v{i} = s{i}[c];")
        for i in need:
            inner.append(f"const {members[i].ctype.c} v{i} = {self.expression(i)};")
            if i in stash:
                inner.append(f"s{i}[c] = v{i};")
        for i, ref in zip(reds, red_inputs):
            kind = members[i].rule.reduce
            t = members[i].ctype
            x = self.operand(ref, t)
            if kind in ("sum", "mean"):
                inner.append(f"a{i} += (double){x};")
            else:
                cmp = ">" if kind == "max" else "<"
                inner.append(f"{{ const {t.c} e = {x}; a{i} = (e {cmp} a{i}) ? e : a{i}; n{i} |= (e != e); }}")
        if out_of:
            for mi in targets:
                for k in out_of[mi]:
                    inner.append(f"o{k}[r * {C}L + c] = v{mi};")
        body += ["    " + s for s in inner]
        body.append("}")
        for i in reds:
            kind = members[i].rule.reduce
            t = members[i].ctype
            if kind == "sum":
                body.append(f"const {t.c} v{i} = ({t.c})a{i};")
            elif kind == "mean":
                body.append(f"const {t.c} v{i} = ({t.c})a{i} / ({t.c}){C};")
            else:
                body.append(f"const {t.c} v{i} = n{i} ? ({t.c})NAN : a{i};")


def generate(spec: KernelSpec) -> tuple[str, str]:
    """`(symbol, C source)` of the kernel for `spec`; the symbol is named by a hash of the source,
    so identical groups (the same chain in every transformer layer) share one compiled kernel."""
    src = _Gen(spec).generate("KERNEL_SYMBOL")
    digest = hashlib.sha256(src.encode()).hexdigest()[:16]
    symbol = f"k_{digest}"
    return symbol, src.replace("KERNEL_SYMBOL", symbol)


def declaration(symbol: str, spec: KernelSpec) -> str:
    """The cffi `cdef` line for the kernel (every buffer is passed as a `void *`)."""
    n = len(spec.outputs) + len(spec.inputs)
    return f"void {symbol}({', '.join(['void *'] * n) or 'void'});"


__all__ = ["InputSpec", "MemberSpec", "KernelSpec", "generate", "declaration"]
