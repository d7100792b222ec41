"""Memory-handling reliability of the Ascend binding: bad sizes, double frees and use after free are
rejected in Python with the plugin's ACL error, before ctypes (which wraps -1 to 2**64 - 1 and
2**64 + 5 to 5) or the caching pool (which keeps freed memory allocated, so the runtime cannot
notice) could let them through. A rejected call leaves the pool's accounting unchanged."""
import numpy as np
import pytest

from minispore_ascend.acl import errors
from minispore_ascend.acl.runtime import MAX_REQUEST

BAD_SIZES = [-1, 2 ** 64 + 5, 2 ** 64, 1.5, True, "64"]


def _pool_state(ascend):
    pool = ascend.runtime.pool
    return pool.stats(), dict(pool.size_of), {k: list(v) for k, v in pool.free_blocks.items() if v}


@pytest.mark.parametrize("nbytes", BAD_SIZES, ids=repr)
def test_backend_alloc_rejects_a_size_that_is_not_a_size_t(ascend, nbytes):
    before = _pool_state(ascend)
    with pytest.raises(errors.AclError, match=r"aclrtMalloc failed with 100000 \(ACL_ERROR_INVALID_PARAM\).*size") as e:
        ascend.alloc(nbytes)
    assert e.value.code == 100000 and type(e.value) is errors.AclError
    assert _pool_state(ascend) == before                 # nothing allocated, nothing counted


@pytest.mark.parametrize("nbytes", [-1, 2 ** 64 + 5, MAX_REQUEST + 1], ids=repr)
def test_pool_and_raw_malloc_check_the_size_before_ctypes(ascend, nbytes):
    before = _pool_state(ascend)
    with pytest.raises(errors.AclError, match="100000") as e:
        ascend.runtime.pool.alloc(nbytes)
    assert e.value.code == 100000
    with pytest.raises(errors.AclError, match="100000") as e:
        ascend.runtime.malloc(nbytes if nbytes != MAX_REQUEST + 1 else 2 ** 64)
    # not an out-of-memory error from the C side: the call never reached aclrtMalloc
    assert e.value.code == 100000 and not isinstance(e.value, errors.AclOutOfMemoryError)
    assert _pool_state(ascend) == before


def test_a_size_of_zero_is_still_a_valid_request(ascend):
    buf = ascend.alloc(0)
    assert buf.nbytes == 0
    ascend.free(buf)


def test_double_free_raises_the_acl_error_and_changes_nothing(ascend):
    buf = ascend.alloc(1000)
    ascend.free(buf)
    before = _pool_state(ascend)
    with pytest.raises(errors.AclError, match=r"aclrtFree failed with 207002 \(ACL_ERROR_RT_MEMORY_FREE\).*double free"):
        ascend.free(buf)
    with pytest.raises(errors.AclError, match="207002"):
        ascend.free_after_sync(buf, None)
    assert _pool_state(ascend) == before


def test_pool_double_free_is_an_acl_error_not_a_key_error(ascend):
    pool = ascend.runtime.pool
    ptr = pool.alloc(700)
    pool.free(ptr)
    before = _pool_state(ascend)
    with pytest.raises(errors.AclError, match="207002.*not a live block") as e:
        pool.free(ptr)
    assert not isinstance(e.value, KeyError)
    assert _pool_state(ascend) == before


def test_a_stale_free_cannot_release_the_buffer_that_reused_its_address(ascend):
    """The pool hands a freed block's address to the next request of its size; freeing the stale
    handle again must not take the new owner's memory away."""
    old = ascend.alloc(4096)
    ascend.free(old)
    new = ascend.alloc(4096)
    assert new.ptr == old.ptr                            # the cached block is reused
    with pytest.raises(errors.AclError, match="207002"):
        ascend.free(old)
    data = np.arange(1024, dtype=np.float32)
    ascend.copy_h2d(new, data)
    out = np.empty_like(data)
    ascend.copy_d2h(out, new)
    np.testing.assert_array_equal(out, data)
    ascend.free(new)


def test_copies_to_and_from_a_freed_buffer_are_rejected(ascend):
    live, dead = ascend.alloc(64), ascend.alloc(64)
    host = np.arange(16, dtype=np.float32)
    ascend.copy_h2d(live, host)
    ascend.free(dead)
    calls = {
        "h2d": lambda: ascend.copy_h2d(dead, host),
        "d2h": lambda: ascend.copy_d2h(np.empty(16, np.float32), dead),
        "d2d into": lambda: ascend.copy_d2d(dead, live, 64),
        "d2d from": lambda: ascend.copy_d2d(live, dead, 64),
    }
    for name, call in calls.items():
        with pytest.raises(errors.AclError, match=r"aclrtMemcpy failed with 107000.*use after free"):
            call()
    out = np.empty(16, np.float32)                       # the live buffer was not overwritten
    ascend.copy_d2h(out, live)
    np.testing.assert_array_equal(out, host)
    ascend.free(live)


STREAM_UNDER_AS_LIMIT = r'''
import resource
from ctypes import byref, c_void_p
from minispore_ascend.acl import errors
from minispore_ascend.acl.loader import load_libraries
from minispore_ascend.acl.runtime import AclRuntime

rt = AclRuntime(load_libraries(), 0)
def vm_bytes():
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:"))
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (1 << 20), hard))   # no room for a thread stack
handle = c_void_p(12345)
code = rt.rt.aclrtCreateStream(byref(handle))
msg = rt.rt.aclGetRecentErrMsg()
try:
    rt.create_stream()
    raised = None
except errors.AclError as e:
    raised = e.code
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
s = rt.create_stream()                                   # with room again, streams work
rt.destroy_stream(s)
print(code, handle.value, raised, (msg or b"").decode())
'''


def test_create_stream_fails_with_its_code_when_the_worker_thread_cannot_start(emulator):
    """pthread_create fails under an address-space limit; the old emulator returned a handle with
    no worker thread, and synchronizing it hung forever (hence the subprocess timeout)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", STREAM_UNDER_AS_LIMIT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    code, handle, raised, msg = r.stdout.split(" ", 3)
    assert (code, handle, raised) == ("500003", "12345", "500003")     # the output handle is untouched
    assert "pthread_create failed" in msg
