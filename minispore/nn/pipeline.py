"""Pipeline parallelism in PyNative: `nn.PipelineCell` runs a schedule over MPI point-to-point
messages, `nn.PipelineGradReducer` finishes the gradients (MindSpore's names).

    ms.set_auto_parallel_context(pipeline_stages=2,
                                 pipeline_config={"pipeline_scheduler": "1f1b"})
    net[0].pipeline_stage = 0; net[2].pipeline_stage = 1        # which device runs which cells
    pipe = nn.PipelineCell(nn.WithLossCell(net, loss_fn), micro_size=4)
    reducer = nn.PipelineGradReducer(optimizer.parameters)
    grad_fn = ms.value_and_grad(pipe, None, optimizer.parameters)
    loss, grads = grad_fn(x, y)         # the whole schedule runs here: every F and B
    optimizer(reducer(grads))           # stage replicas all-reduced (pipeline x data parallel)

**What is split.** The network must be a chain: `WithLossCell(SequentialCell([...]), loss_fn)`
(nested SequentialCells are flattened), or any Cell with a `pipeline_segments()` method
returning `PipelineSegment(cell, run)` items, `run(x, inputs) -> y` (x is None for the first;
`inputs` the micro-batch's arguments; the last returns the loss): parallel/pipeline_llama.py
writes the LLaMA that way. Each segment runs on `cell.pipeline_stage` (-1: the stage of the
segment before it); consecutive segments of one stage form a *chunk*. Without interleaving the
chunks are the stages 0 .. p-1; with `pipeline_interleave` a cell's pipeline_stage is a virtual
stage 0 .. p v - 1, run by device stage mod p (v chunks per device).

**Ranks.** p = pipeline_stages divides the world; dp = world / p replicas of each stage. World
rank r is device r // dp of pipeline replica r % dp (MindSpore gives each stage a contiguous
block of ranks); the stage's dp ranks form a group for the gradient all-reduce.

**A step.** The batch (this replica's; every rank of a pipeline is given the same one) is cut
into m = micro_size micro-batches along dimension 0. Each rank walks its device's action list
from nn/pipeline_schedule.py (GPipe, 1F1B or interleaved 1F1B). F(j, c): receive the activation
of micro-batch j from chunk c-1 (blocking `comm_func.irecv(...).wait()`), run chunk c with the
tape on, keep the tape (the *in-flight* activations), `isend` the output to chunk c+1. B(j, c):
receive the output gradient from chunk c+1 (for the last chunk: d(loss)/d(loss_j) = 1/m), walk
the tape back to the chunk's input and the stage's parameters, add the parameter gradients into
per-step accumulators, `isend` the input gradient to chunk c-1, free the tape. Sends are
non-blocking and waited at the end of the step, so a rank blocks only where the schedule says
it must wait for data; a schedule `simulate` can finish cannot deadlock here. Per boundary and
micro-batch one activation goes forward and one gradient back: 2 m messages of b·s·h elements
per chunk boundary per step (p v - 1 boundaries). The first message on a boundary for a new
input shape is preceded by a small int64 header (dtype, shape), so the receiver can allocate.

**The loss** is the mean of the micro-batch losses, computed on the last chunk's device, then
summed over the world (every other rank adds 0; replicas divided by dp): every rank returns the
global batch's mean loss, equal to the single-process loss on the same batch.

**Gradients and the outer tape.** The whole schedule runs inside the call, so the call appears
on an outer gradient's tape as one node whose inputs are this device's parameters and whose
backward rule returns the accumulated gradients (times the incoming cotangent: a loss-scale
`sens` works). `value_and_grad(pipe, None, params)` therefore returns this device's gradients
and zeros for the parameters other devices own. Called without a gradient being taken the cell
runs the forwards only.

**Instrumentation** (`pipe.last_step`): the actions run, each with its compute span (from the
moment its input arrived to its end, seconds since the step began: waiting for a message is
idle time, not the action's), the peak number
of saved micro-batch tapes, the p2p bytes sent. MindSpore's PipelineCell inserts the micro-batch
slicing and Send/Receive into one static graph per stage; here the executor is eager Python
over the same primitives (ops/prims/comm.py), and the gradient accumulation MindSpore's
PipelineGradReducer performs happens in the executor.
"""
from __future__ import annotations

