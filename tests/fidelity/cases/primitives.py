"""Class-style primitives (`ops.MatMul(transpose_b=True)`, `ops.ReduceSum(keep_dims=True)`, ...):
MindSpore's constructor attributes, call conventions, result dtypes, multi-output order,
gradients, jit, shard/attrs bookkeeping and bad input."""
import numpy as np

from msdiff import case, rand


def _x(ms, *shape, seed=0, dtype=np.float32):
    return ms.Tensor(rand(*shape, seed=seed).astype(dtype))


# -- elementwise (no attributes) --------------------------------------------------------------------
for _name, _args in [("Add", 2), ("Sub", 2), ("Mul", 2), ("RealDiv", 2), ("Div", 2), ("Maximum", 2),
                     ("Minimum", 2), ("Pow", 2), ("SquaredDifference", 2), ("Equal", 2), ("Greater", 2),
                     ("LessEqual", 2), ("Neg", 1), ("Abs", 1), ("Exp", 1), ("Square", 1), ("Sigmoid", 1), ("Tanh", 1),
                     ("ReLU", 1), ("GeLU", 1), ("FastGeLU", 1), ("Erf", 1), ("Sin", 1), ("Floor", 1), ("Sign", 1)]:
    def _make(name, n):
        @case(f"primitives/{name.lower()}", rtol=1e-5, atol=1e-6)
        def _(ms):
            x = _x(ms, 3, 4, seed=1)
            y = ms.Tensor(rand(3, 4, seed=2, low=0.5, high=2.0))
            op = getattr(ms.ops, name)()
            if name == "Pow":
                return op(ms.Tensor(rand(3, 4, seed=3, low=0.5, high=2.0)), y)
            return op(x, y) if n == 2 else op(x)
    _make(_name, _args)


@case("primitives/add_scalar_and_broadcast")
def _(ms):
    return ms.ops.Add()(_x(ms, 3, 1), 2.5), ms.ops.Mul()(_x(ms, 3, 4), _x(ms, 4, seed=5))


@case("primitives/sqrt_rsqrt_log")
def _(ms):
    x = ms.Tensor(rand(2, 3, low=0.5, high=3.0))
    return ms.ops.Sqrt()(x), ms.ops.Rsqrt()(x), ms.ops.Log()(x)


@case("primitives/sqrt_of_int_is_float32")
def _(ms):
    return ms.ops.Sqrt()(ms.Tensor(np.arange(6, dtype=np.int32)))


# -- matrix products ----------------------------------------------------------------------------------
@case("primitives/matmul_transpose_b")
def _(ms):
    return ms.ops.MatMul(transpose_b=True)(_x(ms, 3, 4), _x(ms, 5, 4, seed=1))


@case("primitives/matmul_transpose_a_positional")
def _(ms):
    return ms.ops.MatMul(True, False)(_x(ms, 4, 3), _x(ms, 4, 2, seed=1))


@case("primitives/batch_matmul_transpose_b")
def _(ms):
    return ms.ops.BatchMatMul(transpose_b=True)(_x(ms, 2, 3, 4), _x(ms, 2, 5, 4, seed=1))


@case("primitives/matmul_rank3_rejected", raises=True)
def _(ms):
    return ms.ops.MatMul()(_x(ms, 2, 3, 4), _x(ms, 4, 2))


# -- reductions ---------------------------------------------------------------------------------------
@case("primitives/reduce_sum_keep_dims")
def _(ms):
    op = ms.ops.ReduceSum(keep_dims=True)
    x = _x(ms, 2, 3, 4)
    return op(x, 1), op(x, (0, 2)), op(x)


@case("primitives/reduce_mean_list_axis")
def _(ms):
    return ms.ops.ReduceMean()(_x(ms, 2, 3, 4), [0, 2])


@case("primitives/reduce_max_min_prod")
def _(ms):
    x = _x(ms, 3, 4)
    return ms.ops.ReduceMax(True)(x, 1), ms.ops.ReduceMin()(x, 0), ms.ops.ReduceProd()(x, 1)


@case("primitives/reduce_sum_int32_keeps_int32")
def _(ms):
    return ms.ops.ReduceSum()(ms.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3)), 1)


@case("primitives/reduce_all_any")
def _(ms):
    x = ms.Tensor(np.array([[True, False], [True, True]]))
    return ms.ops.ReduceAll()(x, 1), ms.ops.ReduceAny(keep_dims=True)(x, 0)


