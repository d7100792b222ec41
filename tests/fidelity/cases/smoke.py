"""A few cases that pin the suite's own plumbing (dtype names, containers, errors)."""
import numpy as np

from msdiff import case


@case("smoke/add_float32")
def _(ms):
    return ms.Tensor(np.array([1.0, 2.0], np.float32)) + 1


@case("smoke/shape_is_tuple")
def _(ms):
    return ms.Tensor(np.zeros((2, 3), np.float32)).shape


@case("smoke/dtype_object")
def _(ms):
    return ms.Tensor(np.zeros(2, np.int32)).dtype


@case("smoke/matmul_bad_shapes", raises=True)
def _(ms):
    return ms.ops.matmul(ms.Tensor(np.zeros((2, 3), np.float32)), ms.Tensor(np.zeros((4, 5), np.float32)))
