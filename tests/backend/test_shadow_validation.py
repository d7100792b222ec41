"""Shadow validation: every non-CPU kernel rerun on the CPU reference and compared."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.backend import DeviceTensor, get_backend, register_backend, validate_with_cpu
from minispore.backend import validate
from minispore.backend.validate import max_rel_error, tolerance
from minispore.common.errors import MinisporeRuntimeError
from minispore.ops.primitive import get_primitive

from backend_toys import QueueToyBackend, device_kernel, make_queue_toy


def test_error_measure_is_relative_above_one_and_absolute_below():
    assert max_rel_error(np.float32([200.0]), np.float32([100.0])) == pytest.approx(1.0)
    assert max_rel_error(np.float32([0.5]), np.float32([0.25])) == pytest.approx(0.25)   # |ref| < 1: absolute
    assert max_rel_error(np.float64([1e-9, 3.0]), np.float64([0.0, 3.0])) == pytest.approx(1e-9)
    assert max_rel_error(np.zeros((2, 0)), np.zeros((2, 0))) == 0.0


def test_error_measure_non_finite_values_must_match_exactly():
    nan, inf = np.nan, np.inf
    assert max_rel_error(np.array([nan, inf, -inf, 1.0]), np.array([nan, inf, -inf, 1.0])) == 0.0
    assert max_rel_error(np.array([nan, 1.0]), np.array([1.0, 1.0])) == np.inf
    assert max_rel_error(np.array([inf]), np.array([-inf])) == np.inf
    assert max_rel_error(np.array([1.0]), np.array([inf])) == np.inf


def test_error_measure_integers_and_bools_are_exact():
    assert max_rel_error(np.array([1, 2, 3]), np.array([1, 2, 3])) == 0.0
    assert max_rel_error(np.array([1, 2, 3]), np.array([1, 2, 4])) == np.inf
    assert max_rel_error(np.array([True, False]), np.array([True, True])) == np.inf


def test_tolerances_per_dtype():
    assert tolerance(np.float32) == 1e-5 and tolerance(np.float16) == 1e-3
    assert tolerance(ml_dtypes.bfloat16) == 1.6e-2 and tolerance(np.float64) == 1e-7
    assert tolerance(np.int32) == 0.0 and tolerance(np.bool_) == 0.0


def _toy_with(**host):
    register_backend("Toy", make_queue_toy(host=host))
    ms.set_context(device_target="Toy")
    return get_backend("Toy")


def test_a_wrong_kernel_is_caught_at_the_op_that_is_wrong():
    _toy_with(mul=lambda a, b: np.multiply(a, b) * (1 + 1e-3))
    x = ms.Tensor(np.full((3, 4), 2.0, np.float32))
    np.testing.assert_allclose((x * x).asnumpy(), 4.004, rtol=1e-6)     # off: not validating
    with validate_with_cpu():
        with pytest.raises(MinisporeRuntimeError) as e:
            x * x
    msg = str(e.value)
    assert "For 'mul', backend 'QueueToy' differs from the CPU reference" in msg
    assert "max relative error 0.001 > 1e-05" in msg and "(3, 4)" in msg
    assert "inputs: [(3, 4), (3, 4)]" in msg


def test_errors_within_the_dtype_tolerance_pass():
    _toy_with(mul=lambda a, b: (np.multiply(a.astype(np.float64), b) * (1 + 4e-4)).astype(a.dtype))
    h = ms.Tensor(np.full(4, 1.5, np.float16))
    f = ms.Tensor(np.full(4, 1.5, np.float32))
    with validate_with_cpu():
        (h * h).asnumpy()                                              # 4e-4 < 1e-3 for float16
        with pytest.raises(MinisporeRuntimeError, match="'mul'"):
            f * f                                                      # 4e-4 > 1e-5 for float32


def test_a_wrong_shape_and_a_right_kernel():
    _toy_with(add=lambda a, b: np.add(a, b)[:1], sub=np.subtract)
    x = ms.Tensor(np.ones((2, 3), np.float32))
    with validate_with_cpu():
        np.testing.assert_array_equal((x - x).asnumpy(), 0)
        with pytest.raises(MinisporeRuntimeError, match=r"returned output 0 of shape \(1, 3\), the CPU reference \(2, 3\)"):
            x + x


def test_validation_sees_the_inputs_before_a_kernel_overwrites_them():
    def add_in_place(a, b):          # a kernel that reuses its input's memory for the result
        a += b
        return a
    _toy_with(add=add_in_place)
    with validate_with_cpu():
        r = ms.Tensor(np.array([1.0, 2.0], np.float32)) + ms.Tensor(np.array([10.0, 20.0], np.float32))
    np.testing.assert_array_equal(r.asnumpy(), [11.0, 22.0])


def test_random_ops_keep_their_random_stream_and_are_not_compared():
    draws = []

    def device_uniform(*args, **attrs):               # a "device RNG": different numbers than NumPy's
        draws.append(1)
        return get_primitive("uniform").impl(*args, **attrs) * 0 + 0.5

    ms.set_seed(7)
    expected_next = ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy()   # CPU draw 1
    expected_after = ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy()  # CPU draw 2
    _toy_with(uniform=device_uniform)
    ms.set_seed(7)
    with validate_with_cpu():
        got = ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy()
    np.testing.assert_array_equal(got, [0.5, 0.5, 0.5])                  # not compared: no error
    ms.set_context(device_target="CPU")
    # the backend kernel consumed one draw; the shadow run's draw was rewound
    np.testing.assert_array_equal(ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy(), expected_after)
    assert draws == [1] and expected_next.shape == (3,)


def test_the_cpu_backend_and_fallbacks_are_never_wrapped():
    with validate_with_cpu():
        p = get_primitive("add")
        assert p.kernel is p.impl
        toy = _toy_with()
        assert get_primitive("exp").kernel is toy.fallback_kernel(get_primitive("exp"))


def test_validation_flag_rebinds_and_restores():
    _toy_with(add=np.add)
    p = get_primitive("add")
    assert p.kernel is np.add
    with validate_with_cpu():
        assert p.kernel is not np.add and p.kernel.__wrapped__ is np.add
        assert validate.enabled()
    assert p.kernel is np.add and not validate.enabled()


def test_device_kernels_are_validated_too():
    toy = QueueToyBackend()
    toy.device_kernels["neg"] = device_kernel(toy, lambda a: -a + 1)           # wrong by 1
    toy.device_kernels["exp"] = device_kernel(toy, np.exp)
    x = toy.to_device(np.array([0.5, 1.0], np.float32))
    out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    with validate_with_cpu():
        toy.device_kernel_for(get_primitive("exp"))([x], [out], {}, toy.default_stream)
        np.testing.assert_allclose(toy.to_host(out), np.exp([0.5, 1.0]), rtol=1e-6)
        with pytest.raises(MinisporeRuntimeError, match="For 'neg', backend 'QueueToy' differs"):
            toy.device_kernel_for(get_primitive("neg"))([x], [out], {}, toy.default_stream)


def test_the_environment_variable_turns_it_on_at_import():
    code = "from minispore.backend import validate; print(validate.enabled())"
    env = {**os.environ, "MINISPORE_VALIDATE_WITH_CPU": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.strip() == "True", r.stderr
    env["MINISPORE_VALIDATE_WITH_CPU"] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


def test_an_eager_kernel_staged_into_a_device_kernel_is_validated():
    toy = QueueToyBackend(kernels={"sub": lambda a, b: np.subtract(b, a)})       # operands swapped
    x = toy.to_device(np.array([1.0, 2.0], np.float32))
    y = toy.to_device(np.array([5.0, 5.0], np.float32))
    out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    toy.device_kernel_for(get_primitive("sub"))([x, y], [out], {}, toy.default_stream)   # not validating
    np.testing.assert_array_equal(toy.to_host(out), [4.0, 3.0])
    with validate_with_cpu():
        with pytest.raises(MinisporeRuntimeError, match="For 'sub', backend 'QueueToy' differs"):
            toy.device_kernel_for(get_primitive("sub"))([x, y], [out], {}, toy.default_stream)
