"""`nn.DistributedGradReducer`: data parallelism's gradient all-reduce, in buckets that overlap backward.

In data parallelism every rank holds the whole model and computes gradients on its slice of the
global batch; before the optimizer step the gradients are summed across ranks (and divided by the
number of ranks when `mean`), so every rank applies the same update and the replicas stay equal.
With `gradients_mean=True` and equal local batches the result is exactly the gradient of the
global batch's mean loss: (1/n) * sum_r (1/b) * sum_{rows of r} = (1/(n*b)) * sum_{all rows}.

    reducer = nn.DistributedGradReducer(optimizer.parameters, mean=True)   # degree: the group size
    grads = reducer(grads)              # a tuple, one gradient per parameter, in the same order

TrainOneStepCell and Model insert one automatically when `parallel_mode` is "data_parallel" or
"hybrid_parallel" (MindSpore's rule), so a script rarely builds one itself.

## Buckets (MindSpore's `comm_fusion`, PyTorch DDP's buckets)

One all-reduce per parameter pays the per-message latency hundreds of times; one for all of them
cannot start before the last gradient exists. The reducer groups parameters into *buckets*, each
one flat buffer and one all-reduce, from `set_auto_parallel_context(comm_fusion=...)`:

* `{"allreduce": {"mode": "auto"}}` (the default): buckets of at most 64 MB;
* `{"allreduce": {"mode": "size", "config": MB}}`: buckets of at most `config` MB;
* `{"allreduce": {"mode": "index", "config": [i, j]}}` or `all_reduce_fusion_config=[i, j]`:
  parameters [0, i), [i, j), [j, end) (MindSpore's split indices);
* `{"openstate": False}`: no fusion, one all-reduce per parameter.

Size buckets are filled in *reverse* parameter order, because backward produces the last
layer's gradients first; a bucket never mixes dtypes. Float16/bfloat16 gradients travel as
float32 (MindSpore's `gradient_fp32_sync`, on by default) and are cast back.

## Overlap with backward (PyNative)

`with reducer.overlap_backward(): grads = grad_fn(...)` registers a gradient-ready hook on the
autodiff tape (autograd/tape.py `register_grad_ready_hook`). The tape calls it the moment a
parameter's gradient is final (the walk has passed the parameter's last consumer); the reducer
copies that gradient into its bucket's buffer and, when the bucket is full, starts a
non-blocking `MPI Iallreduce` on it, then returns to the tape, which goes on computing the
gradients of earlier layers while the bucket travels. Every later hook call also tests the
in-flight requests, which drives MPI's progress engine (MPICH progresses a non-blocking
collective only inside MPI calls). When the reducer is then called on the gradient tuple it only
waits for the buckets in flight and divides by `degree`.

Buckets are started strictly in bucket order (a bucket that becomes ready early waits for the
ones before it), because MPI matches collectives on a communicator by their order: every rank
must issue them in the same order, whatever order its gradients happen to become ready in.

Each gradient handed to the reducer is checked to be the very object the hook packed (or, for a
parameter no gradient reached, all zeros); a bucket whose gradients were changed between
backward and the reducer (rescaling, clipping) is reduced again, blocking, from the gradients
given. (TrainOneStepCell with `sens`, which rescales every gradient, does not overlap at all.) These checks depend on the
program, not on the data, so all ranks take the same path.

## Graph mode

Under `jit` / GRAPH_MODE the gradients come from the compiled gradient graph, not the tape; the
reducer is a host call (`jit_host_call`) that runs after it, in program order, and all-reduces
every bucket then (started together, waited together): correct, but without overlap.
"""
from __future__ import annotations

import numbers
import time

import numpy as np

from ..common import auto_parallel_context as apc
from ..common import process_groups
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor, _wrap
from ..ops.prims import comm as _comm_prims
from .cell import Cell

_OP = "DistributedGradReducer"
_AUTO_BUCKET_MB = 64          # MindSpore's comm_fusion "auto" threshold
_MB = 1 << 20
# dtypes an MPI reduction handles natively; others (float16, bfloat16) are reduced in float32
_WIRE_NATIVE = {np.dtype(np.float32), np.dtype(np.float64)}


def _wire_dtype(dt: np.dtype) -> np.dtype:
    return dt if dt in _WIRE_NATIVE else np.dtype(np.float32)


