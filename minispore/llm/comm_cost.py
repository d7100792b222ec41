"""What one collective costs on the wire: ring byte formulas and a latency-bandwidth (alpha-beta) time.

The parallel planner (parallel_plan.py) lists every collective a training step issues as
(group, kind, payload). This module turns a payload into bytes on the wire and into seconds.

**Payload** is the size of the tensor as the operator sees it, the number an instrumented MPI
call reports without knowing the algorithm:

    AllReduce      the buffer reduced (input size = output size)
    AllGather      the gathered OUTPUT (n shards)
    ReduceScatter  the INPUT (n shards; each rank keeps one)
    Send/Receive   the message

**Bytes each rank sends** assume the bandwidth-optimal ring algorithms (Thakur, Rabenseifner &
Gropp 2005, "Optimization of Collective Communication Operations in MPICH"; the same factors as
NCCL-tests' "bus bandwidth", nccl-tests doc/PERFORMANCE.md), with `n` ranks in the group and
`S` the payload in bytes:

    AllReduce      2 (n-1)/n * S     (a reduce-scatter, then an all-gather, each (n-1)/n * S)
    AllGather        (n-1)/n * S     (n-1 steps, one shard each)
    ReduceScatter    (n-1)/n * S
    AlltoAll         (n-1)/n * S     (S = all a rank sends, its own block included)
    Send             S
    Receive          0               (it receives S)

A ring rank receives as much as it sends, so `received` equals `sent` for the collectives.

**Time** (alpha-beta model): a ring step costs `alpha + bytes/bandwidth`. AllReduce takes
2(n-1) steps, AllGather/ReduceScatter/AlltoAll n-1, a Send one:

    T = steps * alpha + sent / bandwidth

The reduction arithmetic (the gamma term) is ignored. `LinkModel` holds the two numbers for
links inside a node and between nodes; the defaults are round figures for an 8-accelerator
node with NVLink-class links and one 200 Gb/s NIC per device, NOT measurements - pass your own
(`minispore dryrun --intra-bw --inter-bw --latency`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..common.errors import OpValueError

COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Send", "Receive")


def ring_sent_bytes(kind: str, payload: float, n: int) -> float:
    """Bytes one rank sends for one `kind` collective of `payload` bytes over `n` ranks (ring)."""
    if kind not in COLLECTIVES:
        raise OpValueError("ring_sent_bytes", f"a collective among {COLLECTIVES}", repr(kind))
    if kind == "Send":
        return float(payload)
    if kind == "Receive" or n <= 1:
        return 0.0
    share = (n - 1) / n * payload
    return 2 * share if kind == "AllReduce" else share


def ring_received_bytes(kind: str, payload: float, n: int) -> float:
    """Bytes one rank receives (a ring rank receives what it sends; a Receive gets the message)."""
    if kind == "Receive":
        return float(payload)
    if kind == "Send":
        return 0.0
    return ring_sent_bytes(kind, payload, n)


def ring_steps(kind: str, n: int) -> int:
    """Latency-bound steps of the ring algorithm (messages in sequence)."""
    if kind in ("Send", "Receive"):
        return 1
    if n <= 1:
        return 0
    return 2 * (n - 1) if kind == "AllReduce" else n - 1


@dataclass(frozen=True)
class LinkModel:
    """Bandwidth (bytes/s, one direction, per device) and per-message latency of the links a
    collective uses: `intra_node_bw` when the whole group sits in one node of `devices_per_node`
    devices, `inter_node_bw` otherwise (the ring is as slow as its slowest link)."""

    intra_node_bw: float = 200e9
    inter_node_bw: float = 25e9
    latency_s: float = 10e-6
    devices_per_node: int = 8

    def __post_init__(self):
        for name in ("intra_node_bw", "inter_node_bw"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < math.inf:
                raise OpValueError("LinkModel", f"{name} as bytes/s > 0", repr(v))
        if not isinstance(self.latency_s, (int, float)) or not 0 <= self.latency_s < math.inf:
            raise OpValueError("LinkModel", "latency_s >= 0 (seconds)", repr(self.latency_s))
        if not isinstance(self.devices_per_node, int) or self.devices_per_node < 1:
            raise OpValueError("LinkModel", "devices_per_node as an int >= 1", repr(self.devices_per_node))

    def bandwidth(self, span: int) -> float:
        """The bandwidth of a group whose ranks lie within `span` consecutive ranks."""
        return self.intra_node_bw if span <= self.devices_per_node else self.inter_node_bw

    def time(self, kind: str, total_payload: float, n: int, span: int, calls: int = 1) -> float:
        """Seconds of `calls` collectives over `n` ranks moving `total_payload` bytes between them
        (the bytes term is linear, so only the total matters; latency is paid per call). A
        Receive costs nothing here: its transfer is the matching Send's time."""
        if kind == "Receive" or (n <= 1 and kind != "Send"):
            return 0.0
        return calls * ring_steps(kind, n) * self.latency_s + ring_sent_bytes(kind, total_payload, n) / self.bandwidth(span)

    def describe(self) -> str:
        return (f"ring collectives, alpha-beta model: {self.intra_node_bw / 1e9:g} GB/s inside a node of "
                f"{self.devices_per_node}, {self.inter_node_bw / 1e9:g} GB/s between nodes, "
                f"{self.latency_s * 1e6:g} us per step (assumed figures; --intra-bw/--inter-bw/--latency)")


__all__ = ["COLLECTIVES", "LinkModel", "ring_sent_bytes", "ring_received_bytes", "ring_steps"]
