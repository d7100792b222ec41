"""Device profiles: the handful of numbers a roofline needs to turn FLOPs and bytes into seconds.

A `DeviceProfile` says how fast a device multiplies matrices (`matmul_flops`, per dtype), how
fast it does everything else (`vector_flops`), how fast it streams memory (`mem_bw`), how long
launching one kernel costs (`launch_s`) and how much memory a program may use (`usable_bytes`).
The roofline model of one node is then

    time = max(flops / peak_flops(kind, dtype), bytes / mem_bw) + launch_s

(Williams, Waterman & Patterson, "Roofline: an insightful visual performance model", CACM 2009):
a kernel is limited either by arithmetic or by memory traffic, whichever takes longer.

Three profiles ship:

* **cpu** - THIS machine, calibrated by a short measurement (a float32 and a float64 matmul, an
  elementwise add that stays in cache, a 64 MiB copy for bandwidth, and the per-node overhead of
  the O0 executor on a graph of tiny ops). About half a second, then cached on disk
  (`~/.cache/minispore/device_profiles.json`, or `$MINISPORE_CACHE_DIR`), keyed by the CPU model,
  core count, NumPy version and BLAS thread count, so a different machine or setting re-measures.
  These are *achieved* rates, so CPU predictions are realistic rather than optimistic.
* **h100** - NVIDIA H100 SXM5 80 GB, datasheet peaks.
* **ascend910b** - Huawei Ascend 910B, the figures quoted for it (see the sources: Huawei does
  not publish a full datasheet, so some numbers are marked as assumptions).

For the accelerators the rates are *peaks*, so predicted times are lower bounds (real kernels
reach perhaps 50-80% of peak matmul throughput); `DeviceProfile.scaled(efficiency)` derates them.
Add your own with `register_device(DeviceProfile(...))` or `load_profile(path)` (a JSON file with
the same fields).
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from dataclasses import dataclass, field

import numpy as np

from ...common.errors import OpValueError

GiB = 1 << 30
MiB = 1 << 20


@dataclass
class DeviceProfile:
    """What the roofline needs to know about one device (see the module docstring)."""

    name: str                              # the key: "cpu", "h100", "ascend910b"
    display_name: str
    memory_bytes: int                      # physical memory
    usable_bytes: int                      # what a program may use (the framework reserves some)
    mem_bw: float                          # bytes/s of main memory (HBM / DRAM)
    matmul_flops: dict                     # dtype name -> FLOP/s of the matrix unit
    vector_flops: dict                     # dtype name -> FLOP/s of everything else
    launch_s: float                        # per-kernel launch / dispatch overhead, seconds
    sources: list = field(default_factory=list)
    calibrated: bool = False               # measured on this machine (cpu) rather than quoted

    def __post_init__(self):
        for what, table in (("matmul_flops", self.matmul_flops), ("vector_flops", self.vector_flops)):
            if not isinstance(table, dict) or not table or not all(
                    isinstance(v, (int, float)) and v > 0 for v in table.values()):
                raise OpValueError("DeviceProfile", f"{what} as a non-empty {{dtype name: FLOP/s > 0}} dict",
                                   repr(table))
        for what in ("mem_bw", "usable_bytes", "memory_bytes"):
            v = getattr(self, what)
            if not isinstance(v, (int, float)) or v <= 0:
                raise OpValueError("DeviceProfile", f"{what} > 0", repr(v))
        if not isinstance(self.launch_s, (int, float)) or self.launch_s < 0:
            raise OpValueError("DeviceProfile", "launch_s >= 0", repr(self.launch_s))

    def peak_flops(self, kind: str, dtype_name: str) -> float:
        table = self.matmul_flops if kind == "matmul" else self.vector_flops
        if dtype_name in table:
            return table[dtype_name]
        return table.get("float32") or max(table.values())

    def compute_time(self, cost, dtype_name: str) -> float:
        """Seconds of arithmetic: matrix-unit FLOPs at the matmul peak, the rest at the vector peak."""
        mm = cost.matmul_flops
        t = mm / self.peak_flops("matmul", dtype_name) if mm else 0.0
        rest = cost.flops - mm
        return t + (rest / self.peak_flops("vector", dtype_name) if rest > 0 else 0.0)

    def node_time(self, cost, dtype_name: str) -> float:
        """Roofline time of one node (a costs.NodeCost) computing in `dtype_name`:
        max(compute time, bytes / bandwidth) + the kernel launch."""
        if cost.kind in ("view", "host"):
            return 0.0
        memory = cost.bytes / self.mem_bw if cost.bytes else 0.0
        return max(self.compute_time(cost, dtype_name), memory) + self.launch_s

    def scaled(self, efficiency: float) -> "DeviceProfile":
        """The same device at `efficiency` x its peak rates (e.g. 0.6 for a realistic MFU)."""
        if not 0 < efficiency <= 1:
            raise OpValueError("DeviceProfile.scaled", "an efficiency in (0, 1]", repr(efficiency))
        return dataclasses.replace(
            self, name=f"{self.name}@{efficiency:g}", mem_bw=self.mem_bw * efficiency,
            matmul_flops={k: v * efficiency for k, v in self.matmul_flops.items()},
            vector_flops={k: v * efficiency for k, v in self.vector_flops.items()})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        mm = self.matmul_flops
        bf = mm.get("bfloat16") or mm.get("float16")
        peak = f"{bf / 1e12:.1f} TFLOP/s bf16/fp16, " if bf else ""
        return (f"{self.display_name}: {peak}{self.peak_flops('matmul', 'float32') / 1e12:.2f} TFLOP/s fp32 matmul, "
                f"{self.mem_bw / 1e9:.0f} GB/s, {self.usable_bytes / GiB:.1f} GiB usable"
                f"{' (measured here)' if self.calibrated else ''}")


# -- the table -------------------------------------------------------------------------------------

H100 = DeviceProfile(
    name="h100", display_name="NVIDIA H100 SXM5 80GB",
    memory_bytes=80 * 10**9, usable_bytes=80 * 10**9,
    mem_bw=3.35e12,
    # dense tensor-core peaks (the datasheet's "with sparsity" figures are twice these);
    # float32 matmuls: the FP32 CUDA-core rate (TF32 tensor cores would give 494.7 TFLOP/s, but
    # frameworks keep strict fp32 matmuls by default)
    matmul_flops={"bfloat16": 989.4e12, "float16": 989.4e12, "float32": 66.9e12, "float64": 66.9e12},
    vector_flops={"bfloat16": 133.8e12, "float16": 133.8e12, "float32": 66.9e12, "float64": 33.5e12},
    launch_s=4e-6,
    sources=["NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100): SXM5 - FP64 34 TF, "
             "FP32 67 TF, TF32 989 TF*, BF16/FP16 1,979 TF* (*with sparsity; dense is half), "
             "80 GB HBM3 at 3.35 TB/s",
             "non-tensor fp16/bf16 vector rate = 2x fp32 (Hopper whitepaper, 'NVIDIA H100 Tensor Core GPU "
             "Architecture', SM throughput table)",
             "kernel launch ~4 us: typical CUDA launch latency [assumption]"])

ASCEND_910B = DeviceProfile(
    name="ascend910b", display_name="Huawei Ascend 910B",
    memory_bytes=65536 * MiB,
    # MindSpore's own DryRun log on a 910B-class card: "Device MOC memory size: 65536M",
    # "MindSpore Used memory size: 59392M" - the framework may use 58 GiB of the 64
    usable_bytes=59392 * MiB,
    mem_bw=1.6e12,
    matmul_flops={"bfloat16": 320e12, "float16": 320e12, "float32": 160e12, "float64": 160e12},
    vector_flops={"bfloat16": 20e12, "float16": 20e12, "float32": 10e12, "float64": 10e12},
    launch_s=5e-6,
    sources=["memory: MindSpore DryRun tutorial (mindspore-ai/docs, tutorials/source_en/debug/dryrun.md), "
             "level-1 log 'Device MOC memory size: 65536M' / 'MindSpore Used memory size: 59392M'",
             "fp16/bf16 cube peak ~320 TFLOP/s: the figure press and analysts quote for the 910B (e.g. "
             "boardor.com, 'Huawei Ascend 910B outperforms H20'); the 2019 Ascend 910 was 256 TFLOP/s fp16 "
             "(Huawei, Hot Chips 31) [unverified: Huawei publishes no 910B datasheet]",
             "HBM2e bandwidth 1.6 TB/s [unverified: commonly quoted for 4 stacks of HBM2e]",
             "fp32 matmul at half the fp16 rate (HF32 on the cube unit), vector-unit rates, 5 us launch "
             "[assumptions]"])

DEVICES: dict = {"h100": H100, "ascend910b": ASCEND_910B}
_ALIASES = {"ascend": "ascend910b", "910b": "ascend910b", "ascend-910b": "ascend910b", "h100-sxm": "h100",
            "host": "cpu"}


def register_device(profile: DeviceProfile):
    """Add (or replace) a profile; `get_device(profile.name)` then returns it."""
    if not isinstance(profile, DeviceProfile):
        raise OpValueError("register_device", "a DeviceProfile", type(profile).__name__)
    DEVICES[profile.name] = profile


def load_profile(path) -> DeviceProfile:
    """A DeviceProfile from a JSON file holding its fields."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise OpValueError("load_profile", "a readable JSON file of DeviceProfile fields",
                           f"{path}: {type(e).__name__}: {e}") from None
    if not isinstance(d, dict):
        raise OpValueError("load_profile", "a JSON object of DeviceProfile fields", f"{type(d).__name__} in {path}")
    try:
        return DeviceProfile(**d)
    except TypeError as e:
        raise OpValueError("load_profile", f"the fields of DeviceProfile in {path}", str(e)) from None


