"""Expert parallelism: the experts of every MoE layer (minispore/nn/layers/moe.py) spread over the
ranks of an expert-parallel group, tokens sent to them and back with AlltoAll (GShard, Lepikhin et
al. 2020; MindSpore / MindFormers `parallel_config.expert_parallel` with `enable_alltoall`).

    init()                                        # under msrun / mpiexec -n 4
    ms.set_seed(0)
    model = Llama(get_preset("llama-moe-tiny").model)      # the same weights on every rank
    ep = expert_parallel(model, TransformerOpParallelConfig(data_parallel=4, expert_parallel=2))
    opt = AdamW(model.trainable_params(), lr=1e-3)   # after expert_parallel: this rank's experts
    reducer = ep.grad_reducer(opt.parameters)
    loss, grads = ms.value_and_grad(model.loss, None, opt.parameters)(ep.data_parallel_batch(x),
                                                                       ep.data_parallel_batch(y))
    opt(reducer(grads))

`expert_parallel` works IN PLACE: each MoE layer of `model` is replaced by an `ExpertParallelMoE`
holding only this rank's experts (copies of their slices); the rest of the model is untouched
and stays replicated (data parallel). The returned `ExpertParallel` knows the groups.

## Ranks and groups (W = data_parallel ranks, E = expert_parallel)

Expert parallelism is carved out of data parallelism (MindFormers: expert_parallel divides
data_parallel, model_parallel = 1 here): every rank runs the whole non-expert model on its own
1/W of the global batch, and the W ranks form W/E expert-parallel groups of E consecutive ranks
(all-to-all is the heaviest traffic: it goes to the closest links):

    expert-parallel group k      world ranks [k E, (k+1) E)            AlltoAll of the MoE buffers
    expert replica group i       world ranks {i, i+E, i+2E, ...}       the same experts: gradient sum
    data-parallel group          the world                             non-expert gradients: mean

Rank r holds experts [(r mod E) n/E, (r mod E + 1) n/E) of every layer (n = num_experts): with
W = 4, E = 2: ep groups {0,1} {2,3}, replica groups {0,2} {1,3}.

## One MoE layer, forward (the routing is moe.py's, on this rank's tokens: one group)

    buffers (n, C, dim)  --AlltoAll(split 0, concat 1)-->  (n/E, E*C, dim)   my experts' tokens
                                                            from every rank of the group
    local experts                                          (n/E, E*C, dim)
    outputs              --AlltoAll(split 1, concat 0)-->  (n, C, dim)       my tokens' outputs

The first AlltoAll sends rank j the slots of rank j's experts; rank j's experts see the E ranks'
slots side by side, exactly the (groups*C, dim) batch the single-process layer builds from its
`token_groups` groups; the second sends every output back to the rank that owns its token. The
AlltoAll's backward is the AlltoAll with split and concat swapped (ops/prims/comm.py), so the
gradient takes the reverse path. Per layer, per AlltoAll, each rank sends (E-1)/E of its buffer:

    bytes per MoE layer, forward = 2 (E-1)/E * n * C * dim * itemsize      (the same again in backward)

(`comm_bytes()["all_to_all"]["ring"]`; with n = E experts, one per rank: 2 (E-1)/E * E*C*dim*itemsize).
With `enable_alltoall=False` the layer does what MindSpore does without the flag: AllGather the
whole group's buffers and keep its own experts' slots (and AllGather the outputs and keep its own
tokens'): the same numbers, (E-1) times a whole buffer per all-gather instead of (E-1)/E of it.

## Gradients

The global loss is the mean of the W ranks' local losses. A non-expert weight's gradient on a rank
is that rank's share: the data-parallel mean over the world completes it. An expert's gradient on
its owner already sums the E ranks of its group (their tokens' cotangents came back through the
AlltoAll): summing it over the replica group (the same expert on the other W/E groups) and dividing
by W gives the global gradient (`ExpertParallelGradReducer`).

Equality with one process: `set_token_groups(model, W)` (moe.py) routes each rank's rows as its
own group (capacity and balancing loss per group), which is what every rank does here, so the
runs compute the same numbers (float64: ~1e-15; tests/parallel/test_expert_parallel.py).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common import process_groups as pg
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..communication import comm_func
from ..nn import Cell, DistributedGradReducer
from ..nn.layers.moe import MoE, SwiGLUExperts, moe_layers
from ..ops import functional as F
from ..ops.prims import comm as C
from .megatron import data_parallel_block

_OP = "expert_parallel"


# ------------------------------------------------------------------------------------------------
# the layout
def _int_field(config, name, default=1):
    v = config.get(name, default) if isinstance(config, dict) else getattr(config, name, default)
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise OpValueError(_OP, f"parallel_config.{name} as a positive int", repr(v))
    return int(v)


def layout_of(parallel_config) -> tuple:
    """(data_parallel, expert_parallel) from a TransformerOpParallelConfig (or a dict of its fields),
    refusing what is not built together with experts here (model_parallel, pipeline_stage > 1)."""
    if parallel_config is None or isinstance(parallel_config, (str, bytes, numbers.Number)):
        raise OpTypeError(_OP, "'parallel_config' as a TransformerOpParallelConfig or a dict of its fields",
                          type(parallel_config).__name__)
    dp, ep = _int_field(parallel_config, "data_parallel"), _int_field(parallel_config, "expert_parallel")
    for name in ("model_parallel", "pipeline_stage"):
        v = _int_field(parallel_config, name)
        if v != 1:
            raise OpValueError(_OP, f"parallel_config.{name} = 1 (expert parallelism runs inside data "
                               "parallelism here: data_parallel x expert_parallel)", f"{name}={v}")
    if dp % ep:
        raise OpValueError(_OP, f"parallel_config.expert_parallel dividing data_parallel ({dp}): the expert "
                           "groups are carved out of the data-parallel ranks", f"expert_parallel={ep}")
    return dp, ep


def _group(name, ranks) -> str:
    return pg.ensure(name, ranks, _OP)


def expert_parallel_groups(data_parallel: int, expert_parallel: int) -> tuple:
    """(expert-parallel group, expert replica group) names of THIS rank, creating every group of the
    layout (module docstring). The whole world as the ep group is the world group; a replica
    group of one rank (E = W) or an ep group of one (E = 1) is None."""
    world = pg.world()
    w, e = data_parallel, expert_parallel
    if w != world.size:
        raise OpValueError(_OP, f"parallel_config.data_parallel equal to the number of processes ({world.size})",
                           f"data_parallel={w}")
    tag = f"moe_dp{w}_ep{e}"
    k, i = divmod(world.rank, e)
    ep_groups = [pg.HCCL_WORLD_COMM_GROUP if e == w else
                 _group(f"{tag}_expert_parallel_{g}", [g * e + j for j in range(e)]) for g in range(w // e)]
    if e == 1:
        replica = [pg.HCCL_WORLD_COMM_GROUP]
    elif e == w:
        replica = [None] * e
    else:
        replica = [_group(f"{tag}_expert_replica_{j}", [g * e + j for g in range(w // e)]) for j in range(e)]
    return (ep_groups[k] if e > 1 else None), replica[i]


# ------------------------------------------------------------------------------------------------
# the layer
class ExpertParallelMoE(MoE):
    """`MoE` holding experts [rank n/E, (rank+1) n/E) of `moe` (its router is shared, replicated);
    `run_experts` exchanges the buffers with the group's ranks (module docstring)."""

    def __init__(self, moe: MoE, group, enable_alltoall: bool = True):
        Cell.__init__(self)
        if not isinstance(moe, MoE) or isinstance(moe, ExpertParallelMoE):
            raise OpTypeError(_OP, "a single-process nn.MoE layer to split", type(moe).__name__)
        if not isinstance(enable_alltoall, bool):
            raise OpTypeError(_OP, "'enable_alltoall' as True or False", repr(enable_alltoall))
        g = pg.get(group)
        e, r = g.size, g.rank
        if moe.num_experts % e:
            raise OpValueError(_OP, f"num_experts divisible by expert_parallel ({e}): each rank holds "
                               f"num_experts / {e} whole experts", f"num_experts={moe.num_experts}")
        if moe.token_groups != 1:
            raise OpValueError(_OP, "an MoE layer with token_groups = 1 (each rank's tokens are its group)",
                               f"token_groups={moe.token_groups}")
        for name in ("dim", "hidden_dim", "num_experts", "top_k", "capacity_factor", "aux_loss_coef",
                     "router_z_loss_coef", "token_groups"):
            setattr(self, name, getattr(moe, name))
        self.group, self.ep_size, self.ep_rank = group, e, r
        self.local_experts = moe.num_experts // e
        self.expert_start = r * self.local_experts
        self.enable_alltoall = enable_alltoall
        self.router = moe.router
        self.dropout = moe.dropout
        lo, hi = self.expert_start, self.expert_start + self.local_experts
        full = moe.experts
        self.experts = SwiGLUExperts.from_weights(
            *(getattr(full, w).asnumpy()[lo:hi] for w in ("w1", "w2", "w3")),
            requires_grad=full.w1.requires_grad, names=tuple(getattr(full, w).name for w in ("w1", "w2", "w3")))
        self._forget()

    def run_experts(self, buffers):
        """(1, n, C, dim) buffers of this rank's tokens -> their outputs, through the experts' ranks."""
        _, n, c, d = buffers.shape
        e, nl = self.ep_size, self.local_experts
        b = F.reshape(buffers, (n, c, d))
        if self.enable_alltoall:
            mine = C.all_to_all(b, split_count=e, split_dim=0, concat_dim=1, group=self.group)   # (nl, E*C, d)
            out = self.experts(mine)
            back = C.all_to_all(out, split_count=e, split_dim=1, concat_dim=0, group=self.group)  # (n, C, d)
        else:
            # MindSpore without enable_alltoall: AllGather + Split + Concat
            every = F.reshape(C.all_gather(b, group=self.group), (e, n, c, d))              # all ranks' buffers
            mine = F.narrow(every, 1, self.expert_start, nl)                                # (E, nl, C, d)
            out = self.experts(F.reshape(F.transpose(mine, (1, 0, 2, 3)), (nl, e * c, d)))
            outs = C.all_gather(out, group=self.group)                                      # (n, E*C, d)
            back = F.narrow(outs, 1, self.ep_rank * c, c)                                    # my tokens' slots
        return F.reshape(back, (1, n, c, d))

    def extend_repr(self):
        return (super().extend_repr() + f", experts [{self.expert_start}, {self.expert_start + self.local_experts})"
                f" of expert_parallel={self.ep_size}")


