"""Tensor semantics that follow MindSpore 2.10 (the differential cases in
tests/fidelity/cases/tensor.py compare against the real wheel; these pin the same rules with
independent NumPy oracles, plus the places where minispore deliberately refuses what MindSpore
silently wraps)."""
import numpy as np
import pytest

import minispore as ms
from minispore import Tensor
from minispore.common.errors import OpTypeError, OpValueError


# -- copy vs share ---------------------------------------------------------------------------------

def test_tensor_of_ndarray_copies_both_ways():
    a = np.arange(4, dtype=np.float32)
    t = Tensor(a)
    t[0] = 100.0
    a[1] = -7.0
    np.testing.assert_array_equal(a, [0, -7, 2, 3])
    np.testing.assert_array_equal(t.asnumpy(), [100, 1, 2, 3])
    assert not np.shares_memory(t.asnumpy(), a)


def test_tensor_of_noncontiguous_ndarray_is_a_contiguous_copy():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    t = Tensor(a)
    assert t.is_contiguous() and t.dtype is ms.float64
    np.testing.assert_array_equal(t.asnumpy(), a)


def test_from_numpy_shares_and_tensor_of_tensor_shares():
    a = np.arange(4, dtype=np.int32)
    t = ms.from_numpy(a)
    t[0] = 9
    a[3] = -1
    assert t.dtype is ms.int32
    np.testing.assert_array_equal(a, [9, 1, 2, -1])
    np.testing.assert_array_equal(t.asnumpy(), a)
    u = Tensor(t)                                  # MindSpore: Tensor(tensor) shares the storage
    u[1] = 5
    assert a[1] == 5


def test_from_numpy_rejects_non_arrays_and_unsupported_dtypes():
    with pytest.raises(OpTypeError, match="from_numpy"):
        ms.from_numpy([1, 2])
    with pytest.raises(OpTypeError, match="from_numpy"):
        ms.from_numpy(np.array([1 + 2j]))


def test_tensor_function_is_tensor_with_a_copy():
    a = np.ones(3, np.float32)
    t = ms.tensor(a, ms.float16)
    assert isinstance(t, Tensor) and t.dtype is ms.float16
    t2 = ms.tensor(a)
    t2[0] = 5.0
    assert a[0] == 1.0
    assert ms.tensor([1, 2]).dtype is ms.int64 and ms.tensor(2.5).dtype is ms.float32


def test_internal_wrap_does_not_copy_so_op_results_stay_cheap():
    from minispore.common.tensor import _wrap
    a = np.zeros(3, np.float32)
    assert _wrap(a).asnumpy() is a


# -- storage dtype == reported dtype ---------------------------------------------------------------

@pytest.mark.parametrize("np_dtype,name", [(np.uint16, "UInt16"), (np.uint32, "UInt32"), (np.uint64, "UInt64")])
def test_wide_unsigned_dtypes_are_stored_and_reported_alike(np_dtype, name):
    t = Tensor(np.array([40000, 3], np_dtype))
    assert str(t.dtype) == name and t.asnumpy().dtype == np_dtype
    doubled = t * 2                                # computes (and wraps) in the reported dtype
    assert doubled.dtype is t.dtype
    np.testing.assert_array_equal(doubled.asnumpy(), (np.array([40000, 3], np_dtype) * np_dtype(2)))
    assert (t + Tensor(np.array([True, False]))).dtype is t.dtype
    assert t.astype(ms.float32).dtype is ms.float32


def test_uint16_no_longer_relabelled_as_int32():
    t = Tensor(np.array([40000], np.uint16)) * 2
    assert t.dtype is ms.uint16 and t.asnumpy()[0] == (40000 * 2) % 65536


@pytest.mark.parametrize("other", [np.int32, np.int64, np.uint8, np.float32, np.float16])
def test_wide_unsigned_refuse_implicit_conversion(other):
    with pytest.raises(OpTypeError, match="UInt16"):
        Tensor(np.array([4], np.uint16)) + Tensor(np.array([4], other))


def test_promote_names_the_op_when_told():
    with pytest.raises(OpTypeError, match="'concat'"):
        ms.dtype.promote(ms.uint32, ms.int8, op="concat")
    assert ms.dtype.promote(ms.uint64, ms.bool_) is ms.uint64
    assert ms.dtype.promote(ms.int8, ms.uint8) is ms.int16


def test_dtype_names_and_lookup():
    assert repr(ms.uint32) == "mindspore.uint32" and str(ms.uint64) == "UInt64"
    assert ms.dtype.as_dtype("uint16") is ms.uint16 and ms.dtype.as_dtype(np.uint64) is ms.uint64


# -- Python ints: default dtype and range -----------------------------------------------------------

def test_python_int_default_dtypes_follow_mindspore():
    assert Tensor(2 ** 63 - 1).dtype is ms.int64
    assert Tensor(2 ** 63).dtype is ms.uint64 and Tensor(2 ** 63).item() == 2 ** 63
    assert Tensor([2 ** 63]).dtype is ms.uint64
    assert Tensor([2 ** 63, 1]).dtype is ms.float32            # NumPy gives float64 -> Float32 (as MindSpore)