@case("primitives/reduce_sum_axis_out_of_range", raises=True)
def _(ms):
    return ms.ops.ReduceSum()(_x(ms, 2, 3), 5)


@case("primitives/cumsum_exclusive_reverse")
def _(ms):
    x = _x(ms, 2, 4)
    return ms.ops.CumSum()(x, 1), ms.ops.CumSum(exclusive=True, reverse=True)(x, 1)


# -- arg reductions, multi-output order ----------------------------------------------------------------
@case("primitives/argmax_default_int32_and_int64")
def _(ms):
    x = _x(ms, 3, 4)
    return ms.ops.Argmax()(x), ms.ops.Argmax(axis=0, output_type=ms.int64)(x), ms.ops.Argmin()(x)


@case("primitives/argmax_with_value_index_first")
def _(ms):
    return ms.ops.ArgMaxWithValue()(_x(ms, 3, 4)), ms.ops.ArgMaxWithValue(axis=1, keep_dims=True)(_x(ms, 3, 4))


@case("primitives/argmin_with_value")
def _(ms):
    return ms.ops.ArgMinWithValue(1)(_x(ms, 3, 4))


@case("primitives/topk_and_sort")
def _(ms):
    x = _x(ms, 3, 5)
    return ms.ops.TopK()(x, 2), ms.ops.Sort(axis=0, descending=True)(x)


# -- shapes, joins, splits ------------------------------------------------------------------------------
@case("primitives/transpose_reshape_expand_squeeze")
def _(ms):
    x = _x(ms, 2, 3, 4)
    return (ms.ops.Transpose()(x, (2, 0, 1)), ms.ops.Reshape()(x, (4, -1)), ms.ops.ExpandDims()(x, 1).shape,
            ms.ops.Squeeze(1)(_x(ms, 2, 1, 3)), ms.ops.Squeeze()(_x(ms, 1, 3, 1)))


@case("primitives/shape_dtype_size_rank")
def _(ms):
    x = _x(ms, 2, 3, 4)
    return ms.ops.Shape()(x), ms.ops.DType()(x), ms.ops.Size()(x), ms.ops.Rank()(x)


@case("primitives/concat_stack_tuple_and_list")
def _(ms):
    a, b = _x(ms, 2, 3), _x(ms, 2, 3, seed=1)
    return ms.ops.Concat(1)((a, b)), ms.ops.Concat()([a, b]), ms.ops.Stack(axis=2)((a, b))


@case("primitives/split_output_num")
def _(ms):
    return ms.ops.Split(axis=1, output_num=3)(_x(ms, 2, 6))


@case("primitives/split_not_divisible", raises=True)
def _(ms):
    return ms.ops.Split(1, 2)(_x(ms, 2, 3))


@case("primitives/unstack")
def _(ms):
    return ms.ops.Unstack(axis=1)(_x(ms, 2, 3))


@case("primitives/tile_broadcast_to_flatten")
def _(ms):
    x = _x(ms, 2, 3)
    return (ms.ops.Tile()(x, (2, 1)), ms.ops.BroadcastTo((4, 2, 3))(x),
            ms.ops.Flatten()(_x(ms, 2, 3, 4)))


@case("primitives/cast")
def _(ms):
    x = ms.Tensor(np.array([1.7, -2.5, 3.2], np.float32))
    return ms.ops.Cast()(x, ms.int32), ms.ops.Cast()(x, ms.float16)


# -- indexing, selection -------------------------------------------------------------------------------
@case("primitives/gather_axis0_axis1")
def _(ms):
    x = _x(ms, 4, 3)
    idx = ms.Tensor(np.array([2, 0, 3], np.int32))
    return ms.ops.Gather()(x, idx, 0), ms.ops.Gather()(x, ms.Tensor(np.array([1, 1], np.int32)), 1)


@case("primitives/gather_d")
def _(ms):
    return ms.ops.GatherD()(_x(ms, 2, 3), 1, ms.Tensor(np.array([[0, 0], [2, 1]], np.int32)))


@case("primitives/one_hot_axis")
def _(ms):
    idx = ms.Tensor(np.array([0, 2, 1], np.int32))
    on, off = ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32)
    return ms.ops.OneHot()(idx, 3, on, off), ms.ops.OneHot(axis=0)(idx, 4, on, off)


@case("primitives/select")
def _(ms):
    c = ms.Tensor(np.array([[True, False, True]]))
    return ms.ops.Select()(c, _x(ms, 1, 3), _x(ms, 1, 3, seed=1))


