"""Optimizer parallel (ZeRO; MindSpore's `enable_parallel_optimizer`) in data-parallel training.

In plain data parallelism every rank keeps the whole model, the whole gradient and the whole
optimizer state, and applies the same update as every other rank: N identical copies of work
and memory. Optimizer parallel (Rajbhandari et al. 2020, "ZeRO") cuts the redundancy:

    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True,
                                 parallel_optimizer_config={"optimizer_level": "level2",
                                                            "parallel_optimizer_threshold": 64})  # KB
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.AdamWeightDecay(net.trainable_params()))
    step.parallel_optimizer.memory_report()      # bytes this rank keeps, by category

TrainOneStepCell (and Model.train, through it) inserts a `ParallelOptimizer` in place of the
DistributedGradReducer when the context asks for it, as MindSpore's compiler inserts optimizer
parallel in data-parallel mode.

## The levels (what each rank keeps; N ranks, Ψ parameters)

* **level1** (ZeRO-1, P_os): gradients are all-reduced as in data parallelism (every rank keeps
  the whole reduced gradient); each rank keeps the optimizer state (Adam's m and v, Momentum's
  accumulator, ...) only for its 1/N slice of each parameter, updates that slice of the parameter
  with the optimizer's own rule, then the updated slices are all-gathered into the parameter.
* **level2** (ZeRO-2, P_os+g): as level1, but the gradients are reduce-scattered instead of
  all-reduced: after the reduction a rank holds only its gradient shard.
* **level3** (ZeRO-3, P_os+g+p): as level2, and the parameters themselves are stored sharded
  between steps. At the start of a step every sharded parameter is all-gathered (one all-gather
  per dtype), forward and backward use the whole weights, and after backward they are released
  (back to the shard) before the update. The step starts at the forward pre-hook of whichever
  Cell of the network runs first (each Cell carries one; after the first they only test a flag),
  so TrainOneStepCell, Model.train, a call of any sub-cell and a hand-written
  `value_and_grad(model.loss, ...)` all gather - `Llama.loss` is a method (no hook of Llama
  itself runs) and `hidden_to_logits` reads `self.output.weight` directly, but its embedding is a
  Cell called first. A step whose first read of a weight is not through a Cell call states it
  with `gathered()`, which needs no hook at all:

      zero = ParallelOptimizer(opt, network=model, level="level3")
      grad_fn = ms.value_and_grad(model.loss, None, opt.parameters)
      with zero.gathered():                  # whole weights for forward + backward
          loss, grads = grad_fn(x, y)
      zero(grads)                            # reduce-scatter, update the shards

  Everything is gathered at once, so it does not matter which Cell or method later reads which
  weight (no per-cell bookkeeping that a method call could bypass); `zero(grads)` refuses a step
  in which nothing gathered. A forward outside a step (evaluation) gathers too; the weights then
  stay whole until the next step's update.
  Memory, honestly: the autodiff tape keeps the gathered arrays it saved in forward until
  backward ends, so at the peak of backward a rank holds (nearly) every whole weight, as it would
  with per-layer gathering (which would also need a second gather in backward to do better).
  level3 here saves parameter memory between steps and during the update, not at the peak.
  Outside the training step, `gather_parameters()` makes the weights whole (released by the next
  step); `release_parameters()` returns them to the shards. PyNative only (the network's
  pre-hooks do not run inside compiled graphs): GRAPH_MODE with level3 is refused.

A parameter stays replicated (plain data parallelism: all-reduced gradient, full state, full
update) when it opts out with `Parameter(..., parallel_optimizer=False)`, or when it is smaller
than `parallel_optimizer_threshold` KB (MindSpore's rule; default 64 KB: sharded iff
`nbytes >= threshold * 1024`).

## Padding rule (why byte counts are exact, not "about Ψ/N")

Each sharded parameter is flattened (row-major) and zero-padded to `N * chunk` elements with
`chunk = ceil(numel / N)`; rank r owns elements `[r * chunk, (r + 1) * chunk)`. Every rank's shard
has the same size, so one `Reduce_scatter_block` / `Allgather` per dtype serves all parameters
(their shards are concatenated per rank). The padding is never read back: it holds zeros, the
update of a zero weight with a zero gradient and zero state stays zero for every supported
rule, and the gathered parameter drops it. With C = sum over sharded parameters of chunk
(C*N - Ψ_sharded padding elements), Ψ_r the replicated elements, b bytes per element and K state
buffers per parameter (Adam 2, Momentum 1), a rank keeps

    level   parameters       gradients        optimizer state
    level1  b(Ψ)             b(Ψ)             K b(C + Ψ_r)
    level2  b(Ψ)             b(C + Ψ_r)       K b(C + Ψ_r)
    level3  b(C + Ψ_r)       b(C + Ψ_r)       K b(C + Ψ_r)

which for fp32 Adam and no padding is the ZeRO paper's 4Ψ + 4Ψ + 8Ψ/N, 4Ψ + (4 + 8)Ψ/N and
(4 + 4 + 8)Ψ/N (`zero_bytes` computes the table). `memory_report()` measures the arrays the rank
really holds (parameters and state from their storage, gradients from the arrays the last step
handed to the optimizer), so a test of it against the table checks the implementation.
(level2/3: during backward the full gradient exists transiently, as it does in ZeRO-2's buckets.)

## Communication per step (comm.py's ring bytes per rank, `comm_bytes()`)

    level1  all_reduce of Ψ (2(N-1)Ψb summed over ranks)   + all_gather (N-1)Cb
    level2  reduce_scatter (N-1)Cb                         + all_gather (N-1)Cb
    level3  all_gather (N-1)Cb at the start of the step (one per dtype) + reduce_scatter (N-1)Cb

plus an all-reduce of the replicated parameters' gradients at levels 2 and 3 (all of them at
level1). So level1 moves about 3Ψ per rank (the all-reduce of plain data parallelism, 2Ψ, plus
the all-gather of the updated parameters) and level2 about 2Ψ, the same as plain data
parallelism: a ring all-reduce is a reduce-scatter followed by an all-gather, and level2 simply
runs the optimizer between the two. level3 moves 2Ψ here, not ZeRO-3's 3Ψ: the autodiff tape
keeps the gathered arrays it saved in forward, so backward needs no second gather (the memory
saving of level3 is between steps, not at the peak of backward).

The reduce-scatter runs after backward, one per dtype, unless the step runs inside
`overlap_backward()` with `bucket_mb` set: then the sharded gradients travel in buckets of at
most `bucket_mb` MB (filled in reverse parameter order), each reduce-scatter started
non-blocking as soon as the autodiff tape reports that bucket's gradients final, while backward
goes on (as nn/wrap_grad_reducer.py does for data parallelism's all-reduce). TrainOneStepCell
does not enter it (it overlaps only its grad_reducer); a hand-written step does:
`with zero.gathered(), zero.overlap_backward(): loss, grads = grad_fn(x, y)`.

## What is reused (no update math here)

The optimizer's own rule runs on the slice: for the duration of the update, each sharded
parameter's storage is its (chunk,) shard and the optimizer is called with the (chunk,) gradient
shards; its state buffers are stored as (chunk,) shards for good. This works for the rules that
are elementwise per parameter (listed in `_ELEMENTWISE`: nn's Adam, AdamWeightDecay, SGD,
Momentum, Adagrad, Adadelta, AdaMax, RMSProp, ProximalAdagrad, FTRL, Rprop and mint's AdamW,
Adam, SGD); rules with per-parameter norms (Lamb) are refused. State buffers are found by
MindSpore's naming: a Parameter of the optimizer named `<state>.<parameter name>` with the
parameter's shape (`moment1.dense.weight`, `exp_avg.dense.weight`); scalars (`beta1_power`,
`global_step`) stay replicated and are updated identically everywhere.

## Checkpoints: per-rank shards plus the strategy

`ms.save_checkpoint(step, f"rank_{r}.ckpt", append_dict=step.parallel_optimizer.checkpoint_info())`
on each rank saves what that rank holds (sharded state as (chunk,) arrays under their usual
names; parameters full at level1/2, shards at level3) plus a JSON string
`parallel_optimizer_strategy` (level, ranks, this rank, padding rule, per-parameter shape, chunk
and state names). A run with the same strategy resumes from it with `load_checkpoint` +
`check_checkpoint` + `load_param_into_net` and continues exactly. `full_state_dict()` (a
collective) gathers every parameter and state buffer whole, for a single-process checkpoint.
(The flat padded cut is not MindSpore's `opt_weight_shard` dim-0 cut, so these shards are not
written into strategy files.)
"""
from __future__ import annotations

