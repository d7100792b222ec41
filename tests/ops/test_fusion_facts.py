"""The fusion fact (`Primitive.fusion`, minispore/ops/c_expr.py): every primitive that has one
emits a C expression that compiles and gives its eager (NumPy kernel) result, and O1 still forms
the same kernels from the facts as it did from the former name table.

Each non-view primitive is compiled as a one-member fused kernel (a KernelSpec built here, the way
the fusion pass builds them) and run on special values (signed zeros, +-inf, NaN, huge and tiny
numbers) next to ordinary ones, in float32 and float64. Oracle: the same primitive run eagerly.
Exact operations (arithmetic, comparisons, max/min, rounding ...) must agree bit for bit, NaN
included; transcendental functions (libm's vector versions vs NumPy's own loops) to a few ulp.
The views (reshape, broadcast_to, transpose, copy, stop_gradient), which the kernel reads by
strides, are checked through the fusion pass itself.
"""
import os

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common import dtype as mstype
from minispore.graph.codegen import build as B
from minispore.graph.codegen.c_kernel import InputSpec, KernelSpec, MemberSpec, declaration, generate
from minispore.graph.codegen.c_types import ctype_of
from minispore.graph.passes.fusion import FusedPrimitive, fuse
from minispore.graph.run import O0Executor
from minispore.ops.c_expr import FusionRule
from minispore.ops.primitive import PRIMITIVES, AbstractTensor

needs_cc = pytest.mark.skipif(B.find_compiler() is None, reason="no C compiler")


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    """Compiled kernels go to a temporary cache, not ~/.cache."""
    old = os.environ.get("MINISPORE_CACHE_DIR")
    os.environ["MINISPORE_CACHE_DIR"] = str(tmp_path_factory.mktemp("fusion-facts-cache"))
    yield
    if old is None:
        os.environ.pop("MINISPORE_CACHE_DIR", None)
    else:
        os.environ["MINISPORE_CACHE_DIR"] = old


# -- sample values --------------------------------------------------------------------------------------
_SPECIAL = [-np.inf, -1e30, -88.0, -3.5, -2.5, -1.0, -0.5, -1e-8, -0.0, 0.0, 1e-8, 0.5, 1.0, 1.5, 2.5, 3.0,
            20.0, 88.0, 1e30, np.inf, np.nan]


def _values(seed, positive=False):
    """4 x 12 values: the special ones, then ordinary ones (standard normal x 2)."""
    rng = np.random.default_rng(seed)
    v = np.concatenate([rng.permutation(np.array(_SPECIAL)), rng.standard_normal(48 - len(_SPECIAL)) * 2])
    if positive:
        v = np.abs(v) + 0.1                     # (NaN stays NaN, inf stays inf)
    return v.reshape(4, 12)


def _inputs(dtype):
    """Named tensor operands used by the cases below."""
    x, y, p = _values(0).astype(dtype), _values(1).astype(dtype), _values(2, positive=True).astype(dtype)
    other = np.float64 if dtype == np.float32 else np.float32
    return {"x": x, "y": y, "p": p, "b": _values(3) > 0, "c": _values(4) > 0.3, "w": _values(5).astype(other),
            "lo": np.full((4, 12), -0.3, dtype), "hi": (_values(6) * 0.5 + 0.4).astype(dtype),
            "gelu_x": ops.gelu(ms.Tensor(x)).asnumpy()}         # gelu_grad's y operand is gelu(x)


