"""Tensor semantics as MindSpore 2.10 has them: construction (copy vs share, default dtypes, the
wide unsigned types, out-of-range ints), the varargs/keyword call forms of the shape methods, the
two families of reduction signatures (`max(dim)` -> (values, indices) vs `max(axis=)` -> values),
result dtypes (argmax Int64, argmin Int32, int sums/products Int64), conversions and metadata.

Left out, because MindSpore 2.10's CPU build errors or misbehaves there (see the report for the
Differences page): `repeat` ("not supported on this device"), `roll`/`clone`/`nonzero(as_tuple=True)`
(kernels unregistered), `fill_` (kernel unregistered, and a no-op on int tensors), `zero_` (returns
a new tensor, leaves the original), `new_full` (Ascend only), `t()` of a 3-D tensor (returned as is),
`mean` of an integer tensor (computed in the integer dtype, truncated).
"""
import numpy as np

from msdiff import case, rand


def X(ms):
    return ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))


def R(ms, *shape, seed=0, low=-1.0, high=1.0):
    return ms.Tensor(rand(*shape, seed=seed, low=low, high=high))


# -- construction: copy vs share, ms.tensor, default dtypes -----------------------------------------

@case("tensor/ndarray_is_copied")
def _(ms):
    a = np.arange(3, dtype=np.float32)
    t = ms.Tensor(a)
    t[0] = 100.0
    a[1] = 55.0
    return a, t


@case("tensor/from_numpy_shares")
def _(ms):
    a = np.arange(3, dtype=np.float32)
    t = ms.from_numpy(a)
    t[0] = 100.0
    a[2] = 7.0
    return a, t


@case("tensor/tensor_function")
def _(ms):
    a = np.arange(3, dtype=np.float32)
    t = ms.tensor(a)
    t[0] = 100.0
    return a, ms.tensor([1, 2, 3]), ms.tensor([1.0, 2.0]), ms.tensor([1, 2], dtype=ms.float16), ms.tensor(3).dtype


@case("tensor/default_dtypes")
def _(ms):
    T = ms.Tensor
    return (T(1).dtype, T(1.0).dtype, T(True).dtype, T([1, 2.0]).dtype, T(np.float64(1.0)).dtype,
            T(np.ones(2)).dtype, T([]).dtype, T([]).shape, T((1, 2)).dtype, T([True, 1]).dtype,
            T(np.array([1, 2], np.int16)).dtype, T([np.float64(1.0)]).dtype)


@case("tensor/dtype_argument_converts")
def _(ms):
    return (ms.Tensor([1.5, 2.7], ms.int32), ms.Tensor(np.array([1, 2]), ms.float16),
            ms.Tensor(3, ms.float64), ms.Tensor(np.arange(4, dtype=np.float32), dtype=ms.int8))


@case("tensor/uint16_keeps_its_dtype")
def _(ms):
    t = ms.Tensor(np.array([40000, 3], np.uint16))
    return t.dtype, t * 2, t.asnumpy(), t + ms.Tensor(np.array([True, False]))


@case("tensor/uint32_uint64_arithmetic")
def _(ms):
    a = ms.Tensor(np.array([4000000000, 7], np.uint32))
    b = ms.Tensor(np.array([2 ** 63, 5], np.uint64))
    return a * a, a.dtype, b + b, b.dtype, a.astype(ms.float32), b.reshape(2, 1)


@case("tensor/uint16_with_int32_raises", raises=True)
def _(ms):
    return ms.Tensor(np.array([4], np.uint16)) + ms.Tensor(np.array([4], np.int32))


@case("tensor/uint32_with_float32_raises", raises=True)
def _(ms):
    return ms.Tensor(np.array([4], np.uint32)) * ms.Tensor(np.array([4.0], np.float32))


@case("tensor/python_int_beyond_int64_is_uint64")
def _(ms):
    return ms.Tensor(2 ** 63), ms.Tensor([2 ** 63, 1]), ms.Tensor(2 ** 63 - 1), ms.Tensor([1.0, 2 ** 63])


