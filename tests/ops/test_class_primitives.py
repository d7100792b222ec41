"""Class-style primitives (`ops.MatMul(transpose_b=True)`, `ops.ReduceSum(keep_dims=True)` ...):
the same registry primitives as the functional API, MindSpore's attributes and call conventions,
construction-time validation, shard strategies, user-defined primitives and ops.Custom, in
PyNative, under autodiff and inside jit (trace, ast and bytecode capture)."""
import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import MinisporeError, OpTypeError, OpValueError
from minispore.ops import primitive as registry

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((5, 4)).astype(np.float32)


def T(a):
    return ms.Tensor(a)


# ------------------------------------------------------------------------------------------------
# naming: ops.Primitive is the MindSpore-style user base, the registry class stays in ops.primitive
def test_public_primitive_is_the_user_base_and_registry_class_is_separate():
    assert ops.Primitive is ops.operations.Primitive
    assert ops.P is ops.operations
    assert registry.Primitive is not ops.Primitive
    assert isinstance(registry.PRIMITIVES["add"], registry.Primitive)
    assert isinstance(ops.Add(), ops.Primitive)


def test_classes_call_the_same_registry_primitive_no_second_definition():
    before = dict(registry.PRIMITIVES)
    ops.ReduceSum(keep_dims=True)(T(X), 1)
    ops.MatMul(transpose_b=True)(T(X), T(W))
    assert registry.PRIMITIVES == before
    seen = []
    old = registry.set_executor(lambda prim, inputs, attrs: seen.append(prim.name) or old(prim, inputs, attrs))
    try:
        ops.Add()(T(X), T(X))
        ops.ReduceSum(keep_dims=True)(T(X), 1)
        ops.Softmax(axis=0)(T(X))
    finally:
        registry.set_executor(old)
    assert seen == ["add", "reduce_sum", "softmax"]


# ------------------------------------------------------------------------------------------------
# forward values against NumPy float64
def test_matmul_transposes_and_batch_matmul():
    x = X.astype(np.float64)
    w = W.astype(np.float64)
    np.testing.assert_allclose(ops.MatMul(transpose_b=True)(T(X), T(W)).asnumpy(), x @ w.T, rtol=1e-5)
    np.testing.assert_allclose(ops.MatMul(transpose_a=True)(T(X), T(X)).asnumpy(), x.T @ x, rtol=1e-5, atol=1e-6)
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    got = ops.BatchMatMul(transpose_b=True)(T(a), T(b)).asnumpy()
    np.testing.assert_allclose(got, np.einsum("bij,bkj->bik", a.astype(np.float64), b), rtol=1e-5, atol=1e-6)
    with pytest.raises(OpValueError, match="MatMul"):
        ops.MatMul()(T(a), T(X))