# name -> cases (operands: a name of `_inputs` or a Python constant; attrs). A primitive that gains a
# fusion fact must get cases here: test_every_fusible_primitive_has_cases checks it.
_CASES = {
    "add": [(("x", "y"), {}), (("x", 0.25), {}), ((1.5, "x"), {}), (("x", "w"), {})],
    "sub": [(("x", "y"), {}), (("x", 1.0), {}), ((2.0, "x"), {})],
    "mul": [(("x", "y"), {}), (("x", 0.5), {}), (("x", "w"), {})],
    "div": [(("x", "y"), {}), (("x", 3.0), {}), ((1.0, "x"), {})],
    "pow": [(("p", 2), {}), (("p", 1), {}), (("p", 0.5), {}), (("p", 3.0), {}), (("p", "y"), {}),
            (("x", 2), {})],
    "maximum": [(("x", "y"), {}), (("x", 0.25), {})],
    "minimum": [(("x", "y"), {}), (("x", 0.25), {})],
    "neg": [(("x",), {})], "abs": [(("x",), {})], "sign": [(("x",), {})], "square": [(("x",), {})],
    "reciprocal": [(("x",), {})], "sqrt": [(("p",), {}), (("x",), {})], "rsqrt": [(("p",), {})],
    "exp": [(("x",), {})], "log": [(("p",), {}), (("x",), {})], "sin": [(("y",), {})], "cos": [(("y",), {})],
    "erf": [(("x",), {})], "tanh": [(("x",), {})], "floor": [(("x",), {})], "ceil": [(("x",), {})],
    "round": [(("x",), {})],
    "zeros_like": [(("x",), {})], "ones_like": [(("x",), {})],
    "equal": [(("x", "y"), {}), (("x", 0.0), {}), (("x", "x"), {})],
    "not_equal": [(("x", "y"), {}), (("x", "x"), {})],
    "less": [(("x", "y"), {}), (("x", "w"), {})], "less_equal": [(("x", "y"), {}), (("x", 0.5), {})],
    "greater": [(("x", "y"), {}), (("x", "w"), {})], "greater_equal": [(("x", "y"), {}), (("x", -0.0), {})],
    "logical_and": [(("b", "c"), {}), (("x", "c"), {})], "logical_or": [(("b", "c"), {}), (("x", "y"), {})],
    "logical_xor": [(("b", "c"), {}), (("x", "b"), {})], "logical_not": [(("b",), {}), (("x",), {})],
    "isnan": [(("x",), {})], "isinf": [(("x",), {})], "isfinite": [(("x",), {})],
    "where": [(("b", "x", "y"), {}), (("c", "x", 0.0), {})],
    "cast": [(("x",), {"dtype": ms.float64}), (("x",), {"dtype": ms.float32}), (("x",), {"dtype": ms.bool_}),
             (("b",), {"dtype": ms.float32})],
    "relu": [(("x",), {})], "sigmoid": [(("x",), {})], "silu": [(("x",), {})], "silu_grad": [(("x", "y"), {})],
    "leaky_relu": [(("x",), {}), (("x",), {"alpha": 0.1})], "elu": [(("x",), {}), (("x",), {"alpha": 0.7})],
    "hardtanh": [(("x",), {}), (("x",), {"min_val": -0.5, "max_val": 0.8})],
    "clamp": [(("x", -0.3, 0.4), {}), (("x", None, 0.4), {}), (("x", -0.3, None), {}), (("x", "lo", "hi"), {})],
    "softplus": [(("x",), {}), (("x",), {"beta": 2.0, "threshold": 4.0})],
    "gelu": [(("x",), {"approximate": "none"}), (("x",), {"approximate": "tanh"})],
    "gelu_grad": [(("x", "gelu_x", "y"), {})],
    "reduce_sum": [(("x",), {"axis": (1,)}), (("p",), {"axis": (1,), "keep_dims": True})],
    "reduce_mean": [(("x",), {"axis": (1,)}), (("p",), {"axis": (1,), "keep_dims": True})],
    "reduce_max": [(("x",), {"axis": (1,)}), (("y",), {"axis": (1,), "keep_dims": True})],
    "reduce_min": [(("x",), {"axis": (1,)}), (("y",), {"axis": (1,), "keep_dims": True})],
}
# views: read by strides inside a group, so checked through the pass (test_views_fuse_...)
_VIEWS = {"reshape", "broadcast_to", "transpose", "copy", "stop_gradient"}
# libm's transcendental functions (vector versions) differ from NumPy's loops in the last bits;
# the sums accumulate in double where NumPy sums float32 pairwise
_INEXACT = {"pow", "exp", "log", "sin", "cos", "erf", "tanh", "sigmoid", "silu", "silu_grad", "elu", "softplus",
            "gelu", "gelu_grad", "reduce_sum", "reduce_mean"}

# relu(-0.0) is -0.0 fused (`-0.0 >= 0` holds, so the expression keeps x) and +0.0 in NumPy: equal
# values, a different sign bit (as O1 has always computed it)
_ZERO_SIGN = {"relu"}