import numbers
import time
from typing import Callable, NamedTuple

import numpy as np

from ..autograd import tape
from ..common import auto_parallel_context as apc
from ..common import dtype as mstype
from ..common import grad_state
from ..common import process_groups as pg
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor, _wrap
from ..communication import comm_func
from ..ops.prims import comm as _comm
from .cell import Cell
from .container import CellList, SequentialCell
from .pipeline_schedule import make_schedule

_OP = "PipelineCell"
# dtypes an activation may have on the wire (the header carries the index)
_WIRE_DTYPES = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64, mstype.int32, mstype.int64)
_HEADER_LEN = 10                                # dtype index, ndim, up to 8 dims


class PipelineSegment(NamedTuple):
    """One link of a pipeline chain: `run(x, inputs)` computes it (x: the previous link's output,
    None for the first; inputs: the micro-batch's arguments); `cell.pipeline_stage` places it."""
    cell: Cell
    run: Callable


# ---- the chain ----------------------------------------------------------------------------------

def _flatten(cell, stage_hint, out):
    """SequentialCell / CellList children in order (nested ones flattened); a child without a
    stage inherits its container's."""
    own = cell.pipeline_stage
    hint = own if own >= 0 else stage_hint
    if isinstance(cell, (SequentialCell, CellList)):
        for child in cell:
            _flatten(child, hint, out)
    else:
        out.append((PipelineSegment(cell, lambda x, inputs, c=cell: c(inputs[0] if x is None else x)), hint))


def _segments_of(network):
    """[(PipelineSegment, stage or -1)] for the network (see the module docstring)."""
    if hasattr(network, "pipeline_segments"):
        segs = list(network.pipeline_segments())
        for s in segs:
            if not isinstance(s, PipelineSegment):
                raise OpTypeError(_OP, "pipeline_segments() to return PipelineSegment items", type(s).__name__)
        return [(s, s.cell.pipeline_stage) for s in segs]
    backbone, loss_fn = getattr(network, "_backbone", None), getattr(network, "_loss_fn", None)
    if isinstance(backbone, (SequentialCell, CellList)) and loss_fn is not None:
        out = []
        _flatten(backbone, -1, out)
        out.append((PipelineSegment(loss_fn, lambda x, inputs, f=loss_fn: f(x, inputs[1])), loss_fn.pipeline_stage))
        return out
    raise OpTypeError(_OP, "a network whose stages form a chain: WithLossCell(SequentialCell([...]), loss_fn) or a "
                           "Cell with pipeline_segments()", type(network).__name__)


def _sub_stages(cell):
    return {c.pipeline_stage for _, c in cell.cells_and_names() if c.pipeline_stage >= 0}


def build_chunks(network, n_devices, interleave):
    """The chain cut into chunks: a list, chunk index -> list of PipelineSegments. Checks that the
    stages are in range, in chain order, and that no stage is empty."""
    items = _segments_of(network)
    if not items:
        raise OpValueError(_OP, "a network with at least one cell", "an empty chain")
    stages, prev = [], 0
    for seg, stage in items:
        if stage < 0:
            inner = _sub_stages(seg.cell)
            if len(inner) > 1:
                raise OpValueError(_OP, f"the cells inside one pipeline segment ('{type(seg.cell).__name__}') on one "
                                        "stage (a segment is not split further)", f"stages {sorted(inner)}")
            stage = inner.pop() if inner else prev
        else:
            other = _sub_stages(seg.cell) - {stage}
            if other:
                raise OpValueError(_OP, f"the cells inside '{type(seg.cell).__name__}' (pipeline_stage {stage}) on "
                                        "its stage (a segment is not split further)", f"stages {sorted(other)}")
        if stage < prev:
            raise OpValueError(_OP, "pipeline_stage non-decreasing along the network's chain of cells",
                               f"stage {stage} ('{type(seg.cell).__name__}') after stage {prev}")
        stages.append(stage)
        prev = stage
    n_chunks = stages[-1] + 1
    if not interleave and n_chunks > n_devices:
        raise OpValueError(_OP, f"every pipeline_stage in [0, {n_devices}) (pipeline_stages={n_devices})",
                           f"pipeline_stage {n_chunks - 1}")
    if interleave and n_chunks % n_devices:
        raise OpValueError(_OP, f"with pipeline_interleave, a multiple of pipeline_stages={n_devices} virtual stages "
                                "(v chunks per device)", f"stages 0..{n_chunks - 1}")
    want = n_chunks if interleave else n_devices
    chunks = [[] for _ in range(want)]
    for (seg, _), s in zip(items, stages):
        chunks[s].append(seg)
    empty = [s for s, c in enumerate(chunks) if not c]
    if empty:
        raise OpValueError(_OP, "cells on every pipeline stage", f"no cells on stage(s) {empty}")
    return chunks