import contextlib
import json
import math
import numbers

import numpy as np

from ...common import auto_parallel_context as apc
from ...common import context, process_groups
from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor, _wrap
from ...ops.prims import comm
from ..cell import Cell

_OP = "ParallelOptimizer"
LEVELS = ("level1", "level2", "level3")
DEFAULT_THRESHOLD_KB = 64          # MindSpore's parallel_optimizer_threshold default
STRATEGY_KEY = "parallel_optimizer_strategy"

# optimizers whose update is elementwise within each parameter (so it can run on any slice)
_ELEMENTWISE = frozenset({
    "minispore.nn.optim.adam.Adam", "minispore.nn.optim.adam.AdamWeightDecay",
    "minispore.nn.optim.sgd.SGD", "minispore.nn.optim.sgd.Momentum",
    "minispore.nn.optim.adagrad.Adagrad", "minispore.nn.optim.adadelta.Adadelta",
    "minispore.nn.optim.adamax.AdaMax", "minispore.nn.optim.rmsprop.RMSProp",
    "minispore.nn.optim.proximal_adagrad.ProximalAdagrad", "minispore.nn.optim.ftrl.FTRL",
    "minispore.nn.optim.rprop.Rprop",
    "minispore.mint.optim.adamw.AdamW", "minispore.mint.optim.adamw.Adam", "minispore.mint.optim.sgd.SGD",
})


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _check_elementwise(optimizer):
    """The optimizer's class (or the base it inherits its update from) must be in _ELEMENTWISE."""
    for cls in type(optimizer).__mro__:
        if _qualname(cls) in _ELEMENTWISE:
            return
        if "_update" in cls.__dict__ or "construct" in cls.__dict__:
            break
    raise OpValueError(_OP, "an optimizer whose update is elementwise per parameter (Adam, AdamWeightDecay, "
                       "SGD, Momentum, Adagrad, ..., mint AdamW/Adam/SGD) for optimizer parallel",
                       type(optimizer).__name__)