# ------------------------------------------------------------------------------------------------
# the model
class ExpertParallel:
    """What `expert_parallel(model, parallel_config)` returns: the layout, this rank's place in it,
    the converted layers, and the helpers of a training step (module docstring)."""

    def __init__(self, model: Cell, parallel_config, enable_alltoall: bool = True):
        if not isinstance(model, Cell):
            raise OpTypeError(_OP, "a Cell (a model with nn.MoE layers)", type(model).__name__)
        self.data_parallel, self.expert_parallel = layout_of(parallel_config)
        if not moe_layers(model) or isinstance(model, MoE):
            got = "a bare MoE layer" if isinstance(model, MoE) else f"{type(model).__name__} without any"
            raise OpValueError(_OP, "a model with nn.MoE layers (LlamaConfig.num_experts > 0)", got)
        for layer in moe_layers(model):           # every refusal before any group or copy is made
            if isinstance(layer, ExpertParallelMoE):
                raise OpValueError(_OP, "a model not yet split over expert-parallel ranks", "one already split")
            if layer.num_experts % self.expert_parallel:
                raise OpValueError(_OP, f"num_experts divisible by expert_parallel ({self.expert_parallel}): "
                                   f"each rank holds whole experts", f"num_experts={layer.num_experts}")
        world = pg.world()
        self.dp_size, self.dp_rank = world.size, world.rank
        if self.data_parallel != world.size:
            raise OpValueError(_OP, f"parallel_config.data_parallel equal to the number of processes "
                               f"({world.size})", f"data_parallel={self.data_parallel}")
        ep_group, self.replica_group = expert_parallel_groups(self.data_parallel, self.expert_parallel)
        self.ep_group = ep_group if ep_group is not None else self._one_rank_group()
        self.ep_size, self.ep_rank = self.expert_parallel, world.rank % self.expert_parallel
        self.model = model
        self.layers = _replace_moe_layers(model, lambda m: ExpertParallelMoE(m, self.ep_group, enable_alltoall))

    @staticmethod
    def _one_rank_group():
        """expert_parallel = 1: the experts stay whole; the 'group' of the AlltoAll is this rank."""
        name = f"moe_self_{pg.world().rank}"
        world = pg.world()
        for r in range(world.size):               # created on every rank: create is collective
            _group(f"moe_self_{r}", [r])
        return name

    def expert_parameters(self) -> list:
        """The parameters split over the expert-parallel group (each rank its own experts)."""
        return [p for layer in self.layers for p in layer.experts.get_parameters()]

    # -- a training step -------------------------------------------------------------------------
    def data_parallel_batch(self, x):
        """This rank's rows of a global batch (axis 0 cut into data_parallel equal blocks)."""
        return data_parallel_block("ExpertParallel.data_parallel_batch", x, self.dp_size, self.dp_rank)

    def data_parallel_mean(self, value):
        """The mean of a rank-local number (a loss) over the world: the global batch's value."""
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value, np.float64))
        if self.dp_size == 1:
            return value
        flat = F.reshape(F.stop_gradient(value), (-1,))
        return F.reshape(comm_func.all_reduce(flat, "sum")[0], tuple(value.shape)) / self.dp_size

    def dropped_tokens(self) -> int:
        """Assignments dropped in the last forward by all ranks' MoE layers (collective over the world)."""
        mine = sum(layer.dropped_tokens or 0 for layer in self.layers)
        if self.dp_size == 1:
            return int(mine)
        total = comm_func.all_reduce(Tensor(np.array([mine], np.int64)), "sum")[0]
        return int(total.asnumpy()[0])

    def grad_reducer(self, parameters):
        """An ExpertParallelGradReducer for `parameters` (usually optimizer.parameters)."""
        return ExpertParallelGradReducer(self, parameters)

    def gathered_expert_weights(self) -> dict:
        """{parameter name: the whole (num_experts, ...) array} of every split expert weight
        (collective over the expert-parallel group)."""
        out = {}
        for p in self.expert_parameters():
            full = C.all_gather(F.stop_gradient(p), group=self.ep_group) if self.ep_size > 1 else p
            out[p.name] = full.asnumpy()
        return out


