"""`nn.MoE`: a mixture-of-experts feed-forward layer (Mixtral-style top-k routing over SwiGLU experts,
with GShard/Switch capacity, token dropping and the load-balancing loss).

A dense transformer sends every token through the same FFN. A mixture of experts keeps `num_experts`
FFNs and lets a small *router* choose `top_k` of them per token, so the parameter count grows with
the number of experts while the work per token stays that of `top_k` FFNs (Shazeer et al. 2017;
GShard, Lepikhin et al. 2020; Switch Transformer, Fedus et al. 2021; Mixtral, Jiang et al. 2024).

    logits = x W_r^T                         the router: one Dense(dim, num_experts), no bias
    p      = softmax(logits)                 (tokens, num_experts)
    top-k  = the k largest p per token       experts e_1..e_k, gates g_j = p_{e_j} / sum_j p_{e_j}
    y      = sum_j g_j * SwiGLU_{e_j}(x)     (k = 1 keeps g = p_e, as Switch does: renormalising one
                                              gate would make it 1 and leave the router untrained)

**Capacity and dropping.** An accelerator wants fixed shapes, so each expert gets a buffer of
`capacity` token slots per group of tokens (GShard's "expert capacity"):

    capacity = ceil(capacity_factor * tokens_per_group * top_k / num_experts)

(the float product is rounded to 9 decimals before the ceiling, so 0.7 * 10 / 7 counts as 1, not
as 1.0000000000000002). Slots are handed out in priority order: every token's first choice, in
token order, then every token's second choice, and so on (GShard's order: a token's best expert is
served before anyone's second best). An assignment past its expert's capacity is DROPPED: it adds
nothing to y (the gates of the other choices are not renormalised), so a token whose every choice
was dropped leaves the layer as zero and the block's residual connection carries it through.
`capacity_factor >= num_experts / top_k` gives capacity >= tokens: nothing can be dropped.

**The buffers.** Dispatch scatters each kept assignment's token row into slot (expert, position)
of a zero buffer (groups, num_experts, capacity, dim) — `ops.index_add` at computed indices; the
experts run as three batched matmuls over (num_experts, groups*capacity, dim) with stacked weights
w1, w3 (num_experts, dim, hidden) and w2 (num_experts, hidden, dim) (stored "in x out": y = x @ w);
combine gathers every assignment's row back (`ops.gather`, a zero row for dropped ones), scales it by
its gate and sums the k choices. The routing decisions (top-k indices, positions, kept or not) are
integers; the values flow through softmax, gather and index_add, whose backward rules carry the
gradient to the router (through the gates), to the experts and to x. Expert parallelism
(minispore/parallel/expert_parallel.py) overrides only `run_experts`: the same buffers travel to the
ranks that hold the experts with an AlltoAll and back with a second one.

**Groups.** Capacity is counted per group of tokens (`token_groups`, GShard's G): the tokens are
cut into G equal consecutive blocks, each routed with its own capacity and its own load-balancing
loss. One group per data-parallel rank is what a distributed run does (each rank only sees its own
tokens), so `set_token_groups(model, world_size)` makes one process reproduce it exactly.

**Auxiliary losses** (per group, averaged over the groups; `moe_auxiliary_loss(model)` sums them
over the layers, weighted, for the training loss):

    aux    = num_experts * sum_e f_e * P_e        Switch/GShard load balancing; f_e = fraction of the
             group's tokens routed to e among their top-k (before dropping, no gradient), P_e = mean
             router probability of e. Uniform routing gives top_k (HuggingFace Mixtral's convention).
    z_loss = mean_t logsumexp(logits_t)^2         ST-MoE's router z-loss (Zoph et al. 2022): keeps the
                                                  router logits small; weight router_z_loss_coef (0: off)

After each call the layer keeps its statistics: `dropped_tokens` (assignments dropped: token copies
that found their expert full), `fully_dropped_tokens` (tokens with all k choices dropped),
`expert_load` (kept tokens per expert), `capacity`, `aux_loss`, `z_loss`; `moe_statistics(model)`
collects them. MindSpore / MindFormers: `moe_config` (expert_num, capacity_factor, aux_loss_factor,
num_experts_chosen, z_loss_factor); the fused Ascend kernels MoeGatingTopKSoftmax, MoeInitRouting,
GroupedMatmul and MoeFinalizeRouting are these same steps.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import Normal, initializer
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell
from .dense import Dense
from .dropout import Dropout

_OP = "MoE"


def expert_capacity(tokens: int, num_experts: int, top_k: int, capacity_factor: float) -> int:
    """Slots per expert for a group of `tokens`: ceil(capacity_factor * tokens * top_k / num_experts),
    at least 1 (the product is rounded to 9 decimals first, so float noise cannot add a slot)."""
    return max(1, math.ceil(round(capacity_factor * tokens * top_k / num_experts, 9)))


def check_moe_arguments(op, num_experts, top_k, capacity_factor, aux_loss_coef=0.0, router_z_loss_coef=0.0,
                        top_k_name="top_k"):
    """Refuse bad MoE hyper-parameters with an Op*Error naming `op` (LlamaConfig reuses it, whose
    field is `moe_top_k`)."""
    for name, v in (("num_experts", num_experts), (top_k_name, top_k)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise OpTypeError(op, f"'{name}' to be an int", f"{type(v).__name__} {v!r}")
        if v <= 0:
            raise OpValueError(op, f"'{name}' > 0", repr(v))
    if top_k > num_experts:
        raise OpValueError(op, f"'{top_k_name}' at most num_experts ({num_experts}): each token picks distinct "
                           "experts", f"{top_k_name}={top_k}")
    for name, v, positive in (("capacity_factor", capacity_factor, True), ("aux_loss_coef", aux_loss_coef, False),
                              ("router_z_loss_coef", router_z_loss_coef, False)):
        if (not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v)
                or (v <= 0 if positive else v < 0)):
            raise OpValueError(op, f"'{name}' as a finite number {'> 0' if positive else '>= 0'}", repr(v))


class SwiGLUExperts(Cell):
    """`num_experts` SwiGLU FFNs, w2(silu(x w1) * (x w3)), as stacked weights so that all experts run
    as three batched matmuls: w1, w3 (num_experts, dim, hidden), w2 (num_experts, hidden, dim).
    Input (num_experts, rows, dim): row block e goes through expert e. A zero row stays zero
    (no biases), so empty buffer slots cost arithmetic but change nothing."""

    def __init__(self, num_experts, dim, hidden_dim, init_std=0.02, proj_std=None, dtype=mstype.float32):
        super().__init__()
        self.num_experts = _checks.positive_int("SwiGLUExperts", "num_experts", num_experts)
        self.dim = _checks.positive_int("SwiGLUExperts", "dim", dim)
        self.hidden_dim = _checks.positive_int("SwiGLUExperts", "hidden_dim", hidden_dim)
        proj_std = init_std if proj_std is None else proj_std
        self.w1 = Parameter(initializer(Normal(init_std), [num_experts, dim, hidden_dim], dtype), name="w1")
        self.w2 = Parameter(initializer(Normal(proj_std), [num_experts, hidden_dim, dim], dtype), name="w2")
        self.w3 = Parameter(initializer(Normal(init_std), [num_experts, dim, hidden_dim], dtype), name="w3")

    @classmethod
    def from_weights(cls, w1, w2, w3, requires_grad=True, names=("w1", "w2", "w3")) -> "SwiGLUExperts":
        """Experts holding copies of the given stacked arrays (e.g. one rank's slice of a bigger
        set: expert parallelism), without drawing any random numbers."""
        arrays = [np.array(a.asnumpy() if isinstance(a, Tensor) else a, copy=True) for a in (w1, w2, w3)]
        n, dim, hidden = arrays[0].shape
        if arrays[2].shape != (n, dim, hidden) or arrays[1].shape != (n, hidden, dim):
            raise OpValueError("SwiGLUExperts.from_weights", "w1, w3 of shape (n, dim, hidden) and w2 (n, hidden, dim)",
                               f"shapes {[a.shape for a in arrays]}")
        self = cls.__new__(cls)
        Cell.__init__(self)
        self.num_experts, self.dim, self.hidden_dim = n, dim, hidden
        for attr, a, name in zip(("w1", "w2", "w3"), arrays, names):
            setattr(self, attr, Parameter(Tensor(a), name=name, requires_grad=requires_grad))
        return self

    def construct(self, h):
        return F.bmm(F.silu(F.bmm(h, self.w1)) * F.bmm(h, self.w3), self.w2)


class MoE(Cell):
    """`MoE(dim, hidden_dim, num_experts, top_k=2, capacity_factor=1.25, aux_loss_coef=0.01,
    router_z_loss_coef=0.0, token_groups=1, init_std=0.02, proj_std=None, dropout=0.0,
    dtype=float32)`: input (*, dim) -> output (*, dim). See the module docstring.

    Parameters: `router.weight` (num_experts, dim); `experts.w1`, `experts.w3` (num_experts, dim,
    hidden_dim), `experts.w2` (num_experts, hidden_dim, dim)."""

    def __init__(self, dim, hidden_dim, num_experts, top_k=2, capacity_factor=1.25, aux_loss_coef=0.01,
                 router_z_loss_coef=0.0, token_groups=1, init_std=0.02, proj_std=None, dropout=0.0,
                 dtype=mstype.float32):
        super().__init__()
        _checks.positive_int(_OP, "dim", dim)
        _checks.positive_int(_OP, "hidden_dim", hidden_dim)
        check_moe_arguments(_OP, num_experts, top_k, capacity_factor, aux_loss_coef, router_z_loss_coef)
        self.dim, self.hidden_dim = int(dim), int(hidden_dim)
        self.num_experts, self.top_k = int(num_experts), int(top_k)
        self.capacity_factor = float(capacity_factor)
        self.aux_loss_coef, self.router_z_loss_coef = float(aux_loss_coef), float(router_z_loss_coef)
        self.token_groups = _checks.positive_int(_OP, "token_groups", token_groups)
        self.router = Dense(dim, num_experts, weight_init=Normal(init_std), has_bias=False, dtype=dtype)
        self.experts = SwiGLUExperts(num_experts, dim, hidden_dim, init_std, proj_std, dtype)
        self.dropout = Dropout(p=dropout)
        self._forget()

    # -- statistics of the last call ---------------------------------------------------------------
    def _remember(self, **kw):
        # plain __dict__ writes: per-call results, not configuration (a Cell attribute write would
        # tell compiled graphs that the model changed: common/state_epoch.touch)
        self.__dict__.update(kw)

    def _forget(self):
        self._remember(aux_loss=None, z_loss=None, capacity=None, _dropped=None, _fully_dropped=None,
                       _load=None)

    @property
    def dropped_tokens(self) -> int:
        """Assignments (token copies) of the last call that found their expert full."""
        return None if self._dropped is None else int(self._dropped.asnumpy())

    @property
    def fully_dropped_tokens(self) -> int:
        """Tokens of the last call with every one of their top_k choices dropped (output zero)."""
        return None if self._fully_dropped is None else int(self._fully_dropped.asnumpy())

    @property
    def expert_load(self):
        """Kept assignments per expert in the last call, summed over the groups (num_experts ints)."""
        return None if self._load is None else self._load.asnumpy().astype(np.int64)

    def loss_term(self):
        """aux_loss_coef * aux_loss (+ router_z_loss_coef * z_loss) of the last call: the layer's share
        of the training loss."""
        if self.aux_loss is None:
            raise OpValueError(f"{_OP}.loss_term", "a layer that has run (call the model first)", "no call yet")
        term = self.aux_loss * self.aux_loss_coef
        if self.router_z_loss_coef:
            term = term + self.z_loss * self.router_z_loss_coef
        return term

    # -- the forward --------------------------------------------------------------------------------
    def construct(self, x):
        _checks.tensor_input(_OP, x)
        shape = tuple(x.shape)
        if len(shape) < 1 or shape[-1] != self.dim:
            raise OpValueError(_OP, f"an input of shape (*, dim={self.dim})", f"shape {shape}")
        x2 = F.reshape(x, (-1, self.dim))
        tokens = x2.shape[0]
        groups = self.token_groups
        if tokens == 0 or tokens % groups:
            raise OpValueError(_OP, f"a token count divisible by token_groups ({groups})", f"{tokens} tokens")
        route = self.route(x2, groups)
        out = self.run_experts(self.dispatch(x2, route))
        y = self.combine(out, route)
        return self.dropout(F.reshape(y, shape))

    def route(self, x2, groups):
        """The routing of (tokens, dim) in `groups` groups: a `_Route` with the slot of every
        assignment and its gate; records the auxiliary losses and the statistics."""
        n, k = self.num_experts, self.top_k
        tokens = x2.shape[0]
        per_group = tokens // groups
        capacity = self.capacity_for(per_group)
        logits = self.router(x2)                                            # (T, n)
        probs = F.softmax(logits, -1)
        top_p, top_i = F.topk(probs, k)                                     # (T, k): best first
        gates = top_p / F.sum(top_p, -1, keepdim=True) if k > 1 else top_p
        # choice-major order inside each group: all first choices (token order), then second ones
        expert = F.reshape(F.transpose(F.reshape(F.cast(top_i, mstype.int64), (groups, per_group, k)), (0, 2, 1)),
                           (groups, k * per_group))
        hot = F.one_hot(expert, n, 1, 0)                                    # (G, kS, n) int64
        position = F.sum(F.cumsum(hot, 1) * hot, -1) - 1                    # place in the expert's queue
        keep = position < capacity
        consts = _constants(groups, per_group, k, n, capacity)
        slot = F.where(keep, expert * capacity + position + consts.group_base, consts.pad_slot)
        slot = F.reshape(slot, (-1,))                                       # (G*k*S,) into the flat buffer
        gates_cm = F.reshape(F.transpose(F.reshape(gates, (groups, per_group, k)), (0, 2, 1)),
                             (groups, k, per_group, 1))
        # auxiliary losses, per group then averaged (the f_e carry no gradient: they are counts)
        frac = F.sum(F.cast(hot, probs.dtype), 1) / per_group               # (G, n), sums to k
        mean_p = F.mean(F.reshape(probs, (groups, per_group, n)), 1)        # (G, n)
        aux = F.mean(F.sum(frac * mean_p, -1)) * n
        z = F.mean(F.square(F.logsumexp(logits, -1)))
        kept = F.cast(keep, mstype.int64)
        kept_any = F.sum(F.reshape(kept, (groups, k, per_group)), 1) > 0
        self._remember(aux_loss=aux, z_loss=z, capacity=capacity,
                       _dropped=groups * k * per_group - F.sum(kept),
                       _fully_dropped=tokens - F.sum(F.cast(kept_any, mstype.int64)),
                       _load=F.sum(F.reshape(F.cast(hot, mstype.int64) * F.reshape(kept, (groups, k * per_group, 1)),
                                             (-1, n)), 0))
        return _Route(groups, per_group, capacity, slot, gates_cm, consts)

    def capacity_for(self, tokens_per_group: int) -> int:
        return expert_capacity(tokens_per_group, self.num_experts, self.top_k, self.capacity_factor)

    def dispatch(self, x2, route):
        """(tokens, dim) -> the expert buffers (groups, num_experts, capacity, dim): every kept
        assignment's token row in its slot, zeros elsewhere (dropped rows land in one spare row
        that is cut off)."""
        g, n, c = route.groups, self.num_experts, route.capacity
        rows = F.gather(x2, route.consts.token_of, 0)                      # (G*k*S, dim), choice-major
        flat = F.index_add(F.zeros((g * n * c + 1, self.dim), x2.dtype), route.slot, rows, 0)
        return F.reshape(F.narrow(flat, 0, 0, g * n * c), (g, n, c, self.dim))

    def run_experts(self, buffers):
        """(groups, num_experts, capacity, dim) -> the experts' outputs, same shape: expert e sees
        its slots of every group as one (groups*capacity, dim) batch. Expert parallelism replaces
        this step (AlltoAll to the experts' ranks and back)."""
        g, n, c, d = buffers.shape
        h = F.reshape(F.transpose(buffers, (1, 0, 2, 3)), (n, g * c, d))
        out = self.experts(h)
        return F.transpose(F.reshape(out, (n, g, c, d)), (1, 0, 2, 3))

    def combine(self, out, route):
        """The experts' outputs -> (tokens, dim): y_t = sum_j gate_tj * out[slot_tj] (zero for a
        dropped assignment: its slot is the spare zero row)."""
        g, n, c, d = out.shape
        flat = F.concat([F.reshape(out, (g * n * c, d)), F.zeros((1, d), out.dtype)], 0)
        picked = F.reshape(F.gather(flat, route.slot, 0), (g, self.top_k, route.per_group, d))
        return F.reshape(F.sum(picked * route.gates, 1), (g * route.per_group, d))

    def extend_repr(self):
        return (f"dim={self.dim}, hidden_dim={self.hidden_dim}, num_experts={self.num_experts}, top_k={self.top_k}, "
                f"capacity_factor={self.capacity_factor}, token_groups={self.token_groups}")


class _Route:
    """One call's routing: slot (G*k*S,) int64 into the flat buffer (the spare row for dropped
    assignments), gates (G, k, S, 1), the capacity and the index constants."""

    __slots__ = ("groups", "per_group", "capacity", "slot", "gates", "consts")

    def __init__(self, groups, per_group, capacity, slot, gates, consts):
        self.groups, self.per_group, self.capacity = groups, per_group, capacity
        self.slot, self.gates, self.consts = slot, gates, consts


class _Constants:
    __slots__ = ("token_of", "group_base", "pad_slot")


_CONSTANTS: dict = {}


def _constants(groups, per_group, k, n, capacity) -> _Constants:
    """Index tensors that depend only on the shapes (cached): the token of each choice-major
    assignment, each group's offset into the flat buffer, the spare row's index."""
    key = (groups, per_group, k, n, capacity)
    c = _CONSTANTS.get(key)
    if c is None:
        if len(_CONSTANTS) > 64:
            _CONSTANTS.clear()
        c = _Constants()
        s = np.arange(per_group, dtype=np.int64)
        token_of = (np.arange(groups, dtype=np.int64)[:, None, None] * per_group + s[None, None, :])
        c.token_of = Tensor(np.broadcast_to(token_of, (groups, k, per_group)).reshape(-1).copy())
        c.group_base = Tensor((np.arange(groups, dtype=np.int64) * n * capacity)[:, None])
        c.pad_slot = Tensor(np.array(groups * n * capacity, dtype=np.int64))
        _CONSTANTS[key] = c
    return c


# ------------------------------------------------------------------------------------------------
# model-level helpers
def moe_layers(cell) -> list:
    """The MoE cells inside `cell` (itself included), in order."""
    return [c for _, c in cell.cells_and_names() if isinstance(c, MoE)]


def moe_auxiliary_loss(cell):
    """The weighted auxiliary losses of every MoE layer's last call, summed over the layers
    (Switch: each router layer adds its own): what a training loss adds to the cross-entropy."""
    layers = moe_layers(cell)
    if not layers:
        raise OpValueError("moe_auxiliary_loss", "a model with MoE layers", f"{type(cell).__name__} without any")
    total = layers[0].loss_term()
    for layer in layers[1:]:
        total = total + layer.loss_term()
    return total


def moe_statistics(cell) -> dict:
    """The last call's routing statistics of every MoE layer in `cell`: totals over the layers
    (`dropped_tokens`, `fully_dropped_tokens`, `aux_loss`, `z_loss`) and per layer
    (`layers`: capacity, dropped, fully dropped, expert load). Of this process's tokens only."""
    per = []
    for layer in moe_layers(cell):
        if layer.aux_loss is None:
            continue
        per.append({"capacity": layer.capacity, "dropped_tokens": layer.dropped_tokens,
                    "fully_dropped_tokens": layer.fully_dropped_tokens,
                    "expert_load": layer.expert_load.tolist(),
                    "aux_loss": float(layer.aux_loss.asnumpy()), "z_loss": float(layer.z_loss.asnumpy())})
    return {"dropped_tokens": sum(p["dropped_tokens"] for p in per),
            "fully_dropped_tokens": sum(p["fully_dropped_tokens"] for p in per),
            "aux_loss": sum(p["aux_loss"] for p in per), "z_loss": sum(p["z_loss"] for p in per),
            "layers": per}


def set_token_groups(cell, groups: int):
    """Route every MoE layer of `cell` in `groups` groups of tokens (capacity and the balancing loss
    per group): with groups = the data-parallel world size, one process routes exactly as the
    distributed run does. Returns `cell`."""
    _checks.positive_int("set_token_groups", "groups", groups)
    for layer in moe_layers(cell):
        layer.token_groups = int(groups)
    return cell


__all__ = ["MoE", "SwiGLUExperts", "expert_capacity", "moe_layers", "moe_auxiliary_loss", "moe_statistics",
           "set_token_groups"]