@case("primitives/strided_slice_basic_and_masks")
def _(ms):
    x = ms.Tensor(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    return (ms.ops.StridedSlice()(x, (0, 1, 0), (3, 4, 5), (1, 2, 2)),
            ms.ops.StridedSlice(begin_mask=1, end_mask=4)(x, (2, 1, 3), (3, 3, 0), (1, 1, 1)),
            ms.ops.StridedSlice(shrink_axis_mask=2)(x, (0, 2, 0), (3, 3, 5), (1, 1, 1)),
            ms.ops.StridedSlice()(x, (2, 3), (0, 0), (-1, -1)))


@case("primitives/slice")
def _(ms):
    x = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    return ms.ops.Slice()(x, (0, 1, 1), (2, -1, 2))


@case("primitives/masked_fill_tril")
def _(ms):
    x = _x(ms, 3, 3)
    return (ms.ops.MaskedFill()(x, ms.Tensor(np.array([True, False, True])), ms.Tensor(0.0, ms.float32)),
            ms.ops.Tril()(x), ms.ops.Triu(1)(x))


# -- creation ----------------------------------------------------------------------------------------
@case("primitives/fill_ones_zeros_eye")
def _(ms):
    return (ms.ops.Fill()(ms.float32, (2, 2), 3), ms.ops.Ones()((2, 3), ms.int32), ms.ops.Ones()(3),
            ms.ops.Zeros()((1, 2), ms.float32), ms.ops.Eye()(2, 3, ms.float32))


@case("primitives/ones_like_zeros_like")
def _(ms):
    xi = ms.Tensor(np.arange(4, dtype=np.int32))
    return ms.ops.OnesLike()(xi), ms.ops.ZerosLike()(_x(ms, 2, 2))


# -- nn ops ------------------------------------------------------------------------------------------
@case("primitives/softmax_axis_forms")
def _(ms):
    x = _x(ms, 3, 4)
    return ms.ops.Softmax()(x), ms.ops.Softmax(axis=0)(x), ms.ops.Softmax((0,))(x), ms.ops.LogSoftmax(0)(x)


@case("primitives/softmax_of_int_rejected", raises=True)
def _(ms):
    return ms.ops.Softmax()(ms.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3)))


@case("primitives/layer_norm_returns_y_mean_variance", rtol=1e-5, atol=1e-5)
def _(ms):
    g = ms.Tensor(rand(4, seed=3, low=0.5, high=1.5))
    b = ms.Tensor(rand(4, seed=4))
    return ms.ops.LayerNorm()(_x(ms, 3, 4), g, b)


@case("primitives/layer_norm_last_axis_eps", rtol=1e-5, atol=1e-5)
def _(ms):
    g = ms.Tensor(rand(4, seed=3, low=0.5, high=1.5))
    b = ms.Tensor(rand(4, seed=4))
    return ms.ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-5)(_x(ms, 2, 3, 4), g, b)


@case("primitives/softmax_cross_entropy_loss_and_dlogits")
def _(ms):
    labels = ms.Tensor(np.eye(4, dtype=np.float32)[[0, 3, 1]])
    return ms.ops.SoftmaxCrossEntropyWithLogits()(_x(ms, 3, 4), labels)


@case("primitives/sparse_softmax_cross_entropy_mean_and_grad")
def _(ms):
    x = _x(ms, 3, 4)
    y = ms.Tensor(np.array([0, 3, 1], np.int32))
    return (ms.ops.SparseSoftmaxCrossEntropyWithLogits()(x, y),
            ms.ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True)(x, y))


@case("primitives/sigmoid_cross_entropy_and_bce_with_logits")
def _(ms):
    x, t = _x(ms, 2, 3), ms.Tensor(rand(2, 3, seed=2, low=0.0, high=1.0))
    w = ms.Tensor(np.ones((2, 3), np.float32))
    return ms.ops.SigmoidCrossEntropyWithLogits()(x, t), ms.ops.BCEWithLogitsLoss()(x, t, w, w)


@case("primitives/dropout_keep_prob_one_and_shapes")
def _(ms):
    out, mask = ms.ops.Dropout(keep_prob=1.0)(_x(ms, 2, 3))
    y, m = ms.ops.Dropout(keep_prob=0.5)(_x(ms, 4, 5))
    return out, mask, y.shape, m.dtype


@case("primitives/bias_add_l2_normalize")
def _(ms):
    return (ms.ops.BiasAdd()(_x(ms, 2, 3, 2), ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32))),
            ms.ops.L2Normalize(axis=1)(_x(ms, 2, 3)))