class _Bucket:
    """A run of parameters (indices into the reducer's list) sharing one flat buffer."""

    __slots__ = ("index", "params", "offsets", "numel", "dtype")

    def __init__(self, index, params, sizes, dtype):
        self.index = index
        self.params = tuple(params)
        self.offsets = tuple(np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist())
        self.numel = self.offsets[-1]
        self.dtype = dtype

    def __repr__(self):
        return f"Bucket({self.index}, params={list(self.params)}, {self.numel * self.dtype.itemsize} bytes)"


def plan_buckets(params, fusion=None, split_indices=None):
    """The buckets for `params` under a comm_fusion setting (see the module docstring).

    `fusion` is `comm_fusion` ({"openstate": bool, "allreduce": {"mode", "config"}}), `split_indices`
    `all_reduce_fusion_config`. Returns a list of _Bucket in the order they are communicated.
    """
    fusion = fusion or {}
    allreduce = fusion.get("allreduce") or {"mode": "auto", "config": None}
    sizes = [int(np.prod(p.shape)) for p in params]
    wire = [_wire_dtype(p._data.dtype) for p in params]
    groups = []                                        # lists of parameter indices
    if fusion.get("openstate", True) is False:
        groups = [[i] for i in reversed(range(len(params)))]
    elif allreduce["mode"] == "index" or split_indices:
        cuts = list(allreduce["config"] if allreduce["mode"] == "index" else split_indices)
        cuts = [0] + [c for c in cuts if 0 < c < len(params)] + [len(params)]
        groups = [list(range(a, b)) for a, b in zip(cuts, cuts[1:]) if b > a]
        groups.reverse()                               # the last parameters are ready first
    else:
        cap_mb = allreduce["config"] if allreduce["mode"] == "size" else _AUTO_BUCKET_MB
        cap = max(1, int(cap_mb * _MB))
        current, nbytes = [], 0
        for i in reversed(range(len(params))):
            b = sizes[i] * wire[i].itemsize
            if current and (nbytes + b > cap or wire[i] != wire[current[-1]]):
                groups.append(current)
                current, nbytes = [], 0
            current.append(i)
            nbytes += b
        if current:
            groups.append(current)
    buckets = []
    for g in groups:
        # a bucket never mixes wire dtypes: split an index bucket where the dtype changes
        run = [g[0]]
        for i in g[1:]:
            if wire[i] != wire[run[-1]]:
                buckets.append(run)
                run = []
            run.append(i)
        buckets.append(run)
    return [_Bucket(k, b, [sizes[i] for i in b], wire[b[0]]) for k, b in enumerate(buckets)]


class _Step:
    """The reducer's state for one training step (mutated in place: rebinding a Cell attribute
    would invalidate compiled graphs, see Cell.__setattr__)."""

    __slots__ = ("buffers", "packed", "pending", "requests", "next_to_start", "active")

    def reset(self, buckets, n_params):
        self.buffers = [None] * len(buckets)     # flat ndarray per bucket once packing starts
        self.packed = [None] * n_params          # the gradient object the hook packed (or _ZERO)
        self.pending = [len(b.params) for b in buckets]   # gradients still missing per bucket
        self.requests = [None] * len(buckets)    # MPI request per started bucket
        self.next_to_start = 0                   # buckets start strictly in order
        self.active = False


_ZERO = object()          # marker: the tape reported no gradient for this parameter (zeros packed)