def _fusible():
    return {n for n, p in PRIMITIVES.items() if p.fusion is not None}


def test_every_fusible_primitive_has_cases():
    assert _fusible() == set(_CASES) | _VIEWS
    for name in _fusible():
        assert isinstance(PRIMITIVES[name].fusion, FusionRule), name


def test_fusion_rules_reject_malformed_facts():
    with pytest.raises(ValueError, match="operands"):
        FusionRule(lambda a, t, at, raw: a[0], operands="sideways")
    with pytest.raises(ValueError, match="either"):
        FusionRule()                                       # neither an expression nor a reduction
    with pytest.raises(ValueError, match="either"):
        FusionRule(lambda a, t, at, raw: a[0], reduce="sum")
    with pytest.raises(ValueError, match="reduce"):
        FusionRule(reduce="product")


def _one_op_kernel(prim, operands, attrs, env):
    """(symbol, C source, cdef, arrays, expected, out shape) of `prim` alone as a fused kernel."""
    args = [env[o] if isinstance(o, str) else o for o in operands]
    avals = [AbstractTensor(a.shape, mstype._BY_NP[a.dtype]) if isinstance(a, np.ndarray) else a for a in args]
    out = prim.infer(*avals, **attrs)
    want = prim(*[ms.Tensor(a) if isinstance(a, np.ndarray) else a for a in args], **attrs).asnumpy()
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    inputs = [InputSpec(ctype_of(mstype._BY_NP[a.dtype]), a.shape) for a in arrays]
    refs, j = [], 0
    for a in args:
        if isinstance(a, np.ndarray):
            refs.append(("i", j))
            j += 1
        else:
            refs.append(("c", a))
    rule = prim.fusion
    if rule.reduce is not None:
        domain, split, role = arrays[0].shape, len(attrs["axis"]), "reduce"
    else:
        domain, split, role = out.shape, len(out.shape), "domain"
    member = MemberSpec(prim.name, ctype_of(out.dtype), role, refs, dict(attrs), rule)
    spec = KernelSpec(f"test_{prim.name}", tuple(domain), split, inputs, [member], [0])
    symbol, src = generate(spec)
    return symbol, src, declaration(symbol, spec), arrays, want, out


def _run(mod, symbol, arrays, out):
    o = np.empty(out.shape, out.dtype.np)
    ffi = mod.ffi
    getattr(mod.lib, symbol)(ffi.from_buffer(o), *[ffi.from_buffer(np.ascontiguousarray(a)) for a in arrays])
    return o


@needs_cc
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_fusion_fact_compiles_and_matches_its_eager_kernel(dtype):
    env = _inputs(dtype)
    cases, kernels = [], {}
    for name, entries in sorted(_CASES.items()):
        for operands, attrs in entries:
            symbol, src, cdef, arrays, want, out = _one_op_kernel(PRIMITIVES[name], operands, attrs, env)
            kernels[symbol] = (src, cdef)
            cases.append((name, operands, attrs, symbol, arrays, want, out))
    modules, errors = B.build_each(kernels)             # all in one module (one compiler run)
    assert not errors, errors
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    for name, operands, attrs, symbol, arrays, want, out in cases:
        got = _run(modules[symbol], symbol, arrays, out)
        what = f"{name}{operands} {attrs}"
        assert got.dtype == want.dtype and got.shape == want.shape, what
        if name in _INEXACT:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-30, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)        # bit for bit (NaN == NaN here)
            if want.dtype.kind == "f" and name not in _ZERO_SIGN:         # and the sign of each zero
                zero = want == 0
                np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=what)


@needs_cc
def test_max_min_and_relu_propagate_nan_as_numpy_does():
    """C's fmax/fmin would drop a NaN; the facts' expressions must keep it (and keep inf)."""
    x = np.array([[np.nan, 1.0, -np.inf, np.inf, -0.0, 0.0, np.nan, -2.0]], np.float32)
    y = np.array([[0.0, np.nan, -1.0, 1.0, 0.0, -0.0, np.nan, -np.inf]], np.float32)
    env = {"x": x, "y": y}
    cases, kernels = [], {}
    for name, operands in (("maximum", ("x", "y")), ("minimum", ("x", "y")), ("relu", ("x",)),
                           ("reduce_max", ("x",)), ("reduce_min", ("y",))):
        attrs = {"axis": (1,)} if name.startswith("reduce") else {}
        symbol, src, cdef, arrays, want, out = _one_op_kernel(PRIMITIVES[name], operands, attrs, env)
        kernels[symbol] = (src, cdef)
        cases.append((name, symbol, arrays, want, out))
    mod = B.build(kernels)
    for name, symbol, arrays, want, out in cases:
        got = _run(mod, symbol, arrays, out)
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert np.isnan(got).any(), name