def zero_bytes(numels, n, level, itemsize=4, states=2, replicated=()):
    """The per-rank bytes of the table in the module docstring (with the padding rule):
    `numels` the element counts of the sharded parameters, `replicated` those of the replicated
    ones, `states` the state buffers per parameter. Returns {"parameters", "gradients",
    "optimizer_state"}."""
    if level not in LEVELS:
        raise OpValueError("zero_bytes", f"level in {list(LEVELS)}", repr(level))
    psi = sum(numels) + sum(replicated)
    small = sum(math.ceil(k / n) for k in numels) + sum(replicated)
    return {"parameters": itemsize * (small if level == "level3" else psi),
            "gradients": itemsize * (psi if level == "level1" else small),
            "optimizer_state": states * itemsize * small}


def settings():
    """The context's optimizer-parallel settings, or None when TrainOneStepCell should not insert
    one (optimizer parallel disabled, or not data/hybrid parallel mode)."""
    if not apc.is_data_parallel() or not apc.get_auto_parallel_context("enable_parallel_optimizer"):
        return None
    cfg = apc.get_auto_parallel_context("parallel_optimizer_config")
    return {"level": cfg.get("optimizer_level", "level1"),
            "threshold": cfg.get("parallel_optimizer_threshold", DEFAULT_THRESHOLD_KB),
            "shard_size": cfg.get("optimizer_weight_shard_size", -1)}