class DistributedGradReducer(Cell):
    """`DistributedGradReducer(parameters, mean=None, degree=None, fusion_type=1, group=GlobalComm.WORLD_COMM_GROUP)`.

    `mean=None` takes `gradients_mean` from the auto-parallel context; `degree=None` is the
    group's size (the divisor of the mean). `fusion_type` is accepted for MindSpore's signature
    (its graph compiler fuses the all-reduces of equal fusion ids); the buckets here come from
    `comm_fusion` / `all_reduce_fusion_config`, read when the reducer is built.

    Set `reducer.events = []` to record `(kind, index, time)` tuples: "ready" (parameter index:
    its gradient reached the reducer during backward), "start" / "wait" (bucket index: its
    all-reduce was started / the reducer began waiting for it).
    """

    jit_host_call = True      # graph mode: run eagerly on the gradients after the gradient graph

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1,
                 group=process_groups.HCCL_WORLD_COMM_GROUP):
        super().__init__(auto_prefix=False)
        if isinstance(parameters, Tensor) or not isinstance(parameters, (list, tuple)):
            raise OpTypeError(_OP, "'parameters' as a list or tuple of Parameters (e.g. optimizer.parameters)",
                              type(parameters).__name__)
        params = tuple(parameters)
        for p in params:
            if not isinstance(p, Tensor):
                raise OpTypeError(_OP, "'parameters' whose entries are Parameters", type(p).__name__)
        if mean is None:
            mean = apc.get_auto_parallel_context("gradients_mean")
        if not isinstance(mean, bool):
            raise OpTypeError(_OP, "'mean' to be a bool or None", f"{type(mean).__name__} {mean!r}")
        if not isinstance(group, str):
            raise OpTypeError(_OP, "'group' to be a group name (str)", type(group).__name__)
        grp = process_groups.get(group)
        if degree is None:
            degree = grp.size
        if not isinstance(degree, numbers.Integral) or isinstance(degree, bool) or degree <= 0:
            raise OpValueError(_OP, "'degree' as an int > 0 (usually the number of devices)", repr(degree))
        if not isinstance(fusion_type, numbers.Integral) or isinstance(fusion_type, bool):
            raise OpTypeError(_OP, "'fusion_type' to be an int", type(fusion_type).__name__)
        if grp.comm is not None:
            process_groups.require_member(grp, _OP)
        d = self.__dict__            # plain attributes: not registered as this cell's parameters
        d["_reduce_params"] = params
        d["_index_of"] = {id(p): i for i, p in enumerate(params)}
        d["mean"] = mean
        d["degree"] = int(degree)
        d["fusion_type"] = int(fusion_type)
        d["group"] = group
        d["_group"] = grp
        d["_comm"] = grp.comm if grp.comm is not None and grp.size > 1 else None   # None: one rank
        d["buckets"] = plan_buckets(params, apc.get_auto_parallel_context("comm_fusion"),
                                    apc.get_auto_parallel_context("all_reduce_fusion_config"))
        # parameter index -> (its bucket, its slice [lo, hi) of the bucket's flat buffer)
        d["_slot_of"] = {i: (b, b.offsets[k], b.offsets[k + 1])
                         for b in self.buckets for k, i in enumerate(b.params)}
        d["_step"] = _Step()
        d["events"] = None
        self._step.reset(self.buckets, len(params))

    # -- the identity case ----------------------------------------------------------------------
    def _is_identity(self) -> bool:
        """One rank and nothing to divide by: MindSpore's reducer then changes nothing."""
        return self._comm is None and (not self.mean or self.degree == 1)

    def _event(self, kind, index):
        if self.events is not None:
            self.events.append((kind, index, time.perf_counter()))

    # -- overlap: the gradient-ready hook ----------------------------------------------------
    def overlap_backward(self):
        """A context manager: during the backward passes inside it, each bucket's all-reduce
        starts as soon as its gradients are final (see the module docstring)."""
        from ..autograd import tape
        step = self._step
        self._finish_in_flight()
        step.reset(self.buckets, len(self._reduce_params))
        if self._comm is None:
            return _NoHook()
        step.active = True
        return tape.register_grad_ready_hook(self._on_grad_ready)

    def _on_grad_ready(self, tensor, grad):
        i = self._index_of.get(id(tensor))
        step = self._step
        if i is None or not step.active or step.packed[i] is not None:
            return
        self._event("ready", i)
        bucket = self._slot_of[i][0]
        self._pack(bucket, i, grad)
        step.pending[bucket.index] -= 1
        if step.pending[bucket.index] == 0:
            self._start_ready_buckets()
        self._progress()

    def _pack(self, bucket, i, grad):
        step = self._step
        buf = step.buffers[bucket.index]
        if buf is None:
            buf = step.buffers[bucket.index] = np.empty(bucket.numel, bucket.dtype)
        _, lo, hi = self._slot_of[i]
        if grad is None:
            buf[lo:hi] = 0
            step.packed[i] = _ZERO
        else:
            buf[lo:hi] = np.asarray(grad._data).reshape(-1)      # casts to the wire dtype
            step.packed[i] = grad

    def _start_ready_buckets(self):
        """Start, in bucket order, every bucket whose gradients are all packed."""
        step = self._step
        while step.next_to_start < len(self.buckets) and step.pending[step.next_to_start] == 0:
            self._start(self.buckets[step.next_to_start])
            step.next_to_start += 1

    def _start(self, bucket):
        step = self._step
        self._event("start", bucket.index)
        if self._comm is None:          # one rank: the sum over one rank is the buffer itself
            step.requests[bucket.index] = _DONE
            return
        from mpi4py import MPI          # present: the group has an mpi4py communicator
        buf = step.buffers[bucket.index]
        # counted like an all_reduce primitive (ops/prims/comm.py comm_bytes(): DryRun's check)
        _comm_prims._count("all_reduce", buf.nbytes, _comm_prims.ring_bytes_all_reduce(
            buf.size, buf.itemsize, self._group.size, self._group.rank))
        step.requests[bucket.index] = self._comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def _progress(self):
        step = self._step
        live = [r for r in step.requests if r is not None and r is not _DONE]
        if live:
            from mpi4py import MPI
            MPI.Request.Testall(live)

    def _finish_in_flight(self):
        """Complete requests left by a step that never reached the reducer (an exception)."""
        step = self._step
        if getattr(step, "requests", None):
            for r in step.requests:
                if r is not None:
                    r.Wait()
            step.requests = [None] * len(step.requests)

    # -- the reduction ------------------------------------------------------------------------
    def construct(self, grads):
        params = self._reduce_params
        if not isinstance(grads, (tuple, list)) or len(grads) != len(params):
            got = f"{len(grads)} gradients" if isinstance(grads, (tuple, list)) else type(grads).__name__
            raise OpValueError(_OP, f"a tuple of {len(params)} gradients (one per parameter)", got)
        for g, p in zip(grads, params):
            if not isinstance(g, Tensor):
                raise OpTypeError(_OP, "gradients as Tensors", type(g).__name__)
            if tuple(g.shape) != tuple(p.shape):
                raise OpValueError(_OP, f"the gradient of '{getattr(p, 'name', '?')}' with shape "
                                   f"{tuple(p.shape)}", f"shape {tuple(g.shape)}")
        if self._is_identity():
            return tuple(grads)
        step = self._step
        if not step.active:
            step.reset(self.buckets, len(params))
        step.active = False
        stale = []
        for b in self.buckets:
            if not self._packed_match(b, grads):
                if step.requests[b.index] is not None:
                    stale.append(b)         # started during backward, changed since: redo below
                else:                       # packed but not started: repack from what we were given
                    for i in b.params:
                        if step.packed[i] is not None:
                            step.packed[i] = None
                            step.pending[b.index] += 1
            for i in b.params:              # whatever the hook did not pack, pack now
                if step.packed[i] is None:
                    self._pack(b, i, grads[i])
                    step.pending[b.index] -= 1
        self._start_ready_buckets()         # every bucket is now complete: start the rest, in order
        for b in self.buckets:
            self._event("wait", b.index)
            step.requests[b.index].Wait()
            step.requests[b.index] = None
        for b in stale:                     # (same on every rank: the checks depend on the program)
            for i in b.params:
                self._pack(b, i, grads[i])
            self._start(b)
            step.requests[b.index].Wait()
            step.requests[b.index] = None
        return self._unpack(grads)

    def _packed_match(self, bucket, grads) -> bool:
        packed = self._step.packed
        for i in bucket.params:
            p = packed[i]
            if p is None:
                continue                    # not packed yet: packed from `grads` now
            if p is _ZERO:
                if np.any(np.asarray(grads[i]._data)):
                    return False
            elif p is not grads[i]:
                return False
        return True

    def _unpack(self, grads):
        """Per-parameter gradients from the reduced buffers (views, divided by degree if mean)."""
        step = self._step
        out = [None] * len(grads)
        scale = 1.0 / self.degree if self.mean else None
        for b in self.buckets:
            buf = step.buffers[b.index]
            if scale is not None:
                buf *= buf.dtype.type(scale)     # MindSpore multiplies by 1/degree
            for k, i in enumerate(b.params):
                g = buf[b.offsets[k]:b.offsets[k + 1]].reshape(grads[i].shape)
                want = np.asarray(grads[i]._data).dtype
                out[i] = _wrap(g if g.dtype == want else g.astype(want))
        for b in self.buckets:
            step.buffers[b.index] = None    # the next step packs into fresh buffers
        return tuple(out)


class _Done:
    """The request of a 'collective' over one rank: already complete."""

    @staticmethod
    def Wait():
        return None


_DONE = _Done()


class _NoHook:
    """overlap_backward() when there is nothing to overlap (one rank)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def remove(self):
        pass


__all__ = ["DistributedGradReducer"]
