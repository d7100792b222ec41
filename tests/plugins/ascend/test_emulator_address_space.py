"""The emulator under an address-space limit (RLIMIT_AS, `ulimit -v`).

Its device addresses come from a PROT_NONE range, which uses no memory but counts against
RLIMIT_AS, and every device byte also has a host copy. So under a limit the emulated device is
sized from the address space the process can still reserve (a third of it) instead of failing every
allocation with a misleading "out of device memory"; a request beyond that size is the ordinary
out-of-memory error, whose message states the size and the limit behind it; and a range that cannot
be mapped at all is reported as the mmap failure it is. Each test runs in a child process, because
a limit cannot be lifted again once set and the emulator sizes a device when it opens it.
"""
import json
import os
import resource
import subprocess
import sys

import pytest

GiB = 1 << 30
LIMIT = 4 * GiB


def _run(code: str, limit: int | None = LIMIT) -> dict:
    """Run `code` in a child (under RLIMIT_AS = `limit` when given); it prints one JSON line."""
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))

    env = {k: v for k, v in os.environ.items() if k not in ("ACL_EMU_DEVICE_MEMORY", "MINISPORE_ASCEND_LIB_DIR")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                       preexec_fn=set_limit if limit else None)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _gib(n: int) -> str:
    """How the emulator's messages write a size of a GiB or more (an independent formatting)."""
    return f"{n / GiB:.1f} GiB"


def test_a_small_buffer_round_trips_under_a_4_gib_limit(emulator):
    out = _run("""
import json
import numpy as np
from minispore_ascend.backend import AscendBackend
b = AscendBackend()
free, total = b.runtime.mem_info()
data = np.arange(4096, dtype=np.float32) * 0.5 - 7
buf = b.alloc(data.nbytes)
b.copy_h2d(buf, data)
back = np.empty_like(data)
b.copy_d2h(back, buf)
print(json.dumps({"total": total, "free": free, "equal": bool((back == data).all())}))
""")
    assert out["equal"]
    # the device is no more than a third of the limit and no more than the 8 GiB default budget
    assert 64 << 20 <= out["total"] <= LIMIT // 3
    assert out["free"] == out["total"]


def test_minispore_ops_run_on_the_emulated_device_under_the_limit(emulator):
    out = _run("""
import json
import numpy as np
import minispore as ms
ms.set_context(device_target="Ascend")
x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
y = (ms.Tensor(x) * ms.Tensor(x) + 1).asnumpy()
print(json.dumps({"got": y.ravel().tolist(), "want": (x.astype(np.float64) ** 2 + 1).ravel().tolist()}))
""")
    assert out["got"] == pytest.approx(out["want"], rel=1e-6)


def test_beyond_the_sized_device_is_out_of_memory_naming_size_and_limit(emulator):
    out = _run("""
import json
from minispore_ascend.backend import AscendBackend
from minispore_ascend.acl.errors import AclOutOfMemoryError
b = AscendBackend()
free, total = b.runtime.mem_info()
small = b.alloc(1 << 20)                    # the device still works before and after the refusal
before = b.runtime.mem_info()[0]
try:
    b.runtime.malloc(total + 1)
    err = None
except AclOutOfMemoryError as e:
    err = {"code": e.code, "msg": str(e)}
after = b.runtime.mem_info()[0]
b.free(small)
print(json.dumps({"total": total, "err": err, "before": before, "after": after}))
""")
    err, total = out["err"], out["total"]
    assert err is not None and err["code"] == 207001
    msg = err["msg"]
    assert "out of device memory on device 0" in msg
    assert f"asked {total + 1} bytes" in msg and f"of {total} in use" in msg
    assert f"device 0 has {_gib(total)}" in msg and "less than the 8.0 GiB budget" in msg
    assert f"RLIMIT_AS, ulimit -v) is {_gib(LIMIT)}" in msg
    assert out["after"] == out["before"] < total      # the refused request took nothing