def available_devices() -> list:
    return ["cpu"] + sorted(DEVICES)


def get_device(device) -> DeviceProfile:
    """A profile by name ('cpu', 'h100', 'ascend910b'), or the DeviceProfile itself."""
    if isinstance(device, DeviceProfile):
        return device
    if not isinstance(device, str):
        raise OpValueError("dryrun", f"device as one of {available_devices()} or a DeviceProfile",
                           type(device).__name__)
    key = _ALIASES.get(device.lower(), device.lower())
    if key == "cpu":
        return cpu_profile()
    if key not in DEVICES:
        raise OpValueError("dryrun", f"device among {available_devices()}", repr(device))
    return DEVICES[key]


# -- calibrating this CPU ---------------------------------------------------------------------------

def _cache_path() -> str:
    base = os.environ.get("MINISPORE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "minispore")
    return os.path.join(base, "device_profiles.json")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), for device profiles and benchmark reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas_threads() -> int:
    try:
        from threadpoolctl import threadpool_info
        n = [i.get("num_threads", 0) for i in threadpool_info() if i.get("user_api") == "blas"]
        return max(n) if n else 0
    except Exception:                        # noqa: BLE001 - threadpoolctl is optional
        return 0


def cpu_fingerprint() -> str:
    """What the calibration depends on: a different value means measure again."""
    return f"{cpu_model()}|cores={os.cpu_count()}|numpy={np.__version__}|blas_threads={_blas_threads()}"