@case("tensor/python_int_beyond_uint64_raises", raises=True)
def _(ms):
    return ms.Tensor(2 ** 64)


@case("tensor/ragged_list_raises", raises=True)
def _(ms):
    return ms.Tensor([[1, 2], [3]])


@case("tensor/string_raises", raises=True)
def _(ms):
    return ms.Tensor("abc")


@case("tensor/promotion_table")
def _(ms):
    T = ms.Tensor
    i8, u8 = T(np.array([1], np.int8)), T(np.array([2], np.uint8))
    f16, i32, b = T(np.array([1.0], np.float16)), T(np.array([3], np.int32)), T(np.array([True]))
    bf = T(np.array([1.0], np.float32)).astype(ms.bfloat16)
    return ((i8 + u8).dtype, (f16 + bf).dtype, (i32 + f16).dtype, (b + 1).dtype, (i32 + 1.5).dtype,
            (u8 + 1).dtype, (f16 + 1.5).dtype, (i32 + T(np.array([1], np.int64))).dtype, (b + b).dtype)


# -- transpose / permute / view / reshape -----------------------------------------------------------

@case("tensor/transpose_varargs")
def _(ms):
    return X(ms).transpose(2, 0, 1)


@case("tensor/transpose_tuple_and_list")
def _(ms):
    return X(ms).transpose((2, 0, 1)), X(ms).transpose([1, 2, 0])


@case("tensor/transpose_no_args_reverses")
def _(ms):
    return X(ms).transpose(), R(ms, 3, 5).transpose()


@case("tensor/transpose_two_ints_swap")
def _(ms):
    x = X(ms)
    return x.transpose(0, 2), x.transpose(-1, 0), x.transpose(dim0=0, dim1=1)


@case("tensor/transpose_2d_both_orders")
def _(ms):
    m = R(ms, 2, 3)
    return m.transpose(0, 1), m.transpose(1, 0), m.T, m.t(), m.mT, m.H


@case("tensor/transpose_wrong_axis_count_raises", raises=True)
def _(ms):
    return X(ms).transpose(0)


@case("tensor/transpose_repeated_axis_raises", raises=True)
def _(ms):
    return X(ms).transpose(0, 0, 1)


@case("tensor/permute_forms")
def _(ms):
    x = X(ms)
    return x.permute(2, 0, 1), x.permute((2, 0, 1)), x.permute(dims=(1, 0, 2)), x.permute(-1, 0, 1)


@case("tensor/permute_too_few_raises", raises=True)
def _(ms):
    return X(ms).permute(0, 1)


@case("tensor/view_forms")
def _(ms):
    x = X(ms)
    return x.view(6, 4), x.view((4, 6)), x.view(-1), x.view(2, -1, 3)


@case("tensor/view_dtype_reinterprets_bits")
def _(ms):
    return ms.Tensor(np.array([1.0, -2.5, 0.0], np.float32)).view(ms.int32)


@case("tensor/reshape_forms")
def _(ms):
    x = X(ms)
    return x.reshape(6, 4), x.reshape((6, -1)), x.reshape([3, 8]), x.reshape(shape=(4, -1)), x.reshape(-1)


@case("tensor/reshape_bad_size_raises", raises=True)
def _(ms):
    return X(ms).reshape(5, 5)


@case("tensor/reshape_two_unknowns_raises", raises=True)
def _(ms):
    return X(ms).reshape(-1, -1)


@case("tensor/mT_of_3d")
def _(ms):
    return X(ms).mT


# -- tile / expand / broadcast ------------------------------------------------------------------------

@case("tensor/tile_forms")
def _(ms):
    x = R(ms, 2, 3)
    return x.tile((2, 1)), x.tile(2, 2), x.tile(dims=(1, 3)), x.tile(reps=(2, 1, 1))


