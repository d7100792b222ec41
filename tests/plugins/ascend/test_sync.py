"""Streams are asynchronous: the plugin must synchronize before reading results, and the emulator
must catch it when it does not (launches are delayed 30 ms so the race always goes one way)."""
import os
import subprocess
import sys

import numpy as np

import minispore as ms
from minispore import ops


def test_eager_results_are_correct_with_slow_streams(on_ascend, slow_launches):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ops.exp(ms.Tensor(a)).asnumpy()
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)


def test_skipping_the_synchronize_returns_stale_data(emulator):
    """The same op with the plugin's synchronize disabled (fault injection) reads the output buffer
    before the kernel ran: the emulator's uninitialised-memory pattern, not exp(a)."""
    code = ("import numpy as np, minispore as ms; from minispore import ops;"
            "ms.set_context(device_target='Ascend');"
            "from minispore.backend import registry; registry.current_backend().libs.rt.aclemuSetLaunchDelayUs(30000);"
            "print(ops.exp(ms.Tensor(np.zeros(4, np.float32))).asnumpy().view(np.uint32).tolist())")
    env = {**os.environ, "MINISPORE_ASCEND_UNSAFE_SKIP_SYNC": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.stdout.strip() == str([0xA5A5A5A5] * 4), r.stdout + r.stderr
    env.pop("MINISPORE_ASCEND_UNSAFE_SKIP_SYNC")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.stdout.strip() == str([0x3F800000] * 4), r.stdout + r.stderr       # exp(0) = 1.0f


def test_sync_memcpy_does_not_wait_for_the_stream(ascend, slow_launches):
    """aclrtMemcpy copies immediately: a D2H issued before the stream ran the kernel is stale."""
    from minispore_ascend.aclnn import AclnnCall
    x = ascend.to_device(np.zeros(4, np.float32))
    o = ascend.to_device(np.full(4, 7.0, np.float32))
    s = ascend.create_stream()
    with AclnnCall(ascend, "aclnnExp") as c:
        c.launch(s, c.tensor(x), c.tensor(o))
    np.testing.assert_array_equal(ascend.to_host(o), 7.0)          # not yet
    ascend.synchronize_stream(s)
    np.testing.assert_array_equal(ascend.to_host(o), 1.0)          # now
    ascend.destroy_stream(s)
    for t in (x, o):
        ascend.free(t.buffer)


def _exp_on(ascend, x, o, stream):
    from minispore_ascend.aclnn import AclnnCall
    with AclnnCall(ascend, "aclnnExp") as c:
        c.launch(stream, c.tensor(x), c.tensor(o))


def test_events_order_two_streams(ascend, slow_launches):
    """s1 computes o = exp(x) behind a queue of earlier work; s2 copies o to p. With record/wait the
    copy sees exp(x); without, s2 (one queued task) finishes long before s1 (nine) and copies the
    old contents. Every task sleeps 30 ms, so s1's exp lands ~240 ms after s2's copy: a margin,
    not a race between two equal delays."""
    for use_event, expect in ((True, 1.0), (False, 5.0)):
        x = ascend.to_device(np.zeros(4, np.float32))
        o = ascend.to_device(np.full(4, 5.0, np.float32))
        p = ascend.to_device(np.zeros(4, np.float32))
        scratch = ascend.to_device(np.zeros(4, np.float32))
        s1, s2, ev = ascend.create_stream(), ascend.create_stream(), ascend.create_event()
        for _ in range(8):                       # earlier work on s1 (it touches only `scratch`)
            _exp_on(ascend, x, scratch, s1)
        _exp_on(ascend, x, o, s1)
        if use_event:
            ascend.record_event(ev, s1)
            ascend.stream_wait_event(s2, ev)
        ascend.runtime.memcpy_async(p.buffer.ptr, 16, o.buffer.ptr, 16, 3, s2)
        ascend.synchronize_stream(s2)
        np.testing.assert_array_equal(ascend.to_host(p), expect)
        ascend.synchronize_stream(s1)
        for s in (s1, s2):
            ascend.destroy_stream(s)
        ascend.destroy_event(ev)
        for t in (x, o, p, scratch):
            ascend.free(t.buffer)


def test_event_elapsed_time(ascend, slow_launches):
    s = ascend.create_stream()
    a, b = ascend.create_event(), ascend.create_event()
    x = ascend.to_device(np.zeros(4, np.float32))
    ascend.record_event(a, s)
    _exp_on(ascend, x, x, s)
    ascend.record_event(b, s)
    ascend.synchronize_stream(s)
    assert ascend.runtime.elapsed_ms(a, b) >= 25.0                 # the 30 ms launch delay
    for e in (a, b):
        ascend.destroy_event(e)
    ascend.destroy_stream(s)
    ascend.free(x.buffer)
