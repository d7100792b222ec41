"""The ACL bindings against the emulator: lifecycle rules, memory rules, error codes, handles."""
import ctypes
import os
import subprocess
import sys
import threading
from ctypes import byref, c_size_t, c_void_p

import numpy as np
import pytest

from minispore.backend.base import BackendUnavailableError
from minispore_ascend.acl import errors
from minispore_ascend.acl.loader import RUNTIME, generate_stub_source
from minispore_ascend.backend import AscendBackend


def _py(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_info_says_emulator_or_cann(ascend):
    info = ascend.info()
    assert info["runtime"] == "emulator" or info["runtime"].startswith("CANN at ")
    assert info["acl_version"] == "1.15.0" or ascend.libs.kind != "emulator"
    assert info["device_count"] >= 1 and info["device_kernels"] == len(ascend.device_kernels)


def test_every_bound_function_has_explicit_prototypes(ascend):
    for name, (restype, argtypes) in RUNTIME.items():
        fn = getattr(ascend.libs.rt, name)
        assert fn.restype is restype and list(fn.argtypes) == argtypes, name
    assert ascend.libs.nnopbase.aclCreateTensor.restype is c_void_p     # an int restype would truncate


def test_second_init_is_repeat_initialize_and_is_tolerated(ascend):
    assert ascend.libs.rt.aclInit(None) == errors.REPEAT_INITIALIZE
    msg = ascend.libs.rt.aclGetRecentErrMsg()
    assert b"already initialised" in msg
    assert ascend.libs.rt.aclGetRecentErrMsg() is None                # read clears it


def test_double_finalize_returns_repeat_finalize(emulator):
    code = ("from minispore_ascend.acl.loader import load_libraries as L; l=L().rt;"
            "print(l.aclInit(None), l.aclFinalize(), l.aclFinalize())")
    assert _py(code).stdout.split() == ["0", "0", "100037"]


def test_runtime_calls_before_set_device_fail_with_context_null(ascend):
    got = {}

    def worker():                                  # a new thread has no current context
        p = c_void_p()
        got["code"] = ascend.libs.rt.aclrtMalloc(byref(p), 64, 0)
        got["msg"] = ascend.libs.rt.aclGetRecentErrMsg()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got["code"] == 107002 and b"aclrtSetDevice" in got["msg"]


def test_device_id_out_of_range_is_a_clear_error(ascend):
    with pytest.raises(errors.AclDeviceError, match="device id 9 is out of range"):
        AscendBackend(device_id=9)


def test_visible_devices_are_honoured(emulator):
    code = ("import ctypes; from minispore_ascend.acl.loader import load_libraries as L; l=L().rt;"
            "n=ctypes.c_uint32(); l.aclrtGetDeviceCount(ctypes.byref(n)); print(n.value)")
    assert _py(code, ASCEND_RT_VISIBLE_DEVICES="1", ACL_EMU_DEVICE_COUNT="4").stdout.strip() == "1"
    assert _py(code, ASCEND_RT_VISIBLE_DEVICES="1, 2,3", ACL_EMU_DEVICE_COUNT="4").stdout.strip() == "1"
    assert _py(code, ASCEND_RT_VISIBLE_DEVICES="0,2,3", ACL_EMU_DEVICE_COUNT="4").stdout.strip() == "3"


def test_allocation_is_padded_aligned_and_uninitialised(ascend, emulator):
    rt = ascend.runtime
    free0, _ = rt.mem_info()
    ptr = rt.malloc(100)
    free1, _ = rt.mem_info()
    assert free0 - free1 == 128 + 32                  # ALIGN_UP(100, 32) + 32
    assert ptr % 64 == 0
    out = np.zeros(100, np.uint8)
    rt.memcpy(out.ctypes.data, 100, ptr, 100, 2)
    assert (out == 0xA5).all()                         # garbage, not zeros
    rt.free(ptr)


def test_device_memory_is_not_host_addressable(emulator):
    code = ("import ctypes; from minispore_ascend.backend import AscendBackend as A; b=A();"
            "p=b.runtime.malloc(64); print('got', ctypes.string_at(p, 4))")
    r = _py(code)
    assert r.returncode < 0 and "got" not in r.stdout  # SIGSEGV, as on a PCIe card


def test_memcpy_argument_errors(ascend):
    rt = ascend.runtime
    ptr = rt.malloc(64)
    host = np.zeros(16, np.float32)
    with pytest.raises(errors.AclError, match="107000"):
        rt.memcpy(ptr, 32, host.ctypes.data, 64, 1)     # count > destMax
    with pytest.raises(errors.AclError, match="does not match the pointers"):
        rt.memcpy(host.ctypes.data, 64, ptr, 64, 1)     # H2D with a host destination
    with pytest.raises(errors.AclError, match="100000"):
        rt.memcpy(ptr, 64, host.ctypes.data, 64, 9)     # kind outside the enum
    rt.free(ptr)
    with pytest.raises(errors.AclError, match="207002"):
        rt.free(ptr)                                    # double free


def test_out_of_device_memory_is_a_clear_error(emulator):
    code = ("from minispore_ascend.backend import AscendBackend as A; from minispore_ascend.acl.errors import "
            "AclOutOfMemoryError as E\nb=A()\ntry:\n    b.alloc(2<<20)\nexcept E as e:\n    print('OOM', e)")
    r = _py(code, ACL_EMU_DEVICE_MEMORY=str(1 << 20))
    assert "OOM aclrtMalloc failed with 207001" in r.stdout and "out of device memory" in r.stdout, r.stderr


def test_pool_reuses_blocks_and_empties_cache_on_oom(ascend):
    pool = ascend.runtime.pool
    p = pool.alloc(1000)
    pool.free(p)
    before = pool.mallocs
    q = pool.alloc(900)                                 # same 1024-byte bin: reused, no aclrtMalloc
    assert q == p and pool.mallocs == before
    pool.free(q)


def test_stub_library_gives_backend_unavailable(tmp_path, emulator):
    src = generate_stub_source(tmp_path / "stub.c")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libascendcl.so"), str(src)], check=True)
    code = ("from minispore.backend import registry\ntry:\n    registry.get_backend('Ascend')\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    r = _py(code, MINISPORE_ASCEND_LIB_DIR=str(tmp_path))
    assert "BackendUnavailableError" in r.stdout and "100039" in r.stdout and "link stub" in r.stdout, r.stdout + r.stderr


def test_executor_is_single_use(ascend):
    from minispore_ascend.aclnn import AclnnCall
    x = ascend.to_device(np.ones(4, np.float32))
    o = ascend.to_device(np.zeros(4, np.float32))
    op = ascend.libs.opapi
    with AclnnCall(ascend, "aclnnExp") as c:
        ws, ex = ctypes.c_uint64(), c_void_p()
        assert op.aclnnExpGetWorkspaceSize(c.tensor(x), c.tensor(o), byref(ws), byref(ex)) == 0
    s = ascend.default_stream
    assert op.aclnnExp(None, 0, ex, s) == 0
    assert op.aclnnExp(None, 0, ex, s) == 561103        # consumed by the first phase 2
    assert b"not live" in ascend.libs.rt.aclGetRecentErrMsg()
    ascend.synchronize_stream(s)
    assert np.allclose(ascend.to_host(o), np.e)
    for t in (x, o):
        ascend.free(t.buffer)


def test_aclnn_phase1_rejects_bad_shapes(ascend):
    from minispore_ascend.aclnn import AclnnCall
    from minispore.backend.base import DeviceTensor
    a = ascend.to_device(np.ones((2, 3), np.float32))
    b = ascend.to_device(np.ones((4, 5), np.float32))
    o = ascend.to_device(np.ones((2, 5), np.float32))
    with pytest.raises(errors.AclnnError, match="161002.*mat2's second-to-last"):
        with AclnnCall(ascend, "aclnnMatmul") as c:
            c.launch(ascend.default_stream, c.tensor(a), c.tensor(b), c.tensor(o), 1)
    for t in (a, b, o):
        ascend.free(t.buffer)


def test_faults_during_execution_surface_at_synchronize(ascend, slow_launches):
    """A buffer freed while a kernel that reads it is still queued: aclrtFree does not wait, the
    kernel then finds no allocation, and the next synchronize reports 507015."""
    from minispore_ascend.aclnn import AclnnCall
    rt = ascend.runtime
    x = ascend.to_device(np.ones(8, np.float32))
    o = ascend.to_device(np.zeros(8, np.float32))
    s = ascend.create_stream()
    with AclnnCall(ascend, "aclnnExp") as c:
        c.launch(s, c.tensor(x), c.tensor(o))
    ascend.runtime.pool.size_of.pop(x.buffer.ptr)
    rt.free(x.buffer.ptr)                               # straight to aclrtFree, bypassing the pool
    with pytest.raises(errors.AclAsyncError, match="507015.*freed before"):
        ascend.synchronize_stream(s)
    ascend.destroy_stream(s)
    ascend.free(o.buffer)