@case("tensor/expand_forms")
def _(ms):
    x = R(ms, 2, 1, 4)
    return x.expand(2, 3, 4), x.expand((2, 3, 4)), x.expand(-1, 3, -1), x.expand(5, 2, 3, 4), \
        x.expand(ms.Tensor([2, 3, 4]))


@case("tensor/expand_as_view_as_broadcast_to")
def _(ms):
    y = R(ms, 1, 6, 1)
    return (y.expand_as(ms.Tensor(np.zeros((2, 6, 3), np.float32))),
            y.view_as(ms.Tensor(np.zeros((2, 3), np.float32))),
            y.broadcast_to((2, 6, 3)), y.broadcast_to((2, -1, 3)), y.broadcast_to(shape=(4, 6, 1)))


# -- swap / squeeze / flatten / split ----------------------------------------------------------------

@case("tensor/swapaxes_moveaxis")
def _(ms):
    x = X(ms)
    return x.swapaxes(0, 2), x.swapaxes(axis0=1, axis1=-1), x.swapdims(0, 1), x.moveaxis(0, 2), x.movedim(-1, 0)


@case("tensor/squeeze_forms")
def _(ms):
    y = R(ms, 1, 6, 1)
    return y.squeeze(), y.squeeze(0), y.squeeze((0, 2)), y.squeeze(axis=2), y.squeeze(1)


@case("tensor/unsqueeze_expand_dims")
def _(ms):
    x = X(ms)
    return x.unsqueeze(0), x.unsqueeze(dim=-1), x.expand_dims(1), x.expand_dims(axis=-2)


@case("tensor/unsqueeze_out_of_range_raises", raises=True)
def _(ms):
    return X(ms).unsqueeze(5)


@case("tensor/flatten_forms")
def _(ms):
    x = X(ms)
    return x.flatten(), x.flatten(1), x.flatten(0, 1), x.flatten(start_dim=1), x.flatten(order="F"), x.ravel()


@case("tensor/split_forms")
def _(ms):
    x = X(ms)
    return x.split(1), x.split(2, 2), x.split([1, 2], 1), x.split(3, dim=2), x.split(2, axis=2)


@case("tensor/chunk_forms")
def _(ms):
    x = X(ms)
    return x.chunk(2), x.chunk(2, 2), x.chunk(3, dim=2), x.chunk(2, axis=1)


@case("tensor/narrow")
def _(ms):
    x = X(ms)
    return x.narrow(2, 1, 2), x.narrow(1, 0, 1), x.narrow(0, 1, 1)


@case("tensor/narrow_out_of_range_raises", raises=True)
def _(ms):
    return X(ms).narrow(2, 3, 2)


@case("tensor/unbind")
def _(ms):
    x = X(ms)
    return x.unbind(1), x.unbind(), x.unbind(dim=2)


@case("tensor/nonzero")
def _(ms):
    return (ms.Tensor(np.array([[1, 0], [3, 4]], np.int32)).nonzero(),
            ms.Tensor(np.array([0.0, 1.0, 0.0, 2.0], np.float32)).nonzero())


@case("tensor/masked_select")
def _(ms):
    x = X(ms)
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return x.masked_select(x > 10), x.masked_select(ms.Tensor(np.array([True, False, True, False]))), \
        i.masked_select(i > 2)


@case("tensor/masked_fill")
def _(ms):
    x = X(ms)
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return x.masked_fill(x > 10, 0.0), x.masked_fill(x < 3, ms.Tensor(-1.0)), i.masked_fill(i > 2, 0)


@case("tensor/flip")
def _(ms):
    x = X(ms)
    return x.flip((0, 2)), x.flip([1]), x.flip(dims=(2,))


# -- reductions: sum / mean / prod ---------------------------------------------------------------------