# ---- groups -------------------------------------------------------------------------------------

def _group(name, ranks):
    """The group `name` over `ranks`, created once (creation is collective: every rank builds
    every stage's group, in the same order)."""
    try:
        return pg.get(name)
    except OpValueError:
        return pg.create(name, ranks)


def _positive_int(name, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise OpTypeError(_OP, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
    if v < 1:
        raise OpValueError(_OP, f"'{name}' >= 1", repr(v))
    return int(v)


class _PipelineGrads:
    """The tape node standing for a whole pipeline step: its backward returns the gradients the
    schedule accumulated, times the cotangent of the loss."""

    name = "PipelineCell"

    def __init__(self, grads):
        self.grads = grads

    def bprop(self, inputs, out, dout):
        one = isinstance(dout, Tensor) and np.all(np.asarray(dout._data) == 1)
        result = []
        for g in self.grads:
            if g is None:
                result.append(None)
            elif one:
                result.append(_wrap(g))
            else:
                result.append(_wrap((g * np.asarray(dout._data)).astype(g.dtype, copy=False)))
        return tuple(result)


_latest = []            # the most recently built PipelineCell (PipelineGradReducer's default)


class PipelineCell(Cell):
    """`nn.PipelineCell(network, micro_size, stage_config=None)`: run `network` (returning a loss)
    as a pipeline over `pipeline_stages` devices with `micro_size` micro-batches per step.

    `stage_config` ({cell name as in `network.cells_and_names()`: stage}) sets pipeline_stage on
    those cells first (MindSpore's argument). See the module docstring for the rules."""

    def __init__(self, network, micro_size, stage_config=None):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise OpTypeError(_OP, "'network' to be a Cell", type(network).__name__)
        micro_size = _positive_int("micro_size", micro_size)
        if stage_config is not None:
            if not isinstance(stage_config, dict):
                raise OpTypeError(_OP, "'stage_config' to be a dict {cell name: stage}", type(stage_config).__name__)
            cells = dict(network.cells_and_names())
            unknown = sorted(set(stage_config) - set(cells))
            if unknown:
                raise OpValueError(_OP, "'stage_config' keys naming cells of the network", repr(unknown))
            for name, stage in stage_config.items():
                cells[name].pipeline_stage = stage
        self.network = network
        d = self.__dict__
        d["micro_size"] = micro_size
        world = pg.world()
        p = apc.get_auto_parallel_context("pipeline_stages")
        config = apc.get_auto_parallel_context("pipeline_config")
        scheduler = config.get("pipeline_scheduler", "1f1b")
        interleave = bool(config.get("pipeline_interleave", False))
        if scheduler not in ("gpipe", "1f1b"):
            raise OpValueError(_OP, "pipeline_config['pipeline_scheduler'] 'gpipe' or '1f1b'", repr(scheduler))
        if interleave and scheduler != "1f1b":
            raise OpValueError(_OP, "pipeline_scheduler '1f1b' with pipeline_interleave (interleaved 1F1B)",
                               repr(scheduler))
        if world.size % p:
            raise OpValueError(_OP, f"pipeline_stages dividing the number of processes {world.size}",
                               f"pipeline_stages={p}")
        chunks = build_chunks(network, p, interleave)
        v = len(chunks) // p
        if interleave and micro_size % p:
            raise OpValueError(_OP, f"with pipeline_interleave, micro_size a multiple of pipeline_stages={p}",
                               f"micro_size={micro_size}")
        dp = world.size // p
        device, replica = world.rank // dp, world.rank % dp
        d.update(stages=p, virtual=v, scheduler=scheduler, interleave=interleave, dp=dp, device=device,
                 replica=replica, _chunks=chunks)
        d["_actions"] = make_schedule(scheduler, p, micro_size, v)[device]
        my_chunks = [c for c in range(len(chunks)) if c % p == device]
        params, seen = [], set()
        for c in my_chunks:
            for seg in chunks[c]:
                for prm in seg.cell.trainable_params():
                    if id(prm) not in seen:
                        seen.add(id(prm))
                        params.append(prm)
        d["_local_params"] = tuple(params)
        d["local_param_ids"] = frozenset(seen)
        # the stage's data-parallel group (every rank creates every stage's, in order)
        d["dp_group"] = None
        if dp > 1:
            for s in range(p):
                g = _group(f"pipeline_dp_stage{s}_of{p}", range(s * dp, (s + 1) * dp))
                if s == device:
                    d["dp_group"] = g.name
        d["_headers"] = set()           # (direction, boundary, input signature) already described
        d["last_step"] = None
        _latest[:] = [self]

    # -- helpers ------------------------------------------------------------------------------
    def stage_parameters(self):
        """The trainable parameters of the chunks this rank runs."""
        return list(self._local_params)

    def _rank_of(self, chunk):
        return (chunk % self.stages) * self.dp + self.replica

    def _split(self, inputs):
        m = self.micro_size
        tensors = [x for x in inputs if isinstance(x, Tensor) and x.ndim > 0]
        if not tensors:
            raise OpValueError(_OP, "at least one Tensor input with a batch dimension", "none")
        n = tensors[0].shape[0]
        for x in tensors:
            if x.shape[0] != n or n % m:
                raise OpValueError(_OP, f"inputs whose batch dimension (0) divides into micro_size={m} equal "
                                        "micro-batches", f"shapes {[tuple(t.shape) for t in tensors]}")
        b = n // m
        return [tuple(_wrap(x._data[j * b:(j + 1) * b]) if isinstance(x, Tensor) and x.ndim > 0 else x
                      for x in inputs) for j in range(m)], b

    def _run_chunk(self, c, x, inputs):
        for seg in self._chunks[c]:
            x = seg.run(x, inputs)
        return x

    def _send(self, arr, chunk_to, tag, key, step):
        """isend `arr` to the device of `chunk_to` (a header first if this boundary has not been
        described for this input signature)."""
        dst = self._rank_of(chunk_to)
        if key is not None and key not in self._headers:
            self._headers.add(key)
            header = np.zeros(_HEADER_LEN, np.int64)
            code = [i for i, dt in enumerate(_WIRE_DTYPES) if dt.np == arr.dtype]
            if not code or arr.ndim > _HEADER_LEN - 2:
                raise OpTypeError(_OP, "activations crossing stages with a float/int dtype and at most 8 dims",
                                  f"{arr.dtype} of shape {arr.shape}")
            header[0], header[1] = code[0], arr.ndim
            header[2:2 + arr.ndim] = arr.shape
            step["sends"].append(comm_func.isend(_wrap(header), dst, tag=self._header_tag(key)))
        step["sends"].append(comm_func.isend(_wrap(np.ascontiguousarray(arr)), dst, tag=tag))

    def _recv(self, chunk_from, tag, key, template):
        """Receive from the device of `chunk_from`; `template[key]` is (shape, dtype), read from
        the header the sender sends first when `key` (an activation boundary) is new."""
        src = self._rank_of(chunk_from)
        if key is not None and key not in self._headers:
            self._headers.add(key)
            h, handle = comm_func.irecv(_wrap(np.zeros(_HEADER_LEN, np.int64)), src, tag=self._header_tag(key))
            handle.wait()
            header = h._data
            template[key] = (tuple(int(s) for s in header[2:2 + int(header[1])]), _WIRE_DTYPES[int(header[0])])
        shape, dtype = template[key]
        out, handle = comm_func.irecv(_wrap(np.empty(shape, dtype.np)), src, tag=tag)
        handle.wait()
        return out

    def _header_tag(self, key):
        # after every data tag: 2 * chunks * m data tags, then one per (direction, boundary)
        direction, boundary = key[0], key[1]
        return 2 * len(self._chunks) * self.micro_size + 2 * boundary + (0 if direction == "act" else 1) + 1

    def _tag(self, direction, chunk, mb):
        return 1 + 2 * (chunk * self.micro_size + mb) + (0 if direction == "act" else 1)

    # -- the step -----------------------------------------------------------------------------
    def construct(self, *inputs):
        micro, _ = self._split(inputs)
        m, last = self.micro_size, len(self._chunks) - 1
        signature = tuple((tuple(x.shape), str(x.dtype)) if isinstance(x, Tensor) else repr(x) for x in inputs)
        training = grad_state.depth > 0
        outer_depth = grad_state.depth
        actions = self._actions if training else [a for a in self._actions if a.kind == "F"]
        params = self._local_params
        saved_nodes = [p._node for p in params]
        leaves = []
        step = {"sends": [], "timeline": [], "peak_in_flight": 0, "p2p_bytes": 0}
        stash, shapes = {}, getattr(self, "_shapes", None)
        if shapes is None:
            shapes = self.__dict__["_shapes"] = {}
        acc = [None] * len(params)
        losses = []
        t_start = time.perf_counter()
        try:
            if training:
                for p in params:            # this step's leaves: every micro-batch's tape ends here
                    p._node = tape.Node(None, (), {}, p, ())
                    leaves.append(p._node)
            grad_state.depth = 0
            for a in actions:
                if a.kind == "F":
                    c, j = a.chunk, a.microbatch
                    x = None
                    if c > 0:
                        x = self._recv(c - 1, self._tag("act", c - 1, j), ("act", c - 1, signature), shapes) \
                            if self._rank_of(c - 1) != self._rank_of(c) else stash.pop(("local_act", j, c - 1))
                        if training:
                            x._node = tape.Node(None, (), {}, x, ())
                    t0 = time.perf_counter()            # the input is here: compute starts
                    grad_state.depth = 1 if training else 0
                    try:
                        y = self._run_chunk(c, x, micro[j])
                    finally:
                        grad_state.depth = 0
                    if not isinstance(y, Tensor):
                        raise OpTypeError(_OP, f"chunk {c} to return one Tensor", type(y).__name__)
                    if c == last:
                        losses.append(float(np.asarray(y._data)))
                        loss_dtype = y.dtype
                    elif self._rank_of(c + 1) != self._rank_of(c):
                        self._send(y._data, c + 1, self._tag("act", c, j), ("act", c, signature), step)
                        step["p2p_bytes"] += y._data.nbytes
                    else:
                        stash[("local_act", j, c)] = _wrap(y._data)
                    if training:
                        stash[(j, c)] = (x, y)
                        step["peak_in_flight"] = max(step["peak_in_flight"],
                                                     sum(1 for k in stash if k[0] != "local_act" and
                                                         k[0] != "local_grad"))
                else:
                    c, j = a.chunk, a.microbatch
                    x, y = stash.pop((j, c))
                    if c == last:
                        dy = _wrap(np.asarray(1.0 / m, dtype=y._data.dtype))
                    elif self._rank_of(c + 1) != self._rank_of(c):
                        dy = self._recv(c + 1, self._tag("grad", c, j), None, {None: (tuple(y.shape), y.dtype)})
                    else:
                        dy = stash.pop(("local_grad", j, c))
                    t0 = time.perf_counter()
                    targets = ([x._node] if x is not None else []) + leaves
                    grads, order = tape.backward((y,), (dy,), targets)
                    gx, gp = (grads[0], grads[1:]) if x is not None else (None, grads)
                    for i, g in enumerate(gp):
                        if g is not None:
                            arr = np.asarray(g._data)
                            if acc[i] is None:
                                acc[i] = np.array(arr, dtype=params[i]._data.dtype, copy=True)
                            else:
                                acc[i] += arr
                    tape.release([n for n in order if n.prim is not None])
                    if c > 0:
                        if gx is None:
                            gx = _wrap(np.zeros(x.shape, x.dtype.np))
                        if self._rank_of(c - 1) != self._rank_of(c):
                            self._send(np.asarray(gx._data), c - 1, self._tag("grad", c - 1, j), None, step)
                            step["p2p_bytes"] += gx._data.nbytes
                        else:
                            stash[("local_grad", j, c - 1)] = gx
                step["timeline"].append((a.kind, a.microbatch, a.chunk, t0 - t_start, time.perf_counter() - t_start))
            for h in step["sends"]:
                h.wait()
        finally:
            grad_state.depth = outer_depth
            for p, n in zip(params, saved_nodes):
                p._node = n
        # the global loss: the last chunk's device holds mean_j loss_j; replicas average
        holds_loss = (last % self.stages) == self.device
        code = [i for i, dt in enumerate(_WIRE_DTYPES) if holds_loss and dt == loss_dtype]
        local = np.array([sum(losses) / m / self.dp if holds_loss else 0.0,
                          float(code[0] + 1) if (code and self.replica == 0) else 0.0])
        total = _comm.start_all_reduce(local, "sum", _comm.WORLD).wait()
        dtype = _WIRE_DTYPES[int(round(total[1])) - 1]
        loss = _wrap(np.asarray(total[0], dtype=dtype.np))
        step["sends"] = len(step["sends"])
        step["wall"] = time.perf_counter() - t_start
        self.__dict__["last_step"] = step
        if training and params:
            grad_state.record(_PipelineGrads(acc), tuple(params), {}, loss)
        return loss

    def extend_repr(self):
        return (f"micro_size={self.micro_size}, stages={self.stages}, virtual={self.virtual}, "
                f"scheduler={self.scheduler!r}, dp={self.dp}")


class PipelineGradReducer(Cell):
    """`nn.PipelineGradReducer(parameters, scale_sense=1.0, opt_shard=None)`: the gradients of a
    PipelineCell step, ready for the optimizer. Gradients of this rank's stage parameters are
    all-reduced (mean) over the stage's data-parallel replicas with nn.DistributedGradReducer on
    the stage's group; every gradient is divided by `scale_sense` (a loss scale). The micro-batch
    accumulation MindSpore's reducer does happened in the PipelineCell already. The pipeline is
    the most recently built PipelineCell unless `pipeline=` names one."""

    jit_host_call = True

    def __init__(self, parameters, scale_sense=1.0, opt_shard=None, pipeline=None):
        super().__init__(auto_prefix=False)
        if isinstance(parameters, Tensor) or not isinstance(parameters, (list, tuple)):
            raise OpTypeError("PipelineGradReducer", "'parameters' as a list or tuple of Parameters",
                              type(parameters).__name__)
        if isinstance(scale_sense, bool) or not isinstance(scale_sense, (numbers.Real, Tensor)):
            raise OpTypeError("PipelineGradReducer", "'scale_sense' to be a number or a Tensor",
                              type(scale_sense).__name__)
        if opt_shard:
            raise OpValueError("PipelineGradReducer", "opt_shard None or False (optimizer sharding with a pipeline "
                                                      "is not built)", repr(opt_shard))
        d = self.__dict__
        d["_reduce_params"] = tuple(parameters)
        d["scale_sense"] = scale_sense
        d["_pipeline"] = pipeline
        d["_dp_reducer"] = None

    def construct(self, grads):
        op = "PipelineGradReducer"
        params = self._reduce_params
        if not isinstance(grads, (tuple, list)) or len(grads) != len(params):
            raise OpValueError(op, f"a tuple of {len(params)} gradients (one per parameter)",
                               f"{len(grads) if isinstance(grads, (tuple, list)) else type(grads).__name__}")
        pipe = self._pipeline or (_latest[0] if _latest else None)
        if pipe is None:
            raise OpValueError(op, "a PipelineCell built before the reducer is called", "none")
        out = list(grads)
        if pipe.dp > 1:
            mine = [i for i, p in enumerate(params) if id(p) in pipe.local_param_ids]
            if self._dp_reducer is None:
                from .wrap_grad_reducer import DistributedGradReducer
                self.__dict__["_dp_reducer"] = DistributedGradReducer([params[i] for i in mine], mean=True,
                                                                      group=pipe.dp_group)
            reduced = self._dp_reducer(tuple(grads[i] for i in mine))
            for i, g in zip(mine, reduced):
                out[i] = g
        s = self.scale_sense
        s = float(np.asarray(s._data)) if isinstance(s, Tensor) else float(s)
        if s != 1.0:
            out = [_wrap((np.asarray(g._data) / s).astype(np.asarray(g._data).dtype, copy=False)) for g in out]
        return tuple(out)


__all__ = ["PipelineCell", "PipelineGradReducer", "PipelineSegment", "build_chunks"]
