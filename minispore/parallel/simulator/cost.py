"""How long a task takes: a roofline for kernels, the alpha-beta model for collectives.

**Kernels** use DryRun's device profiles (`minispore/graph/dryrun/devices.py`: this CPU measured,
the Ascend 910B and H100 from datasheet figures, the 910B's marked unverified):

    time = max(matmul_flops / matmul_peak + other_flops / vector_peak, bytes / memory_bandwidth)
           + launch

**Collectives** use the alpha-beta model of Thakur, Rabenseifner & Gropp (2005, "Optimization of
Collective Communication Operations in MPICH"): a message of `S` bytes costs `alpha + S * beta`
(`alpha` a per-step latency, `beta = 1 / bandwidth`). The bandwidth-optimal ring algorithms over
`n` ranks give, with `S` the payload (the gathered output for an all-gather, the input for a
reduce-scatter or an all-reduce, what one rank sends in total for an all-to-all):

    all-gather       (n-1) alpha  +    (n-1)/n * S * beta
    reduce-scatter   (n-1) alpha  +    (n-1)/n * S * beta
    all-reduce      2(n-1) alpha  + 2 (n-1)/n * S * beta      (= reduce-scatter + all-gather)
    all-to-all       (n-1) alpha  +    (n-1)/n * S * beta
    broadcast        (n-1) alpha  +            S * beta       (a pipelined chain from the root)
    send / receive         alpha  +            S * beta

(the reduction arithmetic, the gamma term, is left out: on an accelerator it is a vector kernel
hidden inside the ring's transfers). The bytes are those of `minispore/ops/prims/comm.py`'s
`comm_bytes()` ring counters, so a simulated collective moves exactly what an instrumented one
reports.

**Links.** A `LinkProfile` holds `bandwidth` (bytes/s one way, per device) and `alpha`. The
shipped figures are NOT measurements:

* ``hccs`` (Ascend 910B, inside an 8-card node): 196 GB/s each way, the half of the 392 GB/s
  "HCCS" figure quoted for Atlas 800T A2-class 910B nodes (7 links of 56 GB/s to the 7 peers of
  a full mesh) [unverified: Huawei publishes no 910B link datasheet; minispore's DryRun
  planner (`minispore/llm/comm_cost.py`) defaults to the same round 200 GB/s];
* ``nvlink4`` (H100 SXM, inside a DGX H100): 450 GB/s each way, half the datasheet's 900 GB/s
  bidirectional NVLink4 total [datasheet];
* alpha = 5 us per ring step for both: the "a few microseconds" of practical defaults
  [assumption].

A CPU over MPI has no datasheet: `fit_alpha_beta(sizes, seconds, kind, n)` fits the two numbers
by least squares from timed collectives (the simulator's tests do this with the local MPI).
Both a device and a link can be derated: `CostModel(..., compute_efficiency=0.6,
link_efficiency=0.8)` (peak rates are rarely reached: 50-80% of matmul peak, 70-85% of link
peak for large messages).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ...common.errors import OpTypeError, OpValueError
from ...graph.dryrun.devices import DeviceProfile, get_device

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send", "receive", "broadcast")


@dataclass(frozen=True)
class LinkProfile:
    """The alpha-beta numbers of one kind of link (see the module docstring)."""

    name: str
    bandwidth: float               # bytes/s, one direction, per device
    alpha: float                   # seconds per ring step (message latency)
    sources: tuple = field(default_factory=tuple)

    def __post_init__(self):
        if isinstance(self.bandwidth, bool) or not isinstance(self.bandwidth, (int, float)) \
                or not 0 < self.bandwidth < math.inf:
            raise OpValueError("LinkProfile", "bandwidth as bytes/s > 0", repr(self.bandwidth))
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 <= self.alpha < math.inf:
            raise OpValueError("LinkProfile", "alpha as seconds >= 0", repr(self.alpha))

    def describe(self) -> str:
        return f"{self.name}: {self.bandwidth / 1e9:g} GB/s each way, alpha {self.alpha * 1e6:g} us per step"


HCCS = LinkProfile("hccs", 196e9, 5e-6, (
    "Ascend 910B node (Atlas 800T A2 class): HCCS 392 GB/s per device quoted in total, 7 links x 56 GB/s to "
    "the full mesh's 7 peers; 196 GB/s each way [unverified: no Huawei link datasheet]",
    "alpha 5 us per ring step [assumption: 'a few us', practical defaults]"))
NVLINK4 = LinkProfile("nvlink4", 450e9, 5e-6, (
    "NVIDIA H100 SXM datasheet: NVLink4 900 GB/s bidirectional total per GPU; 450 GB/s each way",
    "alpha 5 us per ring step [assumption]"))
LINKS = {"hccs": HCCS, "nvlink4": NVLINK4}
DEFAULT_LINK = {"ascend910b": "hccs", "h100": "nvlink4"}


def get_link(link) -> LinkProfile:
    """A LinkProfile by name ('hccs', 'nvlink4') or the profile itself."""
    if isinstance(link, LinkProfile):
        return link
    if not isinstance(link, str) or link.lower() not in LINKS:
        raise OpValueError("get_link", f"a link among {sorted(LINKS)} or a LinkProfile", repr(link))
    return LINKS[link.lower()]


def ring_steps(kind: str, n: int) -> int:
    """Latency steps of the ring algorithm for `kind` over `n` ranks."""
    if kind in ("send", "receive"):
        return 1
    if n <= 1:
        return 0
    return 2 * (n - 1) if kind == "all_reduce" else n - 1


def ring_wire_bytes(kind: str, payload: float, n: int) -> float:
    """Bytes one rank sends for `kind` (payload as in the module docstring)."""
    if kind in ("send", "receive"):
        return float(payload)
    if n <= 1:
        return 0.0
    if kind == "broadcast":
        return float(payload)
    share = (n - 1) / n * payload
    return 2 * share if kind == "all_reduce" else share


def collective_time(kind: str, payload: float, n: int, link: LinkProfile) -> float:
    """Seconds of one `kind` collective of `payload` bytes over `n` ranks on `link`."""
    if kind not in COLLECTIVES:
        raise OpValueError("collective_time", f"a collective among {COLLECTIVES}", repr(kind))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OpValueError("collective_time", "a group size n >= 1", repr(n))
    if payload < 0:
        raise OpValueError("collective_time", "a payload >= 0 bytes", repr(payload))
    if n == 1 and kind not in ("send", "receive"):
        return 0.0
    return ring_steps(kind, n) * link.alpha + ring_wire_bytes(kind, payload, n) / link.bandwidth


def fit_alpha_beta(payloads, seconds, kind: str, n: int, name="fitted") -> LinkProfile:
    """Least-squares alpha and bandwidth from timed `kind` collectives over `n` ranks:
    seconds = steps * alpha + wire_bytes * beta (a straight line in wire bytes)."""
    payloads, seconds = list(payloads), list(seconds)
    if len(payloads) != len(seconds) or len(payloads) < 2:
        raise OpValueError("fit_alpha_beta", "at least two (payload, seconds) pairs of equal count",
                           f"{len(payloads)} payloads, {len(seconds)} times")
    steps = ring_steps(kind, n)
    xs = [ring_wire_bytes(kind, p, n) for p in payloads]
    mx, my = sum(xs) / len(xs), sum(seconds) / len(seconds)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise OpValueError("fit_alpha_beta", "payloads of at least two different sizes", repr(payloads))
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, seconds)) / sxx
    intercept = my - beta * mx
    if beta <= 0:
        raise OpValueError("fit_alpha_beta", "times that grow with the message size", repr(seconds))
    alpha = max(intercept, 0.0) / steps if steps else 0.0
    return LinkProfile(name, 1.0 / beta, alpha, (f"least-squares fit of {len(xs)} timed {kind} calls over {n} ranks",))


@dataclass
class CostModel:
    """Durations of the tasks a simulator graph holds: kernels on `device`, collectives on `link`,
    in `dtype` (element size `itemsize` bytes), derated by the two efficiencies."""

    device: DeviceProfile
    link: LinkProfile
    dtype: str = "bfloat16"
    compute_efficiency: float = 1.0
    link_efficiency: float = 1.0

    def __post_init__(self):
        self.device = get_device(self.device)
        self.link = get_link(self.link)
        if not isinstance(self.dtype, str):
            raise OpTypeError("CostModel", "dtype as a name ('bfloat16', 'float32', ...)", type(self.dtype).__name__)
        for what in ("compute_efficiency", "link_efficiency"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise OpValueError("CostModel", f"{what} in (0, 1]", repr(v))
        if self.compute_efficiency != 1:
            self.device = self.device.scaled(self.compute_efficiency)
        if self.link_efficiency != 1:
            self.link = dataclasses.replace(self.link, name=f"{self.link.name}@{self.link_efficiency:g}",
                                            bandwidth=self.link.bandwidth * self.link_efficiency)

    @property
    def itemsize(self) -> int:
        return {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}.get(self.dtype, 4)

    def kernel(self, *, matmul_flops=0.0, vector_flops=0.0, bytes_moved=0.0, dtype=None) -> float:
        """Roofline seconds of one kernel computing in `dtype` (default: the model's)."""
        dtype = dtype or self.dtype
        compute = 0.0
        if matmul_flops:
            compute += matmul_flops / self.device.peak_flops("matmul", dtype)
        if vector_flops:
            compute += vector_flops / self.device.peak_flops("vector", dtype)
        memory = bytes_moved / self.device.mem_bw if bytes_moved else 0.0
        return max(compute, memory) + self.device.launch_s

    def gemm(self, m, k, n) -> float:
        """(m x k) @ (k x n): 2mkn FLOPs, both operands read and the result written once."""
        e = self.itemsize
        return self.kernel(matmul_flops=2.0 * m * k * n, bytes_moved=e * (m * k + k * n + m * n))

    def elementwise(self, elements, flops_per_element=1.0, tensors=2) -> float:
        """A vector kernel over `elements` elements touching `tensors` tensors of that size."""
        return self.kernel(vector_flops=flops_per_element * elements, bytes_moved=self.itemsize * tensors * elements)

    def collective(self, kind, payload_bytes, n) -> float:
        return collective_time(kind, payload_bytes, n, self.link)

    def describe(self) -> str:
        return f"{self.device.describe()}; {self.link.describe()}; {self.dtype}"


__all__ = ["COLLECTIVES", "LinkProfile", "HCCS", "NVLINK4", "LINKS", "DEFAULT_LINK", "get_link", "ring_steps",
           "ring_wire_bytes", "collective_time", "fit_alpha_beta", "CostModel"]