def _replace_moe_layers(model, make) -> list:
    """Replace every nn.MoE child anywhere in `model` by make(child), keeping the full dotted
    parameter names; returns the new layers in model order."""
    new = []
    for _, parent in list(model.cells_and_names()):
        for attr, child in list(parent.name_cells().items()):
            if isinstance(child, MoE) and not isinstance(child, ExpertParallelMoE):
                layer = make(child)
                layer.__dict__["_attached"] = True      # keep the names set below
                parent.insert_child_to_cell(attr, layer)
                new.append(layer)
    ids = {id(p) for layer in new for p in layer.get_parameters()}
    for name, p in model.parameters_and_names():
        if id(p) in ids:
            p.name = name
    return new


class ExpertParallelGradReducer(Cell):
    """The gradient communication of one expert-parallel training step:

    * non-expert parameters (attention, norms, embedding, routers): mean over the world (data
      parallel), one `nn.DistributedGradReducer`;
    * expert parameters: summed over the expert replica group {i, i+E, ...} and divided by the
      world size W (module docstring); with E = W there is no replica: only the division."""

    def __init__(self, ep: ExpertParallel, parameters):
        super().__init__(auto_prefix=False)
        if not isinstance(ep, ExpertParallel):
            raise OpTypeError("ExpertParallelGradReducer", "an ExpertParallel", type(ep).__name__)
        params = tuple(parameters)
        experts = {id(p) for p in ep.expert_parameters()}
        d = self.__dict__
        d["_expert_index"] = [i for i, p in enumerate(params) if id(p) in experts]
        d["_dense_index"] = [i for i, p in enumerate(params) if id(p) not in experts]
        w = ep.dp_size
        d["dense_reducer"] = (DistributedGradReducer([params[i] for i in self._dense_index], mean=True,
                                                     group=pg.HCCL_WORLD_COMM_GROUP)
                              if w > 1 and self._dense_index else None)
        d["expert_reducer"] = (DistributedGradReducer([params[i] for i in self._expert_index], mean=True,
                                                      degree=w, group=ep.replica_group)
                               if ep.replica_group is not None and w > 1 and self._expert_index else None)
        d["_expert_scale"] = 1.0 / w if ep.replica_group is None and w > 1 else None

    def construct(self, grads):
        grads = list(grads)
        for index, reducer in ((self._dense_index, self.dense_reducer), (self._expert_index, self.expert_reducer)):
            if reducer is not None and index:
                for i, g in zip(index, reducer(tuple(grads[i] for i in index))):
                    grads[i] = g
        if self._expert_scale is not None:
            for i in self._expert_index:
                grads[i] = grads[i] * self._expert_scale
        return tuple(grads)


def expert_parallel(model: Cell, parallel_config, enable_alltoall: bool = True) -> ExpertParallel:
    """Split every MoE layer of `model` over expert-parallel ranks, in place (module docstring).
    `parallel_config`: a TransformerOpParallelConfig (or dict) with data_parallel = the world size
    and expert_parallel dividing it and every layer's num_experts."""
    return ExpertParallel(model, parallel_config, enable_alltoall)


def alltoall_bytes_per_layer(num_experts, capacity, dim, itemsize, expert_parallel) -> int:
    """Ring bytes one rank sends in one MoE layer's forward: two AlltoAlls of the (num_experts,
    capacity, dim) buffer, (E-1)/E of it each (the backward sends the same again)."""
    e = expert_parallel
    return 2 * (e - 1) * (num_experts * capacity * dim * itemsize // e)


__all__ = ["ExpertParallel", "ExpertParallelMoE", "ExpertParallelGradReducer", "expert_parallel",
           "expert_parallel_groups", "layout_of", "alltoall_bytes_per_layer"]