@case("tensor/sum_forms")
def _(ms):
    x = R(ms, 2, 3, 4)
    return (x.sum(), x.sum(1), x.sum(axis=1), x.sum(dim=1), x.sum(1, keepdims=True), x.sum(1, keepdim=True),
            x.sum(1, True), x.sum((0, 2)), x.sum(dim=(0, 2), keepdim=True), x.sum(-1))


@case("tensor/sum_numpy_style_dtype_and_initial")
def _(ms):
    x = X(ms)
    return (x.sum(1, ms.float64), x.sum(1, ms.float64, True), x.sum(axis=(0, 1), keepdims=True, initial=1.0),
            x.sum(initial=10), x.sum(1, dtype=ms.float64))


@case("tensor/sum_integer_dtypes")
def _(ms):
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return (i.sum(), i.sum(axis=0), ms.Tensor(np.array([True, True])).sum(), ms.Tensor(np.array([1, 2], np.uint8)).sum(),
            ms.Tensor(np.array([1, 2], np.int8)).sum(0), i.sum(dtype=ms.bool_))


@case("tensor/sum_keep_dims_keyword_raises", raises=True)
def _(ms):
    return X(ms).sum(axis=1, keep_dims=True)


@case("tensor/sum_axis_out_of_range_raises", raises=True)
def _(ms):
    return X(ms).sum(5)


@case("tensor/mean_forms")
def _(ms):
    x = R(ms, 2, 3, 4)
    return (x.mean(), x.mean(1), x.mean(axis=1, keep_dims=True), x.mean(dim=1, keepdim=True), x.mean(1, True),
            x.mean((0, 1)), x.mean(axis=(0, 2)), x.mean(1, dtype=ms.float64))


@case("tensor/mean_keepdims_keyword_raises", raises=True)
def _(ms):
    return X(ms).mean(1, keepdims=True)


@case("tensor/prod_forms_and_dtypes")
def _(ms):
    x = R(ms, 2, 3, 4, seed=1)
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return (x.prod(), x.prod(1), x.prod(dim=1, keepdim=True), x.prod(1, True), x.prod(1, dtype=ms.float64),
            i.prod(), i.prod(0), ms.Tensor(np.array([1, 2], np.int8)).prod(), ms.Tensor(np.array([True, False])).prod())


@case("tensor/prod_axis_keyword_raises", raises=True)
def _(ms):
    return X(ms).prod(axis=1)


@case("tensor/prod_tuple_dim_raises", raises=True)
def _(ms):
    return X(ms).prod((0, 1))


# -- max / min / argmax / argmin ------------------------------------------------------------------------

@case("tensor/max_dim_returns_values_and_indices")
def _(ms):
    x = R(ms, 2, 3, 4, seed=2)
    return x.max(1), x.max(dim=1), x.max(1, True), x.max(1, keepdim=True), x.max(dim=-1, keepdim=True), x.max(-1)


@case("tensor/max_numpy_style_returns_values")
def _(ms):
    x = R(ms, 2, 3, 4, seed=2)
    return (x.max(), x.max(axis=1), x.max(1, keepdims=True), x.max(axis=1, keepdims=True), x.max((0, 1)),
            x.max(axis=(0, 1), keepdims=True), x.max(None), x.max(axis=None))


@case("tensor/max_return_indices")
def _(ms):
    x = R(ms, 2, 3, 4, seed=2)
    return x.max(axis=1, return_indices=True), x.max(axis=1, keepdims=True, return_indices=True)


@case("tensor/min_forms")
def _(ms):
    x = R(ms, 2, 3, 4, seed=3)
    return (x.min(), x.min(1), x.min(dim=1), x.min(1, True), x.min(axis=1), x.min(1, keepdims=True),
            x.min((0, 2)), x.min(axis=1, return_indices=True))


@case("tensor/max_min_integer_and_ties")
def _(ms):
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    t = ms.Tensor(np.array([[1.0, 3.0, 3.0]], np.float32))
    return i.max(), i.max(0), i.min(1), t.max(1), t.min(1)


@case("tensor/max_dim_out_of_range_raises", raises=True)
def _(ms):
    return X(ms).max(3)