class _Slot:
    """One parameter of the optimizer: where its shard lies and which state buffers it has."""

    __slots__ = ("index", "param", "shape", "numel", "chunk", "sharded", "states", "gathered", "shard", "full")

    def __init__(self, index, param, n, sharded, states):
        self.index = index
        self.param = param
        self.shape = tuple(param.shape)
        self.numel = int(np.prod(self.shape, dtype=np.int64))
        self.chunk = -(-self.numel // n)       # ceil(numel / n)
        self.sharded = sharded
        self.states = states                   # Parameters shaped like the parameter
        self.gathered = True                   # level3: False while the storage is the shard
        self.shard = None
        self.full = None


def _take_shard(a: np.ndarray, chunk: int, rank: int) -> np.ndarray:
    """This rank's (chunk,) slice of `a` flattened and zero-padded to n * chunk (a new array)."""
    flat = a.reshape(-1)
    lo = rank * chunk
    hi = min(lo + chunk, flat.size)
    out = np.zeros(chunk, a.dtype)
    if hi > lo:
        out[:hi - lo] = flat[lo:hi]
    return out


def _by_dtype(items, key):
    """Group `items` by the dtype key(item) gives, keeping the order (dict of lists)."""
    groups = {}
    for it in items:
        groups.setdefault(np.dtype(key(it)), []).append(it)
    return groups


_NO_GRAD = object()        # overlap: the tape reported no gradient for this parameter (zeros)


def _plan_buckets(sharded, bucket_mb):
    """Lists of same-dtype sharded slots, one reduce-scatter each. None: one bucket per dtype in
    parameter order. Otherwise buckets of at most `bucket_mb` MB of gradient, filled in REVERSE
    parameter order (backward produces the last layer's gradients first), never mixing dtypes."""
    if bucket_mb is None:
        return list(_by_dtype(sharded, lambda s: s.param._data.dtype).values())
    limit = float(bucket_mb) * (1 << 20)
    buckets, run, size = [], [], 0.0
    for s in reversed(sharded):
        nbytes = s.numel * s.param._data.itemsize
        if run and (s.param._data.dtype != run[0].param._data.dtype or size + nbytes > limit):
            buckets.append(run)
            run, size = [], 0.0
        run.append(s)
        size += nbytes
    if run:
        buckets.append(run)
    return buckets


class ParallelOptimizer(Cell):
    """`ParallelOptimizer(optimizer, network=None, level="level1", threshold=64, mean=None,
    degree=None, group=WORLD)`: reduce the gradients, update this rank's slices with
    `optimizer`'s own rule, all-gather. See the module docstring.

    `bucket_mb` (None: one reduce-scatter per dtype) cuts the sharded gradients into buckets
    of at most that many MB, so that `overlap_backward()` can start them during backward.

    level3: the parameters are gathered at the start of each step by the forward pre-hook of the
    first Cell of `network` that runs, or by `with zero.gathered():` around a hand-written
    forward + backward.

    Calling it with the gradient tuple (one per `optimizer.parameters`, full shapes) does the
    whole optimizer step and returns the gradients the optimizer was given (a shard for sharded
    parameters at level2/3, the reduced full gradient otherwise). `network` is needed for level3
    (the cells whose forward gathers the parameters). `mean` defaults to `gradients_mean`,
    `degree` (the divisor of the mean) to `device_num`.
    """

    jit_host_call = True      # graph mode: runs on NumPy after the gradient graph, as a host call

    def __init__(self, optimizer, network=None, level="level1", threshold=DEFAULT_THRESHOLD_KB, mean=None,
                 degree=None, group=process_groups.HCCL_WORLD_COMM_GROUP, bucket_mb=None):
        super().__init__(auto_prefix=False)
        if not isinstance(optimizer, Cell) or not hasattr(optimizer, "parameters"):
            raise OpTypeError(_OP, "an optimizer (nn.Optimizer or mint.optim)", type(optimizer).__name__)
        if level not in LEVELS:
            raise OpValueError(_OP, f"'optimizer_level' in {list(LEVELS)}", repr(level))
        if bucket_mb is not None and (isinstance(bucket_mb, bool) or not isinstance(bucket_mb, numbers.Real)
                                      or bucket_mb <= 0):
            raise OpValueError(_OP, "'bucket_mb' None or a number of MB > 0", repr(bucket_mb))
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or threshold < 0:
            raise OpValueError(_OP, "'parallel_optimizer_threshold' a number of KB >= 0", repr(threshold))
        if level == "level3" and not isinstance(network, Cell):
            raise OpTypeError(_OP, "the network (a Cell) for level3 (its cells gather the parameters)",
                              type(network).__name__)
        if level == "level3" and context.get_context("mode") == context.GRAPH_MODE:
            raise OpValueError(_OP, "PYNATIVE_MODE for optimizer_level 'level3' (parameters are gathered by "
                               "forward pre-hooks, which compiled graphs do not run)", "GRAPH_MODE")
        _check_elementwise(optimizer)
        grp = process_groups.get(group)
        if grp.comm is not None:
            process_groups.require_member(grp, _OP)
        n, rank = grp.size, (grp.rank or 0)
        if mean is None:
            mean = apc.get_auto_parallel_context("gradients_mean")
        if degree is None:
            degree = apc.get_auto_parallel_context("device_num") if apc.is_data_parallel() else n
        if not isinstance(mean, bool):
            raise OpTypeError(_OP, "'mean' to be a bool or None", type(mean).__name__)
        if not isinstance(degree, numbers.Integral) or isinstance(degree, bool) or degree <= 0:
            raise OpValueError(_OP, "'degree' an int > 0", repr(degree))
        params = list(optimizer.parameters)
        for p in params:
            if not isinstance(p.parallel_optimizer, bool):
                raise OpTypeError(_OP, f"'parallel_optimizer' of '{p.name}' to be a bool",
                                  type(p.parallel_optimizer).__name__)
        states = self._find_states(optimizer, params)
        limit = float(threshold) * 1024
        slots = [_Slot(i, p, n, p.parallel_optimizer and p._data.nbytes >= limit, states[i])
                 for i, p in enumerate(params)]
        d = self.__dict__          # plain attributes: nothing here is a parameter of this cell
        d["_optimizer"] = optimizer
        d["level"] = level
        d["threshold"] = float(threshold)
        d["mean"] = mean
        d["degree"] = int(degree)
        d["group"] = group
        d["ranks"] = n
        d["rank"] = rank
        d["slots"] = slots
        d["_last_grad_bytes"] = None
        d["buckets"] = _plan_buckets([s for s in slots if s.sharded], bucket_mb)
        d["_overlap"] = None                   # the in-flight reduce-scatters of overlap_backward()
        d["_hooks"] = []
        d["_step_gathered"] = False            # level3: the parameters were whole for this step's forward
        d["_whole"] = True                     # level3: every sharded parameter is gathered now
        for s in slots:                        # the state is stored sharded from now on
            if s.sharded:
                for q in s.states:
                    q._data = _take_shard(q._data, s.chunk, rank)
                    q._version += 1
        if level == "level3":
            for s in slots:
                if s.sharded:
                    s.param._data = _take_shard(s.param._data, s.chunk, rank)
                    s.param._version += 1
                    s.gathered = False
            d["_whole"] = not any(s.sharded for s in slots)
            for _, cell in network.cells_and_names():
                self._hooks.append(cell.register_forward_pre_hook(self._gather_at_forward))

    # -- construction helpers ---------------------------------------------------------------------
    @staticmethod
    def _find_states(optimizer, params):
        """Per parameter, the optimizer's Parameters named `<state>.<parameter name>` with its shape."""
        index = {p.name: i for i, p in enumerate(params)}
        own = {id(p) for p in params}
        found = [[] for _ in params]
        for _, q in optimizer.parameters_and_names():
            if id(q) in own or "." not in q.name:
                continue
            i = index.get(q.name.split(".", 1)[1])
            if i is not None and tuple(q.shape) == tuple(params[i].shape):
                found[i].append(q)
        # a per-parameter buffer under another name would stay whole on every rank while its
        # parameter's slice is updated: refuse rather than train on mismatched halves
        claimed = own | {id(q) for qs in found for q in qs}
        shapes = {tuple(p.shape) for p in params}
        for _, q in optimizer.parameters_and_names():
            if id(q) not in claimed and q.size > 1 and tuple(q.shape) in shapes:
                raise OpValueError(_OP, "optimizer state named '<state>.<parameter name>' (so that it can "
                                   "be sharded with its parameter)", f"'{q.name}' of shape {tuple(q.shape)}")
        return found

    def _gather_at_forward(self, cell, inputs):
        """level3: the pre-hook of every Cell of the network; the first to run in a step gathers
        every parameter, the others find them whole."""
        if not self._whole:
            self.gather_parameters()
        self.__dict__["_step_gathered"] = True

    # -- collectives ------------------------------------------------------------------------------
    def _all_gather_shards(self, slots, shards):
        """Full flat (numel,) arrays of `slots` from this rank's `shards`: one all-gather per dtype
        of the concatenated shards."""
        out = {}
        for dt, group in _by_dtype(list(zip(slots, shards)), lambda it: it[1].dtype).items():
            send = np.concatenate([sh.reshape(-1) for _, sh in group]) if len(group) > 1 else group[0][1].reshape(-1)
            recv = comm.start_all_gather(send, self.group).wait().reshape(self.ranks, -1)
            off = 0
            for s, _ in group:
                out[s.index] = recv[:, off:off + s.chunk].reshape(-1)[:s.numel]
                off += s.chunk
        return [out[s.index] for s in slots]

    def _gather(self, slots):
        """level3: every slot's parameter storage becomes the gathered full array."""
        fulls = self._all_gather_shards(slots, [s.param._data for s in slots])
        for s, full in zip(slots, fulls):
            s.shard = s.param._data
            s.param._data = np.ascontiguousarray(full).reshape(s.shape)
            s.param._version += 1
            s.gathered = True

    def _release(self):
        """level3: drop the gathered copies, keep the shards."""
        for s in self.slots:
            if s.sharded and s.gathered:
                s.param._data = s.shard
                s.param._version += 1
                s.shard = None
                s.gathered = False
        if any(s.sharded for s in self.slots):
            self.__dict__["_whole"] = False

    def gather_parameters(self):
        """level3 (a collective: every rank calls it): gather every sharded parameter now (one
        all-gather per dtype; nothing to do for those already whole). It starts a step (the
        first Cell's pre-hook calls it) and makes the weights readable outside one (evaluation,
        inspection); they stay whole until the next step's update or `release_parameters()`."""
        todo = [s for s in self.slots if s.sharded and not s.gathered]
        if todo:
            self._gather(todo)
        self.__dict__["_whole"] = True
        self.__dict__["_step_gathered"] = True

    def release_parameters(self):
        """level3: return every gathered parameter to its (chunk,) shard (no communication); the
        next step must gather again (a forward through a Cell, or `gathered()`)."""
        self._release()
        self.__dict__["_step_gathered"] = False

    @contextlib.contextmanager
    def gathered(self):
        """level3: `with zero.gathered(): loss, grads = grad_fn(x, y)` - the parameters are whole
        inside (forward and backward of a hand-written step, whichever Cells or methods read them)
        and back to shards after it; then `zero(grads)` updates the shards. At level1/2 (whole
        parameters always) it does nothing. A collective: every rank enters it."""
        if self.level != "level3":
            yield self
            return
        self.gather_parameters()
        try:
            yield self
        finally:
            self._release()

    def _scale(self, a):
        if self.mean:
            a *= a.dtype.type(1.0 / self.degree)
        return a

    def _all_reduce(self, idx, arrays):
        """Sum (and mean) arrays[i] for i in idx across ranks: one all-reduce per dtype. Returns
        {i: reduced array of the same shape}."""
        out = {}
        for dt, group in _by_dtype(idx, lambda i: arrays[i].dtype).items():
            flat = np.concatenate([arrays[i].reshape(-1) for i in group])
            red = self._scale(comm.start_all_reduce(flat, "sum", self.group).wait())
            off = 0
            for i in group:
                k = arrays[i].size
                out[i] = red[off:off + k].reshape(arrays[i].shape)
                off += k
        return out

    def _pack_bucket(self, bucket, arrays):
        """The (n, C_bucket) send buffer of a bucket: row r holds every slot's r-th chunk (zero
        padded), so one reduce-scatter leaves rank r the r-th chunk of each summed gradient."""
        n = self.ranks
        buf = np.zeros((n, sum(s.chunk for s in bucket)), arrays[bucket[0].index].dtype)
        off = 0
        for s in bucket:
            flat = np.asarray(arrays[s.index]).reshape(-1)
            full_rows, rest = divmod(s.numel, s.chunk)
            buf[:full_rows, off:off + s.chunk] = flat[:full_rows * s.chunk].reshape(full_rows, s.chunk)
            if rest:
                buf[full_rows, off:off + rest] = flat[full_rows * s.chunk:]
            off += s.chunk
        return buf

    def _unpack_bucket(self, bucket, red, out):
        red = self._scale(red)
        off = 0
        for s in bucket:
            out[s.index] = red[off:off + s.chunk]
            off += s.chunk

    def _reduce_scatter(self, arrays):
        """This rank's (chunk,) shard of the summed (and mean) gradient of every sharded slot: one
        reduce-scatter per bucket (by default one bucket per dtype)."""
        out = {}
        for bucket in self.buckets:
            buf = self._pack_bucket(bucket, arrays)
            self._unpack_bucket(bucket, comm.start_reduce_scatter(buf.reshape(-1), "sum", self.group).wait(), out)
        return out

    # -- overlap: reduce-scatter buckets during backward -----------------------------------------
    def overlap_backward(self):
        """A context manager (levels 2 and 3): during the backward passes inside it, each bucket's
        reduce-scatter starts, non-blocking, as soon as the tape reports its gradients final (the
        autograd hook nn/wrap_grad_reducer.py uses), while backward goes on with earlier layers:

            with zero.gathered(), zero.overlap_backward():
                loss, grads = grad_fn(x, y)
            zero(grads)                      # waits for the buckets in flight, then updates

        Buckets start strictly in bucket order (every rank issues the collectives in the same
        order). A bucket whose gradients were changed between backward and `zero(grads)` (by
        clipping, say) is reduced again from the gradients given. Build the optimizer with
        `bucket_mb` for several buckets: the default one bucket per dtype is complete only when
        backward ends. At level1 (an all-reduce of everything) it does nothing."""
        from ...autograd import tape
        self._drop_overlap()
        if self.level == "level1" or not self.buckets:
            return contextlib.nullcontext()
        where = {s.index: (k, j) for k, bucket in enumerate(self.buckets) for j, s in enumerate(bucket)}
        state = {"where": where, "packed": [[None] * len(b) for b in self.buckets],
                 "pending": [len(b) for b in self.buckets], "arrays": {}, "handles": [None] * len(self.buckets),
                 "next": 0, "index": {id(s.param): s.index for s in self.slots}}
        self.__dict__["_overlap"] = state
        return tape.register_grad_ready_hook(self._on_grad_ready)

    def _on_grad_ready(self, tensor, grad):
        state = self._overlap
        if state is None:
            return
        i = state["index"].get(id(tensor))
        if i is None or i not in state["where"]:
            return                               # a replicated parameter: all-reduced in the step
        k, j = state["where"][i]
        if state["packed"][k][j] is not None:
            return
        s = self.slots[i]
        state["packed"][k][j] = grad if grad is not None else _NO_GRAD
        state["arrays"][i] = np.zeros(s.shape, s.param._data.dtype) if grad is None else np.asarray(grad._data)
        state["pending"][k] -= 1
        self._start_ready(state)
        for h in state["handles"]:               # drive MPI's progress on the ones in flight
            if h is not None:
                h.test()

    def _start_ready(self, state):
        """Start, in bucket order, every bucket whose gradients are all there."""
        while state["next"] < len(self.buckets) and state["pending"][state["next"]] == 0:
            k = state["next"]
            buf = self._pack_bucket(self.buckets[k], state["arrays"])
            state["handles"][k] = comm.start_reduce_scatter(buf.reshape(-1), "sum", self.group, nonblocking=True)
            state["next"] += 1

    def _drop_overlap(self):
        """Complete the requests of a step that never reached the update (an exception)."""
        state = self._overlap
        if state is not None:
            for h in state["handles"]:
                if h is not None:
                    h.wait()
            self.__dict__["_overlap"] = None

    def _finish_overlap(self, state, grads, arrays):
        """The sharded gradients' shards from the buckets started during backward; buckets not
        complete then are packed now, buckets whose gradients changed since are redone."""
        self.__dict__["_overlap"] = None
        stale = []
        for k, bucket in enumerate(self.buckets):
            for j, s in enumerate(bucket):
                got = state["packed"][k][j]
                if got is None:                  # no hook call (not differentiated here): take it now
                    state["arrays"][s.index] = arrays[s.index]
                    state["packed"][k][j] = grads[s.index]
                    state["pending"][k] -= 1
                elif got is not grads[s.index] and not (got is _NO_GRAD and not np.any(arrays[s.index])):
                    if state["handles"][k] is not None:
                        stale.append(k)
                    state["arrays"][s.index] = arrays[s.index]
        self._start_ready(state)
        out = {}
        for k, bucket in enumerate(self.buckets):
            red = state["handles"][k].wait()
            if k in stale:                       # (the same on every rank: it depends on the program)
                red = comm.start_reduce_scatter(self._pack_bucket(bucket, arrays).reshape(-1), "sum",
                                                self.group).wait()
            self._unpack_bucket(bucket, red, out)
        return out

    # -- the step ---------------------------------------------------------------------------------
    def construct(self, grads):
        slots = self.slots
        if not isinstance(grads, (tuple, list)) or len(grads) != len(slots):
            got = f"{len(grads)} gradients" if isinstance(grads, (tuple, list)) else type(grads).__name__
            raise OpValueError(_OP, f"a tuple of {len(slots)} gradients (one per parameter)", got)
        if self.level == "level3" and not self._step_gathered and any(s.sharded for s in slots):
            raise OpValueError(_OP, "level3 parameters gathered for this step's forward (call the network "
                               "itself, as TrainOneStepCell does, or run forward + backward inside "
                               "`with parallel_optimizer.gathered():`)", "a step whose forward ran on the shards")
        arrays = []
        for s, g in zip(slots, grads):
            if not isinstance(g, Tensor):
                raise OpTypeError(_OP, "gradients as Tensors", type(g).__name__)
            a = np.asarray(g._data)
            if tuple(a.shape) != s.shape:
                raise OpValueError(_OP, f"the gradient of '{s.param.name}' with shape {s.shape}",
                                   f"shape {tuple(a.shape)}")
            arrays.append(a)
        sharded = [s for s in slots if s.sharded]
        replicated = [s.index for s in slots if not s.sharded]
        if self.level == "level1":
            full = self._all_reduce(range(len(slots)), arrays)
            step_grads = [full[s.index] for s in slots]
            opt_grads = [_take_shard(full[s.index], s.chunk, self.rank) if s.sharded else full[s.index]
                         for s in slots]
            kept = step_grads
        else:
            reduced = self._all_reduce(replicated, arrays) if replicated else {}
            state = self._overlap
            reduced.update(self._reduce_scatter(arrays) if state is None else
                           self._finish_overlap(state, grads, arrays))
            opt_grads = [reduced[s.index] for s in slots]
            kept = opt_grads
        self.__dict__["_last_grad_bytes"] = int(sum(a.nbytes for a in kept))
        if self.level == "level3":
            self.__dict__["_step_gathered"] = False
            self._release()
            self._optimizer(tuple(_wrap(a) for a in opt_grads))
            return tuple(_wrap(a) for a in opt_grads)
        for s in sharded:                      # the update sees (chunk,) parameters
            s.full = s.param._data
            s.param._data = _take_shard(s.full, s.chunk, self.rank)
        try:
            self._optimizer(tuple(_wrap(a) for a in opt_grads))
            new_shards = [s.param._data for s in sharded]
        finally:
            for s in sharded:
                s.param._data = s.full
                s.full = None
        if sharded:
            for s, full in zip(sharded, self._all_gather_shards(sharded, new_shards)):
                a = s.param._data
                if a.flags.writeable:
                    a[...] = full.reshape(s.shape)
                else:
                    s.param._data = np.ascontiguousarray(full).reshape(s.shape)
                s.param._version += 1
        return tuple(_wrap(a) for a in opt_grads)

    # -- reports ----------------------------------------------------------------------------------
    def memory_report(self) -> dict:
        """Bytes this rank keeps, by category: `parameters` (the storage of the optimizer's
        parameters now), `gradients` (the reduced gradients the last step handed to the optimizer;
        None before the first step) and `optimizer_state` (the per-parameter state buffers; the
        scalars such as beta powers and global_step are `optimizer_scalars`)."""
        state_ids = {id(q) for s in self.slots for q in s.states}
        own = {id(s.param) for s in self.slots}
        scalars = sum(q._data.nbytes for _, q in self._optimizer.parameters_and_names()
                      if id(q) not in state_ids and id(q) not in own)
        return {"level": self.level, "ranks": self.ranks,
                "parameters": int(sum(s.param._data.nbytes for s in self.slots)),
                "gradients": self._last_grad_bytes,
                "optimizer_state": int(sum(q._data.nbytes for s in self.slots for q in s.states)),
                "optimizer_scalars": int(scalars)}

    def sharded_parameters(self):
        """Names of the parameters this optimizer shards (the others stay replicated)."""
        return [s.param.name for s in self.slots if s.sharded]

    # -- checkpoints ------------------------------------------------------------------------------
    def strategy(self) -> dict:
        """How this rank's checkpoint is cut (JSON-ready)."""
        return {"format": "minispore-parallel-optimizer-1", "level": self.level, "ranks": self.ranks,
                "rank": self.rank,
                "padding": "flattened row-major, zero-padded to ranks*chunk, chunk=ceil(numel/ranks); "
                           "rank r holds [r*chunk, (r+1)*chunk)",
                "params": {s.param.name: {"shape": list(s.shape), "numel": s.numel, "chunk": s.chunk,
                                          "sharded": s.sharded, "states": [q.name for q in s.states]}
                           for s in self.slots}}

    def checkpoint_info(self) -> dict:
        """`append_dict` for save_checkpoint: {"parallel_optimizer_strategy": JSON string}."""
        return {STRATEGY_KEY: json.dumps(self.strategy(), sort_keys=True)}

    def check_checkpoint(self, param_dict):
        """Refuse a checkpoint cut by another strategy (other ranks, level, rank or shapes)."""
        raw = param_dict.get(STRATEGY_KEY) if isinstance(param_dict, dict) else None
        if raw is None:
            raise OpValueError("check_checkpoint", f"a checkpoint saved with append_dict=checkpoint_info() "
                               f"(a '{STRATEGY_KEY}' entry)", "none")
        if not isinstance(raw, str):
            raw = str(raw.asnumpy()) if hasattr(raw, "asnumpy") else str(raw)
        saved = json.loads(raw)
        mine = self.strategy()
        for key in ("level", "ranks", "rank", "params"):
            if saved.get(key) != mine[key]:
                raise OpValueError("check_checkpoint", f"the checkpoint's '{key}' to equal this run's "
                                   f"({mine[key] if key != 'params' else 'parameter table'})",
                                   repr(saved.get(key)) if key != "params" else "a different parameter table")

    def full_state_dict(self) -> dict:
        """{name: ndarray} of every parameter and state buffer of the optimizer, whole (a
        collective: every rank calls it; all get the same dict). Scalars are included as they are."""
        out = {}
        sharded = [s for s in self.slots if s.sharded]
        stored = {s.index: s.param._data for s in sharded}
        param_fulls = {}
        need = [s for s in sharded if not s.gathered]          # level3: gather the shards
        if need:
            for s, full in zip(need, self._all_gather_shards(need, [stored[s.index] for s in need])):
                param_fulls[s.index] = full.reshape(s.shape)
        for s in self.slots:
            out[s.param.name] = np.array(param_fulls.get(s.index, s.param._data))
        kinds = max((len(s.states) for s in sharded), default=0)
        for k in range(kinds):
            group = [s for s in sharded if len(s.states) > k]
            for s, full in zip(group, self._all_gather_shards(group, [s.states[k]._data for s in group])):
                out[s.states[k].name] = np.array(full.reshape(s.shape))
        for _, q in self._optimizer.parameters_and_names():     # replicated state, scalars
            if q.name not in out:
                out[q.name] = np.array(q._data)
        return out


__all__ = ["ParallelOptimizer", "zero_bytes", "settings"]