@case("primitives/elu_softplus_relu6")
def _(ms):
    x = _x(ms, 2, 3) * 4
    return ms.ops.Elu()(x), ms.ops.Softplus()(x), ms.ops.ReLU6()(x * 2)


@case("primitives/addn_and_pad")
def _(ms):
    x = _x(ms, 2, 3)
    return ms.ops.AddN()((x, x, x)), ms.ops.Pad(((1, 0), (0, 2)))(x)


# -- attributes, shard ---------------------------------------------------------------------------------
@case("primitives/attrs_and_repr")
def _(ms):
    m = ms.ops.MatMul(transpose_b=True)
    r = ms.ops.ReduceSum(keep_dims=True)
    return (m.name, m.transpose_b, repr(m), r.attrs, ms.ops.Concat(1).attrs, repr(ms.ops.Add()),
            ms.ops.Softmax().attrs)


@case("primitives/add_prim_attr")
def _(ms):
    a = ms.ops.Add().add_prim_attr("foo", 3)
    return a.foo, a.attrs, repr(a)


@case("primitives/shard_records_strategy")
def _(ms):
    m = ms.ops.MatMul().shard(((2, 1), (1, 1)), ((2, 1),))
    return repr(m), m.attrs["in_strategy"], m.attrs["out_strategy"]


@case("primitives/shard_rejects_a_list", raises=True)
def _(ms):
    return ms.ops.Add().shard([[1, 1]])


@case("primitives/shard_rejects_float_entries", raises=True)
def _(ms):
    return ms.ops.Add().shard(((1.5, 1),))


@case("primitives/squeeze_bad_axis_attr", raises=True)
def _(ms):
    return ms.ops.Squeeze(1.5)


@case("primitives/concat_mismatched_shapes", raises=True)
def _(ms):
    return ms.ops.Concat(1)((_x(ms, 2, 3), _x(ms, 3, 3)))


@case("primitives/gather_d_bad_index_dtype", raises=True)
def _(ms):
    return ms.ops.GatherD()(_x(ms, 2, 3), 1, ms.Tensor(np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)))


# -- autodiff and jit ------------------------------------------------------------------------------------
@case("primitives/grad_matmul_softmax_reduce", rtol=1e-5, atol=1e-6)
def _(ms):
    w = _x(ms, 5, 4, seed=1)
    mm, sm, rs = ms.ops.MatMul(transpose_b=True), ms.ops.Softmax(), ms.ops.ReduceSum()
    t = ms.Tensor(rand(3, 5, seed=7))

    def f(x):
        return rs(sm(mm(x, w)) * t)
    return ms.grad(f)(_x(ms, 3, 4))


@case("primitives/value_and_grad_layer_norm_params", rtol=1e-4, atol=1e-5)
def _(ms):
    ln = ms.ops.LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-5)
    x = _x(ms, 3, 4)
    t = ms.Tensor(rand(3, 4, seed=9))

    def f(g, b):
        y, _, _ = ln(x, g, b)
        return (y * t).sum()
    return ms.value_and_grad(f, grad_position=(0, 1))(ms.Tensor(np.ones(4, np.float32)), ms.Tensor(np.zeros(4, np.float32)))


@case("primitives/grad_argmax_with_value_and_concat", rtol=1e-5)
def _(ms):
    def f(x):
        _, v = ms.ops.ArgMaxWithValue(axis=1)(x)
        return ms.ops.ReduceSum()(ms.ops.Concat(0)((v, v * 2)))
    return ms.grad(f)(_x(ms, 3, 4))


@case("primitives/jit_cell_with_class_primitives", rtol=1e-5, atol=1e-6)
def _(ms):
    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(_x(ms, 5, 4, seed=1), name="w")
            self.matmul = ms.ops.MatMul(transpose_b=True)
            self.reduce = ms.ops.ReduceMean(keep_dims=True)
            self.relu = ms.ops.ReLU()

        @ms.jit
        def construct(self, x):
            return self.reduce(self.relu(self.matmul(x, self.w)), 1)
    return Net()(_x(ms, 3, 4))


@case("primitives/custom_pyfunc_forward")
def _(ms):
    def kernel(a, b):
        return a * 2 + b
    op = ms.ops.Custom(kernel, out_shape=lambda a, b: a, out_dtype=lambda a, b: a, func_type="pyfunc")
    return op(_x(ms, 2, 3), _x(ms, 2, 3, seed=1))
