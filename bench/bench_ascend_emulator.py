"""Ascend plugin on the emulator: launch overhead per node, and fused vs unfused attention.

    .venv/bin/python bench/bench_ascend_emulator.py

1. Kernel-by-kernel launch overhead: a chain of N tiny adds (8 floats) compiled with jit and run
   by the KBK executor on an ACL stream; the per-node time is (run time) / N, i.e. what the host
   spends per launch (descriptor creation, phase 1, phase 2, the emulator's queue). Compared with
   PyNative on the device (which also copies in/out and synchronizes per op) and the CPU O0 graph.
2. Fused attention (aclnnFlashAttentionScore, tiled) vs the unfused composite (matmul, softmax,
   matmul on device tensors) for growing sequence lengths: wall time and peak device memory (the
   emulator's allocation high-water mark). The composite holds a [B, N, S, S] score matrix; the
   fused path holds only O(S * D) per head.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

import minispore as ms
from minispore import ops
from minispore.backend import registry
from minispore.backend.base import DeviceTensor
from minispore.common import dtype as mstype

warnings.simplefilter("ignore")


def chain(n):
    def f(x):
        for _ in range(n):
            x = ops.add(x, x)
        return x
    return f


def best(fn, reps=5):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def launch_overhead():
    rows = []
    x = ms.Tensor(np.ones(8, np.float32))
    for n in (16, 64):
        f = chain(n)
        ms.set_context(device_target="CPU")
        jcpu = ms.jit(f, capture_mode="trace")
        jcpu(x)
        t_cpu = best(lambda: jcpu(x))
        ms.set_context(device_target="Ascend")
        jdev = ms.jit(chain(n), capture_mode="trace")
        jdev(x)
        t_kbk = best(lambda: jdev(x))
        t_eager = best(lambda: f(x), reps=3)
        ms.set_context(device_target="CPU")
        rows.append((n, t_cpu / n * 1e6, t_kbk / n * 1e6, t_eager / n * 1e6))
    print("## Kernel-by-kernel launch overhead (chain of N adds of 8 floats)\n")
    print("| nodes | CPU O0 graph µs/node | Ascend KBK (emulator) µs/node | Ascend PyNative µs/op | KBK / CPU | PyNative / KBK |")
    print("|---|---|---|---|---|---|")
    for n, c, k, e in rows:
        print(f"| {n} | {c:.1f} | {k:.1f} | {e:.1f} | {k / c:.1f}x | {e / k:.1f}x |")
    print()


def attention():
    b = registry.get_backend("Ascend")
    from minispore_ascend.aclnn import AclnnCall
    from minispore_ascend.attention import flash_attention_device
    emu = b.libs.emulator_extras
    dev = b.runtime.device_id
    rng = np.random.default_rng(0)
    B, N, D = 1, 2, 32
    print(f"## Fused vs unfused attention on the emulator (B={B}, N={N}, D={D}, float32, forward)\n")
    print("| S | fused ms | unfused ms | time ratio | fused peak MiB | unfused peak MiB | memory ratio | S×S scores MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for S in (256, 512, 1024):
        q, k, v = (b.to_device(rng.standard_normal((B, N, S, D)).astype(np.float32)) for _ in range(3))
        stream = b.default_stream

        def fused():
            outs = flash_attention_device(b, q, k, v, head_num=N)
            b.synchronize_stream(stream)
            for t in outs:
                b.free(t.buffer)

        def unfused():
            f32 = mstype.float32
            kt = DeviceTensor(b.alloc(k.nbytes), (B, N, D, S), f32)
            sc = DeviceTensor(b.alloc(B * N * S * S * 4), (B, N, S, S), f32)
            pr = DeviceTensor(b.alloc(B * N * S * S * 4), (B, N, S, S), f32)
            out = DeviceTensor(b.alloc(q.nbytes), q.shape, f32)
            b.device_kernels["transpose"]([k], [kt], {"perm": (0, 1, 3, 2)}, stream)
            b.device_kernels["matmul"]([q, kt], [sc], {}, stream)
            b.device_kernels["mul"]([sc, 1 / math.sqrt(D)], [sc], {}, stream)
            b.device_kernels["softmax"]([sc], [pr], {"axis": -1}, stream)
            b.device_kernels["matmul"]([pr, v], [out], {}, stream)
            b.synchronize_stream(stream)
            for t in (kt, sc, pr, out):
                b.free(t.buffer)

        res = {}
        for name, fn in (("fused", fused), ("unfused", unfused)):
            b.runtime.pool.empty_cache()
            emu.aclemuResetPeakMemory(dev)
            base = emu.aclemuGetPeakMemory(dev)
            t = best(fn, reps=2)
            res[name] = (t * 1e3, (emu.aclemuGetPeakMemory(dev) - base) / 2**20)
        (tf, mf), (tu, mu) = res["fused"], res["unfused"]
        print(f"| {S} | {tf:.1f} | {tu:.1f} | {tu / tf:.2f}x | {mf:.3f} | {mu:.3f} | {mu / mf:.1f}x | "
              f"{B * N * S * S * 4 / 2**20:.2f} |")
        for t in (q, k, v):
            b.free(t.buffer)
    print()


if __name__ == "__main__":
    print(f"Ascend runtime: {registry.get_backend('Ascend').info()['runtime']}\n")
    launch_overhead()
    attention()
