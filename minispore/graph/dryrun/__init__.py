"""DryRun: compile a program without running it, and predict its memory, FLOPs and time.

MindSpore's DryRun (`MS_SIMULATION_LEVEL=1`) compiles a job with the device mocked out and logs
how much memory each card would need; MindFormers users run it before renting a cluster. Ours
does the single-device part, on any machine, in seconds:

    import minispore as ms
    report = ms.dryrun(model, ((1, 2048), ms.int64), device="ascend910b")           # forward
    report = ms.dryrun(model.loss, tokens_spec, targets_spec, train=True, device="h100")
    print(report)                     # the text report; report.plot("mem.png") the timeline

    $ minispore dryrun --model llama-7b --batch 1 --seq 2048 --train --device ascend910b

How it works (read in this order):

* abstract.py  `abstract_parameters()`: build a 7B model whose parameters take no memory
               (zero-stride arrays), and the accepted forms of abstract inputs
* build.py     capture the forward pass - or value_and_grad + a fused AdamW node per parameter
               - with tracers: only inference rules run, never a kernel
* costs.py     FLOPs and bytes of every node (the primitives' `cost` facts, ops/costs.py)
* devices.py   device profiles: this CPU (measured once, cached), Ascend 910B, H100 (with sources)
* report.py    memory from the SOMAS planner (graph/memory), a roofline time per node, the
               MindSpore-style peak lines, and what dominates memory when it does not fit
* plot.py      the live-memory timeline
* cli.py       `minispore dryrun ...`

Why the whole LLaMA-7B step is captured at once, not one layer times 32: capture costs ~20 us per
node (inference only) and the planner is vectorised, so the ~4,000-node graph of a 32-layer
training step compiles and plans in well under a second - per-layer reuse (lazy_inline) is not
needed for speed here, and the full graph gives the exact schedule (saved activations of every
layer alive together at the start of backward).
"""
from __future__ import annotations

import time

from .abstract import abstract_array, abstract_parameters, as_abstract, is_abstract
from .build import ADAMW_UPDATE, Capture, capture
from ..costs import NodeCost, graph_costs, node_cost
from .devices import (ASCEND_910B, DEVICES, H100, DeviceProfile, available_devices, cpu_profile, get_device,
                      load_profile, register_device)
from .report import DryRunReport, NodeRecord


def dryrun(fn_or_cell, *abstract_inputs, device="cpu", train=False, weights=None, optimizer="adamw",
           learning_rate=1e-3, jit_level="O0", alignment=64, name=None) -> DryRunReport:
    """Compile `fn_or_cell(*abstract_inputs)` without running it; report memory, FLOPs and time.

    * `abstract_inputs`: one per positional argument - an `AbstractTensor`, a `(shape, dtype)`
      pair or a Tensor for tensor arguments (only shape and dtype are used); anything else is
      passed to the function as a Python constant.
    * `device`: "cpu" (this machine, calibrated), "ascend910b", "h100", or a DeviceProfile.
    * `train=True`: analyse a training step - forward, backward (value_and_grad w.r.t. `weights`,
      default: the Cell's trainable parameters) and one fused in-place AdamW update per parameter
      (`optimizer=None`: forward + backward only, gradients returned). The function must return a
      scalar loss.
    * `jit_level`: "O0" analyses the captured graph; "O1" first runs operator fusion
      (passes/fusion.py - its C kernels are compiled, never run), so fused chains count one read
      of each input and one write of each output, and their temporaries disappear from memory.
    * `alignment`: byte alignment of arena buffers (the planner's; 64 = a cache line).

    Build big models under `abstract_parameters()` so their weights take no memory. No kernel
    runs: only inference rules, so shapes and dtypes are checked exactly as a real run would.
    """
    t0 = time.perf_counter()
    prof = get_device(device)
    if jit_level not in ("O0", "O1"):
        from ...common.errors import OpValueError
        raise OpValueError("dryrun", "jit_level 'O0' or 'O1'", repr(jit_level))
    cap = capture(fn_or_cell, abstract_inputs, train=train, weights=weights, optimizer=optimizer,
                  learning_rate=learning_rate)
    if jit_level == "O1":
        from ..passes.fusion import fuse
        cap.graph = fuse(cap.graph).graph
        cap.phases = None                  # fusion merges and reorders nodes: no phase boundaries
    p = memory_plan(cap.graph, alignment)
    compile_s = time.perf_counter() - t0
    label = name or cap.graph.name
    return DryRunReport(cap, prof, p, label, compile_s)


def memory_plan(graph, alignment=64):
    """The plan the arena executor runs `graph` with (graph/memory `graph_plan`: a CALL's callee gets
    a workspace the size of its own arena), so the predicted peak IS the measured one."""
    from .. import memory
    from ..ir import CALL
    if alignment == memory.DEFAULT_ALIGNMENT:
        return memory.graph_plan(graph)
    ws = {i: memory_plan(n.attrs["graph"], alignment).peak_bytes for i, n in enumerate(graph.nodes) if n.op is CALL}
    return memory.plan(graph, alignment=alignment, workspaces=ws)


__all__ = ["dryrun", "memory_plan", "DryRunReport", "NodeRecord", "abstract_parameters", "abstract_array", "is_abstract",
           "as_abstract", "capture", "Capture", "ADAMW_UPDATE", "NodeCost", "node_cost", "graph_costs",
           "DeviceProfile", "get_device", "cpu_profile", "available_devices", "register_device",
           "load_profile", "DEVICES", "H100", "ASCEND_910B"]