def _best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure_dispatch_overhead(n_nodes=200) -> float:
    """Seconds per node of the O0 executor on one-element adds: its per-kernel overhead."""
    from ...common import dtype as mstype
    from ...ops.primitive import AbstractTensor
    from ..run import O0Executor
    from .build import capture

    def chain(x):                      # traced, not run: a graph of `n_nodes` one-element adds
        v = x
        for _ in range(n_nodes):
            v = v + x
        return v

    ex = O0Executor(capture(chain, (AbstractTensor((1,), mstype.float32),)).graph)
    one = np.ones(1, np.float32)
    ex.run(one)
    return _best_time(lambda: ex.run(one), 5) / n_nodes


def measure_cpu() -> DeviceProfile:
    """Measure this CPU now (about half a second). See the module docstring."""
    rng = np.random.default_rng(0)
    n = 512
    a32 = rng.standard_normal((n, n), dtype=np.float32)
    b32 = rng.standard_normal((n, n), dtype=np.float32)
    np.matmul(a32, b32)
    mm32 = 2 * n ** 3 / _best_time(lambda: np.matmul(a32, b32), 5)
    a64, b64 = a32.astype(np.float64), b32.astype(np.float64)
    np.matmul(a64, b64)
    mm64 = 2 * n ** 3 / _best_time(lambda: np.matmul(a64, b64), 3)
    # elementwise arithmetic rate, in cache (64 K elements = 256 KiB per operand)
    x = rng.standard_normal(1 << 16, dtype=np.float32)
    out = np.empty_like(x)
    vec = x.size * 20 / _best_time(lambda: [np.add(x, x, out=out) for _ in range(20)], 5)
    # main-memory bandwidth: copying 64 MiB reads 64 MiB and writes 64 MiB
    src = np.ones(16 << 20, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    bw = 2 * src.nbytes / _best_time(lambda: np.copyto(dst, src), 5)
    launch = _measure_dispatch_overhead()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = 8 * GiB
    return DeviceProfile(
        name="cpu", display_name=f"this CPU ({cpu_model()}, {os.cpu_count()} cores)",
        memory_bytes=int(mem), usable_bytes=int(mem), mem_bw=float(bw),
        # bfloat16/float16 matmuls run in float32 here (ops/prims/linalg.py), so they share its rate
        matmul_flops={"float32": float(mm32), "bfloat16": float(mm32), "float16": float(mm32),
                      "float64": float(mm64)},
        vector_flops={"float32": float(vec), "bfloat16": float(vec) / 4, "float16": float(vec) / 4,
                      "float64": float(vec) / 2},
        launch_s=float(launch), calibrated=True,
        sources=[f"measured on this machine ({cpu_fingerprint()}): {n}x{n} matmuls (float32, float64), "
                 f"a 64K-element add in cache, a 64 MiB copy, and the O0 executor's per-node overhead on "
                 f"a 200-node graph of one-element adds"])


_cpu_cached: dict = {}


def cpu_profile(refresh: bool = False) -> DeviceProfile:
    """This CPU's profile: from the on-disk cache when the fingerprint matches, else measured (and
    cached). `refresh=True` measures again."""
    key = cpu_fingerprint()
    if not refresh and key in _cpu_cached:
        return _cpu_cached[key]
    path = _cache_path()
    table = {}
    try:
        with open(path) as f:
            table = json.load(f)
    except (OSError, ValueError):
        table = {}
    entry = table.get(key) if isinstance(table, dict) else None
    prof = None
    if entry is not None and not refresh:
        try:
            prof = DeviceProfile(**entry)
        except TypeError:                    # an entry written by another version: measure again
            prof = None
    if prof is None:
        prof = measure_cpu()
        if not isinstance(table, dict):
            table = {}
        table[key] = prof.to_dict()
        try:                                 # atomic write; an unwritable cache is simply skipped
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(table, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            pass
    _cpu_cached[key] = prof
    return prof


__all__ = ["DeviceProfile", "cpu_model", "H100", "ASCEND_910B", "DEVICES", "register_device", "load_profile", "get_device",
           "available_devices", "cpu_profile", "measure_cpu", "cpu_fingerprint", "GiB", "MiB"]