@case("tensor/argmax_forms_are_int64")
def _(ms):
    x = R(ms, 2, 3, 4, seed=4)
    return (x.argmax(), x.argmax(1), x.argmax(axis=1), x.argmax(dim=1), x.argmax(1, True),
            x.argmax(1, keepdim=True), x.argmax(axis=1, keepdims=True), x.argmax(None), x.argmax(-1, keepdims=True),
            x.argmax(dim=None, keepdim=True))


@case("tensor/argmin_forms_are_int32")
def _(ms):
    x = R(ms, 2, 3, 4, seed=4)
    return (x.argmin(), x.argmin(1), x.argmin(dim=1, keepdim=True), x.argmin(axis=1, keepdims=True),
            x.argmin(axis=None, keepdims=True))


@case("tensor/argmax_ties_and_integers")
def _(ms):
    t = ms.Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], np.float32))
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return t.argmax(1), t.argmin(1), i.argmax(), i.argmin(0), ms.Tensor(np.array([False, True])).argmax()


@case("tensor/argmax_axis_out_of_range_raises", raises=True)
def _(ms):
    return X(ms).argmax(3)


@case("tensor/amax_amin")
def _(ms):
    x = R(ms, 2, 3, 4, seed=5)
    return x.amax((0, 2)), x.amax(axis=1), x.amax(1, True), x.amin(axis=(0, 1), keepdims=True), x.amin()


@case("tensor/all_any")
def _(ms):
    x = X(ms) > 5          # (MindSpore 2.10's CPU `any` over a float tensor is wrong; bools are fine)
    return x.all(), x.any(1), x.all(axis=1, keep_dims=True), x.any(dim=1, keepdim=True), x.all(0), x.any()


@case("tensor/std_var")
def _(ms):
    x = R(ms, 3, 4, seed=6)
    return x.std(), x.std(1), x.var(1), x.var(1, ddof=1), x.std(dim=1, correction=0), x.var(0, keepdims=True)


@case("tensor/cumsum_forms")
def _(ms):
    x = R(ms, 2, 3, seed=7)
    i = ms.Tensor(np.array([[1, 5], [3, 4]], np.int32))
    return x.cumsum(1), x.cumsum(), x.cumsum(dim=0), x.cumsum(axis=1), i.cumsum(0)


@case("tensor/logsumexp")
def _(ms):
    x = R(ms, 2, 3, 4, seed=8)
    return x.logsumexp(1), x.logsumexp(1, True), x.logsumexp((0, 2))


# -- sorting, gathering, elementwise methods ------------------------------------------------------------

@case("tensor/topk_sort_argsort_index_dtypes")
def _(ms):
    x = R(ms, 2, 3, 4, seed=9)
    return (x.topk(2), x.topk(2, dim=1), x.topk(2, 1, False), x.sort(), x.sort(1, True),
            x.sort(axis=1, descending=True), x.argsort(), x.argsort(1, True), x.argsort(axis=1))


@case("tensor/gather_both_forms")
def _(ms):
    x = X(ms)
    idx = ms.Tensor(np.array([[[0, 2, 1, 0]], [[1, 1, 2, 0]]], np.int64))
    return (x.gather(ms.Tensor(np.array([0, 2], np.int32)), 1), x.gather(1, idx),
            x.index_select(1, ms.Tensor(np.array([0, 2], np.int32))), x.index_select(2, ms.Tensor(np.array([3], np.int32))))


@case("tensor/where_method")
def _(ms):
    x = X(ms)
    return x.where(x > 5, 0.0), x.where(x < 3, ms.Tensor(np.full((2, 3, 4), -1.0, np.float32)))


@case("tensor/add_sub_alpha_div_rounding")
def _(ms):
    x, y = R(ms, 2, 3, seed=10), R(ms, 2, 3, seed=11)
    return (x.add(1, alpha=2), x.add(y, alpha=2), x.sub(y, alpha=3), x.div(0.3, rounding_mode="floor"),
            x.div(y), x.mul(2), x.pow(2))