# -- the views, through the pass ----------------------------------------------------------------------------
def _capture(fn, *args):
    return ms.jit(fn, capture_mode="trace").compile(*args).graph


@needs_cc
def test_views_fuse_into_their_readers_and_read_by_strides():
    rng = np.random.default_rng(7)
    x = ms.Tensor(rng.standard_normal((4, 6)).astype(np.float32))
    r = ms.Tensor(rng.standard_normal((6,)).astype(np.float32))

    def f(x, r):
        a = ops.transpose(x, (1, 0)) * 2.0 + 1.0                 # a permuted read
        b = ops.reshape(x, (2, 12)) * 3.0 - 0.5                   # a reinterpreted read
        c = ops.broadcast_to(r, (4, 6)) * x + 1.0                  # a zero-stride read
        d = ops.stop_gradient(x) * ops.deepcopy(x) + 2.0
        return a, b, c, d

    g = _capture(f, x, r)
    res = fuse(g)
    members = {m for prim in res.fused for m in prim.members}
    assert _VIEWS <= members, members
    want = O0Executor(g).run(x._data, r._data)
    got = O0Executor(res.graph).run(x._data, r._data)
    for w, o in zip(want, got):
        np.testing.assert_array_equal(o, w)
    # a view alone is no work: a group of views and one op stays unfused
    lone = fuse(_capture(lambda x: ops.reshape(ops.transpose(x, (1, 0)), (24,)) * 2.0, x))
    assert not lone.fused


# -- the same kernels as the name table made ---------------------------------------------------------------
# Recorded with the former name table (graph/codegen/fusible_ops.py) before the facts replaced it.
# The kernel symbols are sha256 digests of each kernel's generated C source, so equal symbols mean
# the same C, character for character.
_MLP_GROUPS = [
    ("fused_elementwise_0{add,gelu,square,mul,mul,add,mul,tanh,mul,add,mul,add,mul,square,sub,mul,mul,mul,add}",
     "k_f0ae958c22c05915"),
    ("fused_elementwise_1{add,silu}", "k_fb55821c562d8187"),
    ("fused_reduce_2{add,sub,square,reduce_mean,ones_like,reshape,div,broadcast_to,mul,mul}", "k_dc13e37ec6643960"),
]


@needs_cc
def test_mlp_training_step_forms_the_same_kernels_as_before():
    ms.set_seed(0)
    net = nn.SequentialCell(nn.Dense(8, 16), nn.GELU(approximate=True), nn.Dense(16, 16), nn.SiLU(),
                            nn.Dense(16, 4))

    def loss_fn(x, y):
        return ops.mean(ops.square(net(x) - y))

    grad_fn = ms.value_and_grad(loss_fn, None, net.trainable_params())
    rng = np.random.default_rng(1)
    x = ms.Tensor(rng.standard_normal((5, 8)).astype(np.float32))
    y = ms.Tensor(rng.standard_normal((5, 4)).astype(np.float32))
    ref_loss, ref_grads = grad_fn(x, y)
    step = ms.jit(grad_fn, capture_mode="trace", jit_level="O1")
    loss, grads = step(x, y)
    graph = step.compile(x, y).executor.graph
    fused = [(n.op.name, n.op.symbol) for n in graph.nodes if isinstance(n.op, FusedPrimitive)]
    assert fused == _MLP_GROUPS
    np.testing.assert_allclose(loss.asnumpy(), ref_loss.asnumpy(), rtol=1e-6)
    for g, rg in zip(grads, ref_grads):
        np.testing.assert_allclose(g.asnumpy(), rg.asnumpy(), rtol=1e-5, atol=1e-7)