def test_reductions_keep_dims_axis_forms_and_integer_dtype():
    x = X.astype(np.float64)
    np.testing.assert_allclose(ops.ReduceSum(keep_dims=True)(T(X), 1).asnumpy(), x.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(ops.ReduceMean()(T(X), (0, 1)).asnumpy(), x.mean(), rtol=1e-5)
    np.testing.assert_allclose(ops.ReduceMax(True)(T(X), [0]).asnumpy(), x.max(0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(ops.ReduceMin()(T(X)).asnumpy(), x.min(), rtol=1e-6)
    np.testing.assert_allclose(ops.ReduceProd()(T(X), 0).asnumpy(), x.prod(0), rtol=1e-5)
    xi = T(np.arange(6, dtype=np.int32).reshape(2, 3))
    s = ops.ReduceSum()(xi, 1)
    assert s.dtype == ms.int32 and s.asnumpy().tolist() == [3, 12]     # MindSpore keeps Int32
    assert ops.ReduceMean()(xi, 1).dtype == ms.int32
    assert ops.ReduceSum(skip_mode=True)(T(X)) is not None
    np.testing.assert_array_equal(ops.ReduceSum(skip_mode=True)(T(X)).asnumpy(), X)
    with pytest.raises(OpTypeError, match="ReduceSum"):
        ops.ReduceSum()(T(X), None)


def test_shape_and_join_classes():
    x = T(X)
    assert ops.Shape()(x) == (3, 4) and ops.Rank()(x) == 2 and ops.Size()(x) == 12
    assert ops.DType()(x) == ms.float32
    np.testing.assert_array_equal(ops.Transpose()(x, (1, 0)).asnumpy(), X.T)
    np.testing.assert_array_equal(ops.Reshape()(x, (2, -1)).asnumpy(), X.reshape(2, 6))
    assert ops.ExpandDims()(x, -1).shape == (3, 4, 1)
    assert ops.Squeeze(2)(T(X[:, :, None])).shape == (3, 4)
    np.testing.assert_array_equal(ops.Concat(1)((x, x)).asnumpy(), np.concatenate([X, X], 1))
    np.testing.assert_array_equal(ops.Stack(1)([x, x]).asnumpy(), np.stack([X, X], 1))
    parts = ops.Split(axis=1, output_num=2)(x)
    assert len(parts) == 2 and parts[1].asnumpy().tolist() == X[:, 2:].tolist()
    un = ops.Unstack(axis=1)(x)
    assert len(un) == 4 and un[3].shape == (3,)
    np.testing.assert_array_equal(ops.Tile()(x, (2, 1)).asnumpy(), np.tile(X, (2, 1)))
    assert ops.Cast()(x, ms.int32).dtype == ms.int32
    assert ops.Flatten()(T(np.ones((2, 3, 4), np.float32))).shape == (2, 12)


def test_strided_slice_masks_match_python_slicing():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = T(a)
    np.testing.assert_array_equal(ops.StridedSlice()(x, (0, 1, 0), (3, 4, 5), (1, 2, 2)).asnumpy(), a[0:3, 1:4:2, 0:5:2])
    np.testing.assert_array_equal(ops.StridedSlice(begin_mask=1, end_mask=4)(x, (2, 1, 3), (3, 3, 0), (1, 1, 1)).asnumpy(),
                                  a[:3, 1:3, 3:])
    np.testing.assert_array_equal(ops.StridedSlice(shrink_axis_mask=2)(x, (0, 2, 0), (3, 3, 5), (1, 1, 1)).asnumpy(),
                                  a[0:3, 2, 0:5])
    np.testing.assert_array_equal(ops.StridedSlice(new_axis_mask=1)(x, (0, 0), (1, 2), (1, 1)).asnumpy(), a[None, 0:2])
    np.testing.assert_array_equal(ops.StridedSlice()(x, (2, 3), (0, 0), (-1, -1)).asnumpy(), a[2:0:-1, 3:0:-1])
    np.testing.assert_array_equal(ops.Slice()(x, (1, 0, 2), (2, -1, 2)).asnumpy(), a[1:3, :, 2:4])


def test_multi_output_conventions():
    x = T(X)
    idx, val = ops.ArgMaxWithValue(axis=1)(x)              # (index, value): MindSpore's order
    assert idx.dtype == ms.int64
    np.testing.assert_array_equal(idx.asnumpy(), X.argmax(1))
    np.testing.assert_array_equal(val.asnumpy(), X.max(1))
    idx, val = ops.ArgMinWithValue(axis=0, keep_dims=True)(x)
    assert idx.shape == (1, 4) and np.array_equal(val.asnumpy(), X.min(0, keepdims=True))
    a = ops.Argmax(axis=0)(x)
    assert a.dtype == ms.int32 and np.array_equal(a.asnumpy(), X.argmax(0))
    assert ops.Argmax(output_type=ms.int64)(x).dtype == ms.int64

    gamma = RNG.uniform(0.5, 1.5, 4).astype(np.float32)
    beta = RNG.uniform(-1, 1, 4).astype(np.float32)
    y, mean, var = ops.LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-5)(x, T(gamma), T(beta))
    x64 = X.astype(np.float64)
    m, v = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    np.testing.assert_allclose(y.asnumpy(), (x64 - m) / np.sqrt(v + 1e-5) * gamma + beta, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.asnumpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.asnumpy(), v, rtol=1e-5)

    labels = np.eye(4, dtype=np.float32)[[0, 3, 1]]
    loss, dlogits = ops.SoftmaxCrossEntropyWithLogits()(x, T(labels))
    p = np.exp(x64 - x64.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(loss.asnumpy(), -(labels * np.log(p)).sum(1), rtol=1e-5)
    np.testing.assert_allclose(dlogits.asnumpy(), p - labels, rtol=1e-5, atol=1e-6)
    sparse = ops.SparseSoftmaxCrossEntropyWithLogits()(x, T(np.array([0, 3, 1], np.int32)))
    np.testing.assert_allclose(sparse.asnumpy(), -(labels * np.log(p)).sum(1).mean(), rtol=1e-5)
    g = ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True)(x, T(np.array([0, 3, 1], np.int32)))
    np.testing.assert_allclose(g.asnumpy(), (p - labels) / 3, rtol=1e-5, atol=1e-6)

    ms.set_seed(1)
    out, mask = ops.Dropout(keep_prob=0.75)(T(np.ones((200, 50), np.float32)))
    assert mask.dtype == ms.float32 and set(np.unique(mask.asnumpy())) <= {0.0, 1.0}
    np.testing.assert_allclose(out.asnumpy(), mask.asnumpy() / 0.75, rtol=1e-6)
    assert abs(mask.asnumpy().mean() - 0.75) < 0.02


def test_creation_and_selection_classes():
    assert ops.Fill()(ms.float32, (2, 2), 3).asnumpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert ops.Ones()(3).dtype == ms.float32 and ops.Ones()((2, 2), ms.int32).dtype == ms.int32
    assert ops.Zeros()((1, 2)).asnumpy().tolist() == [[0.0, 0.0]]
    assert ops.OnesLike()(T(np.zeros(2, np.int32))).dtype == ms.int32
    assert ops.Eye()(2, 3, ms.float32).asnumpy().tolist() == [[1, 0, 0], [0, 1, 0]]
    c = T(np.array([True, False]))
    assert ops.Select()(c, T(np.array([1.0, 2.0], np.float32)), T(np.array([3.0, 4.0], np.float32))).asnumpy().tolist() == [1, 4]
    oh = ops.OneHot()(T(np.array([0, 2], np.int32)), 3, T(np.float32(1.0)), T(np.float32(0.0)))
    assert oh.asnumpy().tolist() == [[1, 0, 0], [0, 0, 1]]
    g = ops.Gather()(T(X), T(np.array([2, 0], np.int32)), 0)
    np.testing.assert_array_equal(g.asnumpy(), X[[2, 0]])
    gd = ops.GatherD()(T(X), 1, T(np.array([[0, 3], [1, 1], [2, 0]], np.int32)))
    np.testing.assert_array_equal(gd.asnumpy(), np.take_along_axis(X, np.array([[0, 3], [1, 1], [2, 0]]), 1))


def test_elementwise_and_activation_classes():
    x = T(X)
    x64 = X.astype(np.float64)
    for cls, ref in [(ops.Exp, np.exp), (ops.Abs, np.abs), (ops.Neg, np.negative), (ops.Square, np.square),
                     (ops.Tanh, np.tanh), (ops.Sigmoid, lambda a: 1 / (1 + np.exp(-a))),
                     (ops.ReLU, lambda a: np.maximum(a, 0))]:
        np.testing.assert_allclose(cls()(x).asnumpy(), ref(x64), rtol=1e-5, atol=1e-6, err_msg=cls.__name__)
    np.testing.assert_allclose(ops.Add()(x, 1).asnumpy(), x64 + 1, rtol=1e-6)
    np.testing.assert_allclose(ops.RealDiv()(x, x + 3).asnumpy(), x64 / (x64 + 3), rtol=1e-5)
    np.testing.assert_allclose(ops.SquaredDifference()(x, x * 2).asnumpy(), x64 ** 2, rtol=1e-5)
    assert ops.Equal()(x, x).dtype == ms.bool_
    gelu_tanh = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(ops.GeLU()(x).asnumpy(), gelu_tanh, rtol=1e-5, atol=1e-6)
    e = np.exp(x64 - x64.max(0))
    np.testing.assert_allclose(ops.Softmax(axis=0)(x).asnumpy(), e / e.sum(0), rtol=1e-5)
    np.testing.assert_allclose(ops.BiasAdd()(T(np.zeros((2, 3, 2), np.float32)), T(np.array([1, 2, 3], np.float32))).asnumpy()[:, :, 0],
                               [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_allclose(ops.AddN()((x, x, x)).asnumpy(), 3 * x64, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# attributes, construction-time validation, shard
def test_attrs_name_repr_and_add_prim_attr():
    m = ops.MatMul(transpose_b=True)
    assert m.name == "MatMul" and m.transpose_b is True and m.transpose_a is False
    assert m.attrs == {"transpose_a": False, "transpose_b": True} == m.init_attrs
    assert repr(m) == "Prim[MatMul]<transpose_a=False, transpose_b=True>"
    assert repr(ops.Add()) == "Prim[Add]"
    a = ops.Add().add_prim_attr("foo", 3)
    assert a.foo == 3 and a.attrs == {"foo": 3}
    a.del_prim_attr("foo")
    assert a.attrs == {}
    assert ops.Softmax().attrs == {"axis": (-1,)}
    assert ops.ReduceSum(True).attrs == {"keep_dims": True, "skip_mode": False}


@pytest.mark.parametrize("make, cls", [
    (lambda: ops.ReduceSum(keep_dims=1), OpTypeError),
    (lambda: ops.ReduceMean(keep_dims="yes"), OpTypeError),
    (lambda: ops.MatMul(transpose_a=1), OpTypeError),
    (lambda: ops.Concat(axis=1.5), OpTypeError),
    (lambda: ops.Squeeze(axis=1.5), OpTypeError),
    (lambda: ops.Split(1, 0), OpValueError),
    (lambda: ops.Dropout(keep_prob=1.5), OpValueError),
    (lambda: ops.Dropout(keep_prob=0.0), OpValueError),
    (lambda: ops.Argmax(output_type=ms.float32), OpTypeError),
    (lambda: ops.LayerNorm(epsilon="a"), OpTypeError),
    (lambda: ops.BiasAdd(data_format="NWC"), OpValueError),
    (lambda: ops.Softmax(axis=(0, 1)), OpValueError),
    (lambda: ops.MatMul(True, False, 3), OpTypeError),
])
def test_bad_constructor_attributes_raise_at_construction(make, cls):
    with pytest.raises(cls) as e:
        make()
    name = str(e.value).split("'")[1]
    assert name in ("ReduceSum", "ReduceMean", "MatMul", "Concat", "Squeeze", "Split", "Dropout", "Argmax",
                    "LayerNorm", "BiasAdd", "Softmax")


def test_bad_call_inputs_raise_minispore_errors():
    with pytest.raises(OpValueError, match="Split"):
        ops.Split(1, 3)(T(X))
    with pytest.raises(MinisporeError, match="concat"):
        ops.Concat(1)((T(X), T(W)))
    with pytest.raises(MinisporeError, match="add"):
        ops.Add()(T(X), T(W))
    with pytest.raises(OpValueError, match="LayerNorm"):
        ops.LayerNorm()(T(X), T(np.ones(3, np.float32)), T(np.zeros(3, np.float32)))


def test_shard_validates_records_and_checks_ranks_at_call():
    m = ops.MatMul().shard(((2, 1), (1, 4)))
    assert isinstance(m, ops.MatMul) and m.attrs["in_strategy"] == ((2, 1), (1, 4))
    assert "in_strategy=((2, 1), (1, 4))" in repr(m)
    np.testing.assert_allclose(m(T(X), T(W.T)).asnumpy(), ops.MatMul()(T(X), T(W.T)).asnumpy())
    with pytest.raises(OpValueError, match="MatMul"):
        m(T(X[None]), T(W.T))                     # rank 3 against a rank-2 strategy
    add = ops.Add().shard(((1, 1),))
    with pytest.raises(OpValueError, match="one in_strategy entry per tensor input"):
        add(T(X), T(X))
    assert ops.Add().shard(((1, 1), (1, 1)), ((1, 1),)).attrs["out_strategy"] == ((1, 1),)
    for bad, cls in [([[1, 1]], OpTypeError), (((1.5, 1),), OpTypeError), (((0, 1),), OpValueError),
                     ((1, 1), OpTypeError)]:
        with pytest.raises(cls, match="Add"):
            ops.Add().shard(bad)
    with pytest.raises(OpValueError):
        ops.Add().shard(None, ((1, 1),))
    assert type(ops.Add()).__call__ is not type(add).__call__   # unsharded instances skip the check


# ------------------------------------------------------------------------------------------------
# autodiff
def test_grad_through_class_ops_matches_functional():
    w = T(W)
    mm, rs, sm = ops.MatMul(transpose_b=True), ops.ReduceSum(keep_dims=False), ops.Softmax()

    def f_class(x):
        return rs(sm(mm(x, w)) * ops.Tanh()(x).sum(), ())

    def f_func(x):
        return ops.reduce_sum(ops.softmax(ops.matmul(x, ops.transpose(w, (1, 0)))) * ops.tanh(x).sum())

    g1 = ms.grad(f_class)(T(X))
    g2 = ms.grad(f_func)(T(X))
    np.testing.assert_allclose(g1.asnumpy(), g2.asnumpy(), rtol=1e-5, atol=1e-6)


def test_grad_flows_through_multi_output_classes():
    gamma, beta = T(np.ones(4, np.float32)), T(np.zeros(4, np.float32))

    def f(x):
        y, mean, var = ops.LayerNorm(epsilon=1e-5)(x, gamma, beta)
        _, val = ops.ArgMaxWithValue(axis=1)(x)
        return (y * y).sum() + val.sum() + mean.sum() + var.sum()

    x64 = X.astype(np.float64)
    g = ms.grad(f)(T(X)).asnumpy()

    def ref(a):
        m, v = a.mean(1, keepdims=True), a.var(1, keepdims=True)
        y = (a - m) / np.sqrt(v + 1e-5)
        return (y * y).sum() + a.max(1).sum() + m.sum() + v.sum()
    num = np.zeros_like(x64)
    for i in np.ndindex(x64.shape):
        e = np.zeros_like(x64)
        e[i] = 1e-6
        num[i] = (ref(x64 + e) - ref(x64 - e)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------------------------------
# jit: every capture mode records the same primitives as graph nodes
class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(T(W), name="w")
        self.matmul = ops.MatMul(transpose_b=True)
        self.reduce = ops.ReduceMean(keep_dims=True)
        self.concat = ops.Concat(axis=1)
        self.act = ops.ReLU()

    def construct(self, x):
        h = self.act(self.matmul(x, self.w))
        return self.reduce(self.concat((h, h)), 1)


@pytest.mark.parametrize("mode", ["trace", "ast", "bytecode"])
def test_class_primitives_inside_jit_every_capture_mode(mode):
    net = _Net()
    eager = net(T(X)).asnumpy()

    @ms.jit(capture_mode=mode)
    def run(x):
        return net(x)

    np.testing.assert_allclose(run(T(X)).asnumpy(), eager, rtol=1e-6)
    entry = run.compile(T(X))
    names = {n.op.name for g in entry.result.graphs for n in g.nodes}
    assert {"matmul", "relu", "concat", "reduce_mean"} <= names
    assert not entry.result.breaks

    grad = ms.jit(ms.grad(lambda x: net(x).sum()), capture_mode=mode)
    np.testing.assert_allclose(grad(T(X)).asnumpy(), ms.grad(lambda x: net(x).sum())(T(X)).asnumpy(), rtol=1e-5)


# ------------------------------------------------------------------------------------------------
# user-defined primitives and ops.Custom
class ScaleAddOne(ops.PrimitiveWithInfer):
    @ops.prim_attr_register
    def __init__(self, scale=2.0):
        if not isinstance(scale, float):
            raise OpTypeError("ScaleAddOne", "'scale' to be a float", type(scale).__name__)

    def infer_shape(self, x_shape):
        return x_shape

    def infer_dtype(self, x_dtype):
        if x_dtype != ms.float32:
            raise TypeError("float32 only")
        return x_dtype

    def kernel(self, x):
        return x * self.scale + 1

    def get_bprop(self):
        def bprop(x, out, dout):
            return (dout * self.scale,)
        return bprop


class Cube(ops.Primitive):
    @ops.prim_attr_register
    def __init__(self):
        pass

    def construct(self, x):
        return x * x * x


@pytest.mark.parametrize("mode", [None, "trace", "ast", "bytecode"])
def test_user_defined_primitive_kernel_bprop_and_jit(mode):
    op = ScaleAddOne(scale=3.0)
    assert op.name == "ScaleAddOne" and op.attrs == {"scale": 3.0}

    def f(x):
        return (op(x) * x).sum()
    if mode is not None:
        f = ms.jit(f, capture_mode=mode)
    np.testing.assert_allclose(f(T(X)).asnumpy(), ((X * 3 + 1) * X).sum(), rtol=1e-5)
    g = ms.grad(f)(T(X)).asnumpy()
    np.testing.assert_allclose(g, 3 * X + (3 * X + 1), rtol=1e-5, atol=1e-6)
    with pytest.raises(MinisporeError, match="ScaleAddOne"):
        op(T(X.astype(np.float64)))
    with pytest.raises(OpTypeError, match="ScaleAddOne"):
        ScaleAddOne(scale=3)


def test_user_defined_composite_primitive():
    c = Cube()
    np.testing.assert_allclose(c(T(X)).asnumpy(), X ** 3, rtol=1e-5)
    np.testing.assert_allclose(ms.grad(lambda x: c(x).sum())(T(X)).asnumpy(), 3 * X ** 2, rtol=1e-5)

    class NoKernel(ops.Primitive):
        @ops.prim_attr_register
        def __init__(self):
            pass
    with pytest.raises(MinisporeError, match="NoKernel"):
        NoKernel()(T(X))


@pytest.mark.parametrize("mode", [None, "trace", "ast", "bytecode"])
def test_custom_pyfunc_forward_grad_and_jit(mode):
    mul = ops.Custom(lambda a, b: a * b, out_shape=lambda a, b: a, out_dtype=lambda a, b: a, func_type="pyfunc",
                     bprop=lambda a, b, out, dout: (dout * b, dout * a))
    y = T(W[:3])

    def f(x):
        return mul(x, y).sum()
    if mode is not None:
        f = ms.jit(f, capture_mode=mode)
    np.testing.assert_allclose(f(T(X)).asnumpy(), (X * W[:3]).sum(), rtol=1e-5)
    np.testing.assert_allclose(ms.grad(f)(T(X)).asnumpy(), W[:3], rtol=1e-6)


def test_custom_fixed_shapes_multi_output_and_bad_arguments():
    split = ops.Custom(lambda a: (a[:, :2], a[:, 2:]), out_shape=((3, 2), (3, 2)), out_dtype=(ms.float32, ms.float32))
    a, b = split(T(X))
    np.testing.assert_array_equal(b.asnumpy(), X[:, 2:])
    g = ms.grad(lambda x: split(x)[0].sum() + x.sum())(T(X))   # no bprop: nothing flows through it
    np.testing.assert_array_equal(g.asnumpy(), np.ones_like(X))
    with pytest.raises(OpValueError, match="Custom"):
        ops.Custom(lambda a: a, (3,), ms.float32, func_type="aot")
    with pytest.raises(OpTypeError, match="Custom"):
        ops.Custom("not a function", (3,), ms.float32)
    with pytest.raises(OpValueError, match="Custom"):
        ops.Custom(lambda a: a)


# ------------------------------------------------------------------------------------------------
# side effects
def test_print_now_in_pynative_and_at_run_time_under_jit(capsys):
    ops.Print()("value:", T(np.array([1.0, 2.0], np.float32)))
    out = capsys.readouterr().out
    assert "value:" in out and "1." in out

    printer = ops.Print()

    @ms.jit(capture_mode="trace")
    def f(x):
        y = x * 2
        printer("y is", y)
        return y + 1

    f(T(np.array([1.0], np.float32)))
    f(T(np.array([5.0], np.float32)))
    out = capsys.readouterr().out
    assert out.count("y is") == 2 and "10." in out      # printed when the graph ran, with real values


def test_assign_writes_into_the_parameter():
    p = ms.Parameter(T(np.zeros(3, np.float32)), name="p")
    r = ops.Assign()(p, T(np.array([1, 2, 3], np.int32)))
    assert r is p and p.asnumpy().tolist() == [1.0, 2.0, 3.0] and p.dtype == ms.float32
    ops.AssignAdd()(p, T(np.ones(3, np.float32)))
    ops.AssignSub()(p, T(np.full(3, 0.5, np.float32)))
    assert p.asnumpy().tolist() == [1.5, 2.5, 3.5]
    with pytest.raises(OpValueError, match="AssignSub"):      # MindSpore: a scalar only for a 0-d variable
        ops.AssignSub()(p, 0.5)
    with pytest.raises(OpTypeError, match="Assign"):
        ops.Assign()(T(np.zeros(3, np.float32)), T(np.ones(3, np.float32)))
    with pytest.raises(OpValueError, match="Assign"):
        ops.Assign()(p, T(np.ones(4, np.float32)))