@case("tensor/clamp_clip")
def _(ms):
    x = X(ms)
    return x.clamp(1, 5), x.clamp(min=1), x.clamp(max=ms.Tensor(3.0)), x.clip(2, 6)


@case("tensor/comparison_methods")
def _(ms):
    x = X(ms)
    return x.eq(1), x.ne(1), x.lt(3), x.le(3), x.gt(20), x.ge(20), x.equal(x)


@case("tensor/unary_math_methods")
def _(ms):
    x = R(ms, 2, 3, seed=12)
    i = ms.Tensor(np.array([[1, -5], [3, 4]], np.int32))
    return (x.abs(), x.exp(), x.sqrt().isnan(), x.square(), x.neg(), x.sin(), x.cos(), x.tanh(), x.sigmoid(),
            x.floor(), x.ceil(), x.sign(), i.abs(), i.sqrt(), x.softmax(-1), x.softmax(axis=0))


@case("tensor/log1p_expm1_tan_atan2")
def _(ms):
    x, y = R(ms, 2, 3, seed=13, low=0.1, high=0.9), R(ms, 2, 3, seed=14)
    return x.log1p(), x.expm1(), x.tan(), x.atan2(y)


@case("tensor/tril_triu")
def _(ms):
    m = R(ms, 3, 4, seed=15)
    return m.tril(), m.triu(1), m.tril(-1)


# -- conversion and metadata ------------------------------------------------------------------------------

@case("tensor/to_astype_type")
def _(ms):
    x = R(ms, 2, 3, seed=16, low=-3, high=3)
    return (x.to(ms.int32), x.to(dtype=ms.float16), x.to("cpu"), x.astype(ms.int32), x.astype("int32"),
            x.astype(np.int32), x.type(), x.type(ms.int64))


@case("tensor/cast_shortcuts")
def _(ms):
    x = R(ms, 2, 3, seed=17, low=-3, high=3)
    return x.float(), x.half(), x.int(), x.long(), x.bool(), x.double(), x.short(), x.bfloat16().float()


@case("tensor/byte_of_nonnegative")
def _(ms):
    return X(ms).byte()


@case("tensor/item_and_tolist")
def _(ms):
    x = X(ms)
    i = ms.Tensor(np.array([[1, 2], [3, 4]], np.int32))
    return x[0, 0, 1].item(), i[0, 0].item(), ms.Tensor(True).item(), i.tolist(), ms.Tensor(2.5).tolist(), \
        ms.Tensor(np.array([True, False])).tolist()


@case("tensor/item_of_many_raises", raises=True)
def _(ms):
    return X(ms).item()


@case("tensor/copy_contiguous")
def _(ms):
    x = X(ms)
    c = x.copy()
    c[0] = 0.0
    return x, c, x.contiguous(), x.is_contiguous(), x.transpose(1, 0, 2).is_contiguous(), \
        x.transpose(1, 0, 2).contiguous().is_contiguous()


@case("tensor/metadata")
def _(ms):
    x = X(ms)
    return (x.size, x.dim(), x.ndim, x.ndimension(), x.shape, x.nbytes, x.itemsize, x.strides, x.stride(),
            x.stride(1), x.numel(), x.nelement(), len(x), ms.Tensor(np.zeros(3, np.float16)).itemsize)


@case("tensor/new_ones_new_zeros")
def _(ms):
    x = X(ms)
    i = ms.Tensor(np.array([1, 2], np.int32))
    return x.new_ones((2, 3)), x.new_ones((2, 3), dtype=ms.int32), i.new_zeros((2,)), x.new_zeros(3), \
        x.new_zeros([1, 2], ms.float16)


@case("tensor/new_ones_varargs_sizes_raise", raises=True)
def _(ms):
    return X(ms).new_ones(2, 3)