@pytest.mark.parametrize("data,dtype", [(300, ms.uint8), (-1, ms.uint8), ([1, 300], ms.uint8),
                                        (2 ** 40, ms.int32), ([[0, 2 ** 31]], ms.int32), (2 ** 64, None),
                                        ([2 ** 64], None), (-(2 ** 63) - 1, None)])
def test_python_ints_out_of_range_are_refused(data, dtype):
    # MindSpore 2.10 silently wraps (Tensor(300, uint8) == 44); minispore refuses, naming the range
    with pytest.raises(OpValueError, match="'Tensor'") as info:
        Tensor(data, dtype)
    assert "range" in str(info.value) or "Int64" in str(info.value)


def test_ndarray_values_cast_as_numpy_does():
    # an explicit dtype on an ndarray is a cast (like MindSpore): 300 as UInt8 wraps to 44
    np.testing.assert_array_equal(Tensor(np.array([300, 2]), ms.uint8).asnumpy(), [44, 2])
    np.testing.assert_array_equal(Tensor([1.5, -2.7], ms.int32).asnumpy(), [1, -2])


def test_bad_data_raises_minispore_errors():
    with pytest.raises(OpValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(OpTypeError, match="'Tensor'"):
        Tensor("abc")
    with pytest.raises(OpTypeError, match="numpy dtype complex128"):
        Tensor(np.array([1 + 2j]))


# -- call forms --------------------------------------------------------------------------------------

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def t():
    return Tensor(X)


def test_transpose_forms():
    np.testing.assert_array_equal(t().transpose().asnumpy(), X.transpose())
    np.testing.assert_array_equal(t().transpose(2, 0, 1).asnumpy(), X.transpose(2, 0, 1))
    np.testing.assert_array_equal(t().transpose((2, 0, 1)).asnumpy(), X.transpose(2, 0, 1))
    np.testing.assert_array_equal(t().transpose(0, 2).asnumpy(), X.swapaxes(0, 2))      # two ints swap
    np.testing.assert_array_equal(t().transpose(dim0=1, dim1=2).asnumpy(), X.swapaxes(1, 2))
    with pytest.raises(OpValueError, match="Tensor.transpose"):
        t().transpose(0)


def test_permute_view_reshape_varargs():
    np.testing.assert_array_equal(t().permute(2, 0, 1).asnumpy(), X.transpose(2, 0, 1))
    np.testing.assert_array_equal(t().permute(dims=(1, 0, 2)).asnumpy(), X.transpose(1, 0, 2))
    for shape in [(6, 4), (4, -1), (-1,)]:
        np.testing.assert_array_equal(t().view(*shape).asnumpy(), X.reshape(shape))
        np.testing.assert_array_equal(t().reshape(list(shape)).asnumpy(), X.reshape(shape))
    np.testing.assert_array_equal(t().reshape(shape=(8, 3)).asnumpy(), X.reshape(8, 3))
    with pytest.raises(OpTypeError, match="Tensor.reshape"):
        t().reshape(2.5, 4)


def test_view_dtype_reinterprets_bytes():
    a = np.array([1.0, -2.5], np.float32)
    np.testing.assert_array_equal(Tensor(a).view(ms.int32).asnumpy(), a.view(np.int32))
    with pytest.raises(OpValueError, match="Tensor.view"):
        Tensor(np.zeros(3, np.int8)).view(ms.int32)


def test_expand_tile_repeat():
    y = np.arange(4, dtype=np.float32).reshape(2, 1, 2)
    np.testing.assert_array_equal(Tensor(y).expand(2, 3, 2).asnumpy(), np.broadcast_to(y, (2, 3, 2)))
    np.testing.assert_array_equal(Tensor(y).expand(-1, 3, -1).asnumpy(), np.broadcast_to(y, (2, 3, 2)))
    np.testing.assert_array_equal(Tensor(y).tile(2, 1).asnumpy(), np.tile(y, (2, 1)))
    np.testing.assert_array_equal(Tensor(y).tile(reps=(1, 2, 1, 1)).asnumpy(), np.tile(y, (1, 2, 1, 1)))
    np.testing.assert_array_equal(Tensor(y).repeat(1, 2, 3).asnumpy(), np.tile(y, (1, 2, 3)))   # PyTorch's repeat
    with pytest.raises(OpValueError, match="Tensor.expand"):
        Tensor(y).expand(3, 2)


def test_reductions_pick_mindspores_overload():
    x = t()
    np.testing.assert_array_equal(x.sum(1, True).asnumpy(), X.sum(1, keepdims=True))
    assert x.sum(1, ms.float64).dtype is ms.float64                  # NumPy-style: 2nd positional is dtype
    assert x.sum(axis=0, initial=1.0).asnumpy()[0, 0] == X[:, 0, 0].sum() + 1
    np.testing.assert_array_equal(x.mean(axis=1, keep_dims=True).asnumpy(), X.mean(1, keepdims=True))
    with pytest.raises(OpTypeError, match="Tensor.mean"):
        x.mean(1, keepdims=True)
    with pytest.raises(OpTypeError, match="Tensor.sum"):
        x.sum(axis=1, keep_dims=True)


def test_max_min_dim_return_values_and_int64_indices():
    x = t()
    v, i = x.max(1)
    np.testing.assert_array_equal(v.asnumpy(), X.max(1))
    assert i.dtype is ms.int64 and (i.asnumpy() == X.argmax(1)).all()
    assert not isinstance(x.max(axis=1), tuple)                     # NumPy-style keyword: values only
    assert not isinstance(x.max(1, keepdims=True), tuple)
    v, i = x.min(dim=2, keepdim=True)
    assert v.shape == (2, 3, 1) and i.dtype is ms.int64
    v, i = x.max(axis=0, return_indices=True)
    np.testing.assert_array_equal(i.asnumpy(), X.argmax(0))


def test_index_and_product_dtypes():
    x = t()
    assert x.argmax().dtype is ms.int64 and x.argmin().dtype is ms.int32
    assert x.argmin(1).asnumpy().tolist() == X.argmin(1).tolist()
    i = Tensor(np.array([[2, 3], [4, 5]], np.int32))
    assert i.prod().dtype is ms.int64 and i.prod().item() == 120
    assert i.sum().dtype is ms.int64 and i.prod(0).asnumpy().tolist() == [8, 15]
    with pytest.raises(OpTypeError, match="Tensor.prod"):
        x.prod(axis=1)


def test_squeeze_skips_non_unit_axes_and_flatten_forms():
    y = Tensor(np.zeros((1, 6, 1), np.float32))
    assert y.squeeze(1).shape == (1, 6, 1) and y.squeeze((0, 2)).shape == (6,)
    assert t().flatten().shape == (24,) and t().flatten(1).shape == (2, 12) and t().flatten(0, 1).shape == (6, 4)


def test_conversions_and_metadata():
    x = t()
    assert x.to("cpu") is x and x.to(ms.int32).dtype is ms.int32 and x.to("CPU", ms.float16).dtype is ms.float16
    assert x.type() == "Float32" and x.type(ms.int8).dtype is ms.int8
    assert [x.double().dtype, x.short().dtype, x.byte().dtype] == [ms.float64, ms.int16, ms.uint8]
    assert x.stride() == [12, 4, 1] and x.stride(-1) == 1 and x.strides == (48, 16, 4)
    assert x.ndimension() == 3 and x.nelement() == 24
    assert x.new_ones((2,)).dtype is ms.float32 and x.new_zeros(3, ms.int32).dtype is ms.int32
    with pytest.raises(OpTypeError, match="Tensor.new_ones"):
        x.new_ones(2, 3)


def test_fill_and_zero_are_in_place():
    a = Tensor(np.ones((2, 2), np.float32))
    assert a.fill_(2.5) is a and (a.asnumpy() == 2.5).all()
    v0 = a._version
    assert a.zero_() is a and (a.asnumpy() == 0).all() and a._version > v0


def test_where_method_puts_the_tensor_in_the_true_branch():
    x = t()
    np.testing.assert_array_equal(x.where(x > 5, 0.0).asnumpy(), np.where(X > 5, X, 0.0))


def test_contiguous_gives_row_major():
    x = t().transpose(1, 0, 2)
    assert not x.is_contiguous() and x.contiguous().is_contiguous()
    np.testing.assert_array_equal(x.contiguous().asnumpy(), X.transpose(1, 0, 2))


def test_bad_call_forms_name_the_method():
    for bad in (lambda: t().sum(foo=1), lambda: t().max(dim=1, keepdims=True), lambda: t().flip(0, 2),
                lambda: t().argmax(axis=None, keepdims=True)):
        with pytest.raises(OpTypeError, match="Tensor."):
            bad()


def test_inplace_methods_write_back_and_bump_the_version():
    x = ms.Tensor(np.array([[1.0, -2.0], [3.0, 4.0]], np.float32))
    v0 = x._version
    assert x.add_(1) is x and x._version > v0
    np.testing.assert_allclose(x.asnumpy(), [[2.0, -1.0], [4.0, 5.0]])
    x.mul_(2).clamp_(-1, 6)
    np.testing.assert_allclose(x.asnumpy(), [[4.0, -1.0], [6.0, 6.0]])
    assert x.dtype == ms.float32 and x.type_as(ms.Tensor([1])).dtype == ms.int64
    assert x.reshape_as(ms.Tensor(np.zeros(4, np.float32))).shape == (4,)


def test_long_tail_methods_are_the_functional_ops():
    a = ms.Tensor(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32))
    np.testing.assert_allclose(a.det().asnumpy(), 5.0, rtol=1e-6)
    np.testing.assert_allclose(a.inverse().asnumpy(), np.linalg.inv(a.asnumpy()), rtol=1e-5)
    np.testing.assert_array_equal(ms.Tensor(np.array([-0.5, 0.0, 2.0], np.float32)).sgn().asnumpy(), [-1, 0, 1])
