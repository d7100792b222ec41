"""The Backend interface: CPU reference memory, explicit fallbacks, staging between eager and
device kernels (on a toy device whose streams only run at synchronize), and device kernels."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.backend import (Backend, BackendFallbackWarning, CPUBackend, DeviceTensor, get_backend,
                               register_backend, rebind_kernels)
from minispore.common.errors import MinisporeRuntimeError, OpValueError
from minispore.ops.primitive import get_primitive

from backend_toys import QueueToyBackend, device_kernel, make_queue_toy


# ---------------------------------------------------------------------------------------------
# the CPU reference backend implements the memory and stream interface
def test_cpu_backend_memory_round_trip_with_offsets():
    b = get_backend("CPU")
    buf = b.alloc(64)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b.copy_h2d(buf, a, offset=8)
    out = np.empty((2, 3), np.float32)
    b.copy_d2h(out, buf, offset=8)
    np.testing.assert_array_equal(out, a)
    dst = b.alloc(32)
    b.copy_d2d(dst, buf, 24, dst_offset=4, src_offset=8)
    t = DeviceTensor(dst, (2, 3), ms.float32, offset=4)
    np.testing.assert_array_equal(b.to_host(t), a)
    np.testing.assert_array_equal(b.as_array(t), a)
    assert t.nbytes == 24 and t.size == 6 and t.ndim == 2
    b.free(buf)
    b.free(dst)


def test_cpu_backend_copies_non_contiguous_and_bfloat16():
    b = get_backend("CPU")
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T            # a non-contiguous view
    t = b.to_device(a)
    np.testing.assert_array_equal(b.to_host(t), a)
    h = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    t = b.to_device(h)
    assert t.dtype is ms.bfloat16 and t.nbytes == 6
    np.testing.assert_array_equal(b.to_host(t).astype(np.float32), [1.5, -2.25, 3.0])


def test_cpu_backend_rejects_bad_memory_use():
    b = get_backend("CPU")
    with pytest.raises(OpValueError, match="alloc"):
        b.alloc(0)
    buf = b.alloc(16)
    with pytest.raises(OpValueError, match="copy_h2d"):
        b.copy_h2d(buf, np.zeros(5, np.float32))                    # 20 bytes into 16
    b.free(buf)
    with pytest.raises(OpValueError, match="copy_d2h"):
        b.copy_d2h(np.zeros(2, np.float32), buf)                    # freed


def test_cpu_backend_streams_and_events_are_synchronous():
    b = get_backend("CPU")
    s, e = b.create_stream(), b.create_event()
    b.record_event(e, s)
    b.stream_wait_event(s, e)
    b.synchronize_event(e)
    b.synchronize_stream(s)
    b.synchronize()
    assert e.recorded
    b.destroy_event(e)
    b.destroy_stream(s)


def test_cpu_backend_runs_every_primitive_and_never_falls_back():
    b = get_backend("CPU")
    for name in ("add", "softmax", "matmul"):
        p = get_primitive(name)
        assert b.kernel_for(p) is p.impl and b.implements(name)
        assert p.kernel is p.impl
    assert not b.fallbacks


def test_cpu_device_kernel_for_computes_into_the_output_buffer():
    b = get_backend("CPU")
    x = b.to_device(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    out = DeviceTensor(b.alloc(16), (2, 2), ms.float32)
    b.device_kernel_for(get_primitive("mul"))([x, 3.0], [out], {}, b.default_stream)
    np.testing.assert_array_equal(b.as_array(out), [[3, 6], [9, 12]])


# ---------------------------------------------------------------------------------------------
# explicit fallback
def test_fallback_warns_once_per_op_and_counts_every_call():
    register_backend("Toy", make_queue_toy(host={"add": np.add}))
    ms.set_context(device_target="Toy")
    toy = get_backend("Toy")
    x = ms.Tensor(np.array([0.0, 1.0], np.float32))
    with pytest.warns(BackendFallbackWarning) as record:
        y = ops.exp(x)
        ops.exp(x)
        x + x                                                       # has a kernel: no warning
    assert [str(w.message) for w in record] == ["QueueToy has no kernel for 'exp'; running the CPU reference"]
    assert record[0].filename == __file__                           # points at the user's line
    np.testing.assert_allclose(y.asnumpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    assert toy.fallbacks == {"exp": 2}
    toy.reset_fallbacks()
    assert not toy.fallbacks
    with pytest.warns(BackendFallbackWarning):                      # announced again after a reset
        ops.exp(x)


def test_a_kernel_can_hand_one_call_to_the_counted_fallback():
    toy = QueueToyBackend()

    def add_float32_only(a, b):
        if a.dtype != np.float32:
            return toy.fallback_kernel(get_primitive("add"))(a, b)
        return np.add(a, b)

    toy.kernels["add"] = add_float32_only
    register_backend("Toy", lambda: toy)
    ms.set_context(device_target="Toy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendFallbackWarning)
        r64 = ms.Tensor(np.ones(2, np.float64)) + ms.Tensor(np.ones(2, np.float64))
        r32 = ms.Tensor(np.ones(2, np.float32)) + ms.Tensor(np.ones(2, np.float32))
    np.testing.assert_array_equal(r64.asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(r32.asnumpy(), [2.0, 2.0])
    assert toy.fallbacks == {"add": 1}


# ---------------------------------------------------------------------------------------------
# staging: eager kernels from device kernels and back
def test_the_toy_device_really_defers_work_until_synchronize():
    """The property the staging tests rely on: without a synchronize, a copy reads stale memory."""
    toy = QueueToyBackend()
    x = toy.to_device(np.array([1.0, 2.0], np.float32))
    out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    device_kernel(toy, np.negative)([x], [out], {}, toy.default_stream)
    stale = toy.to_host(out)                                        # no synchronize: garbage (0xA5 bytes)
    assert not np.array_equal(stale, [-1.0, -2.0])
    toy.synchronize_stream(toy.default_stream)
    np.testing.assert_array_equal(toy.to_host(out), [-1.0, -2.0])


def test_eager_kernel_staged_from_a_device_kernel_synchronizes_and_frees():
    register_backend("Toy", make_queue_toy(device={"mul": np.multiply, "matmul": np.matmul}))
    ms.set_context(device_target="Toy")
    toy = get_backend("Toy")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    bm = np.arange(12, dtype=np.float32).reshape(3, 4).T.T          # same values, fresh array
    y = ms.Tensor(a) * 2.5
    z = ops.matmul(ms.Tensor(a), ms.Tensor(bm))
    np.testing.assert_array_equal(y.asnumpy(), a * 2.5)
    np.testing.assert_allclose(z.asnumpy(), a @ bm, rtol=1e-6)
    assert y.dtype == ms.float32 and z.shape == (2, 4)
    assert toy.default_stream.launched == 2 and not toy.fallbacks
    assert toy.live_buffers == 0                                    # every staging buffer was freed


def test_staged_kernel_handles_multi_output_and_0d():
    register_backend("Toy", make_queue_toy())
    toy = get_backend("Toy")

    def split_kernel(ins, outs, attrs, stream):
        def run():
            cuts = np.cumsum(attrs["sizes"])[:-1]
            parts = np.split(toy.view(ins[0]), cuts, axis=attrs["axis"])
            for o, p in zip(outs, parts):
                toy.view(o)[...] = p
        toy.enqueue(stream, run)

    toy.device_kernels["split"] = split_kernel
    toy.device_kernels["neg"] = device_kernel(toy, np.negative)
    ms.set_context(device_target="Toy")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    parts = ops.split(ms.Tensor(x), 2, axis=1)
    assert [p.shape for p in parts] == [(2, 2), (2, 2)]
    np.testing.assert_array_equal(parts[1].asnumpy(), x[:, 2:])
    np.testing.assert_array_equal(ops.neg(ms.Tensor(np.float32(3.0))).asnumpy(), -3.0)
    assert not toy.fallbacks


def test_device_kernel_for_a_primitive_without_device_kernel_stages_through_host():
    toy = QueueToyBackend(kernels={"add": np.add})
    s = toy.create_stream()
    x = toy.to_device(np.array([1.0, 2.0], np.float32))
    neg_out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    # a queued producer: its result exists only after the stream runs
    device_kernel(toy, np.negative)([x], [neg_out], {}, s)
    out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    toy.device_kernel_for(get_primitive("add"))([neg_out, x], [out], {}, s)      # host kernel
    assert s.launched == 1                                          # it synchronized the producer first
    np.testing.assert_array_equal(toy.to_host(out), [0.0, 0.0])
    exp_out = DeviceTensor(toy.alloc(8), (2,), ms.float32)
    with pytest.warns(BackendFallbackWarning, match="'exp'"):
        toy.device_kernel_for(get_primitive("exp"))([x], [exp_out], {}, s)       # no kernel at all
    np.testing.assert_allclose(toy.to_host(exp_out), np.exp([1.0, 2.0]), rtol=1e-6)
    assert toy.fallbacks == {"exp": 1}


def test_device_kernel_for_returns_the_backends_own_device_kernel():
    toy = QueueToyBackend()
    k = device_kernel(toy, np.negative)
    toy.device_kernels["neg"] = k
    assert toy.device_kernel_for(get_primitive("neg")) is k
    assert toy.implements("neg") and not toy.implements("exp")


def test_graph_mode_runs_on_the_selected_backend():
    register_backend("Toy", make_queue_toy(host={"mul": np.multiply}))
    ms.set_context(device_target="Toy")
    toy = get_backend("Toy")
    calls = []
    toy.kernels["add"] = lambda a, b: calls.append("add") or np.add(a, b)
    rebind_kernels()
    f = ms.jit(lambda x: x * x + x, capture_mode="trace")
    r = f(ms.Tensor(np.array([1.0, 2.0], np.float32)))
    np.testing.assert_array_equal(r.asnumpy(), [2.0, 6.0])
    assert calls and not toy.fallbacks


def test_backend_base_methods_name_what_is_missing():
    class Half(Backend):
        name = "Half"
    with pytest.raises(NotImplementedError, match="Half.alloc"):
        Half().alloc(8)
    with pytest.raises(NotImplementedError, match="Half.create_stream"):
        Half().default_stream


def test_info_reports_kernel_counts():
    toy = QueueToyBackend(kernels={"add": np.add})
    info = toy.info()
    assert info["kernels"] == 1 and info["device_kernels"] == 0 and info["runtime"] == "bytearray pool"
    assert CPUBackend().info()["kernels"] >= 100


def test_out_of_device_memory_is_a_minispore_error_through_eager_staging():
    register_backend("Toy", lambda: QueueToyBackend(pool_bytes=256))
    ms.set_context(device_target="Toy")
    toy = get_backend("Toy")
    toy.device_kernels["neg"] = device_kernel(toy, np.negative)
    rebind_kernels()
    with pytest.raises(MinisporeRuntimeError, match="out of device memory"):
        ops.neg(ms.Tensor(np.zeros(1000, np.float32)))
    assert toy.live_buffers == 0                                    # the input was freed on the way out


def test_to_device_keeps_0d_shapes():
    for b in (get_backend("CPU"), QueueToyBackend()):
        t = b.to_device(np.array(2.5, np.float32))
        assert t.shape == () and t.nbytes == 4
        assert b.to_host(t).shape == () and float(b.to_host(t)) == 2.5


def test_graph_executor_defaults_to_the_core_executors():
    assert QueueToyBackend().graph_executor(object()) is None


def test_host_backend_is_a_complete_backend_with_counted_fallbacks():
    from minispore.backend import HostBackend

    class Tiny(HostBackend):
        name = "Tiny"

        def __init__(self):
            super().__init__()
            self.kernels = {"add": lambda a, b: np.add(a, b) + 1}

    register_backend("Tiny", Tiny)
    ms.set_context(device_target="Tiny")
    x = ms.Tensor(np.zeros(3, np.float32))
    np.testing.assert_array_equal((x + x).asnumpy(), [1, 1, 1])
    with pytest.warns(BackendFallbackWarning, match="Tiny has no kernel for 'sub'"):
        x - x
    tiny = get_backend("Tiny")
    assert tiny.fallbacks == {"sub": 1} and tiny.implements("add") and not tiny.implements("sub")
    t = tiny.to_device(np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(tiny.as_array(t), [0, 1, 2, 3])