def test_a_host_that_cannot_back_the_buffer_is_not_called_device_memory(emulator):
    """The device has room, but the process's address space is used up by host arrays: the
    failure names malloc, its errno and the host, not "out of device memory"."""
    out = _run("""
import json, resource
import numpy as np
from minispore_ascend.backend import AscendBackend
from minispore_ascend.acl.errors import AclOutOfMemoryError
b = AscendBackend()
free, total = b.runtime.mem_info()
mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
hog = np.empty(resource.getrlimit(resource.RLIMIT_AS)[0] - mapped - total // 2, np.uint8)   # address space only
try:
    b.runtime.malloc(total - (1 << 20))
    err = None
except AclOutOfMemoryError as e:
    err = {"code": e.code, "msg": str(e)}
print(json.dumps({"err": err, "free": b.runtime.mem_info()[0], "total": total}))
""")
    err = out["err"]
    assert err is not None and err["code"] == 207001, out
    assert "the host is out of memory (not the device)" in err["msg"] and "out of device memory" not in err["msg"]
    assert "malloc of the" in err["msg"] and "errno 12" in err["msg"]
    assert out["free"] == out["total"]              # nothing was counted as allocated


def test_freed_space_is_reused_when_the_smaller_range_runs_out(emulator):
    """Addresses normally only grow (a stale pointer keeps faulting); in a range the size of the
    device, allocating and freeing more than its size in total must still work, and must never
    hand out memory that overlaps a live buffer."""
    out = _run("""
import json
import numpy as np
from minispore_ascend.backend import AscendBackend
b = AscendBackend()
rt = b.runtime
free, total = rt.mem_info()
keep = np.arange(1 << 16, dtype=np.int32)
kept = rt.malloc(keep.nbytes)
rt.memcpy(kept, keep.nbytes, keep.ctypes.data, keep.nbytes, 1)
chunk = total // 4
spans = []
for i in range(12):                          # 3x the device, so 3x the range, in total
    p = rt.malloc(chunk)
    spans.append((p, p + chunk))
    rt.free(p)
back = np.empty_like(keep)
rt.memcpy(back.ctypes.data, back.nbytes, kept, keep.nbytes, 2)
overlap = any(lo < kept + keep.nbytes and kept < hi for lo, hi in spans)
print(json.dumps({"intact": bool((back == keep).all()), "overlap": overlap,
                  "reused": len({lo for lo, _ in spans}) < len(spans)}))
""")
    assert out["intact"] and not out["overlap"]
    assert out["reused"]                         # some address was handed out twice: reuse happened


def test_an_unreservable_range_is_reported_as_the_mmap_failure(emulator):
    """Opening the device with almost no address space left: the mmap failure and its errno, not an
    out-of-memory error the pool would retry."""
    out = _run("""
import json, resource
from minispore_ascend.acl.loader import load_libraries
from minispore_ascend.acl.runtime import AclRuntime
from minispore_ascend.acl.errors import AclError, AclOutOfMemoryError
libs = load_libraries()                      # built and loaded before the limit
mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (mapped + (24 << 20), resource.RLIM_INFINITY))
try:
    AclRuntime(libs, 0)
    err = None
except AclError as e:
    err = {"code": e.code, "oom": isinstance(e, AclOutOfMemoryError), "msg": str(e)}
print(json.dumps({"err": err}))
""", limit=None)
    err = out["err"]
    assert err is not None and err["code"] == 500003 and not err["oom"]
    assert "aclrtSetDevice: cannot reserve the 64.0 MiB of address space" in err["msg"]
    assert "mmap failed with errno 12" in err["msg"] and "RLIMIT_AS" in err["msg"]


def test_without_a_limit_the_device_keeps_its_8_gib_default(emulator):
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this test process itself runs under an address-space limit")
    out = _run("""
import json
from minispore_ascend.backend import AscendBackend
print(json.dumps({"total": AscendBackend().runtime.mem_info()[1]}))
""", limit=None)
    assert out["total"] == 8 * GiB
