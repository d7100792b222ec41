"""Build the graph DryRun analyses: a forward pass, or a whole training step.

The graph is captured exactly as `jit(capture_mode="trace")` would capture it (trace/session.py):
the function runs once on *tracers*, every primitive call runs only its inference rule and
appends a node. No kernel runs; a Cell's Parameters become captures, read by reference and never
looked into, so they may be abstract (abstract.py).

A training step (`train=True`) is

    loss, grads = value_and_grad(fn, None, weights)(*inputs)     # forward + backward, one graph
    for w, g in zip(weights, grads): adamw_update(w, g, m, v)     # the optimizer, one node each

The backward pass comes from the same trace: autodiff runs the primitives' backward rules on
tracers, which records them (trace/session.py, "Gradients"). The optimizer is modelled as
MindSpore's fused in-place update (`ApplyAdamWeightDecay`-style): ONE node per parameter that
reads the weight, its gradient and both moments and writes the weight and moments back in place.
It has no outputs, so it allocates nothing; it is the last reader of the gradient, so the
gradient's memory is released right after it. Its kernel is a real NumPy AdamW (PyTorch's rule,
mint.optim.AdamW), so a small train-step graph can also be *run* - which is how the tests check
that the predicted memory is the measured one.

Optimizer state convention (a memory estimate is only comparable if it states one): the two
moments have the weight's shape and dtype (as MindSpore's optimizers keep them), so a float32
model costs 4 (weights) + 4 (gradients) + 8 (moments) = 16 bytes per parameter, plus activations.
"""
from __future__ import annotations

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Parameter, Tensor, _wrap
from ...ops.primitive import Primitive
from ..trace.session import CaptureError, TraceSession, _where, user_source
from .abstract import abstract_array, as_abstract, is_abstract


# -- the optimizer node ------------------------------------------------------------------------------

def _adamw_infer(w, g, m, v, **attrs):
    return ()


def _adamw_kernel(w, g, m, v, *, lr, beta1, beta2, eps, weight_decay, step):
    """PyTorch's AdamW step `step` (mint.optim.AdamW), in place on w, m and v."""
    w *= 1.0 - lr * weight_decay
    m *= beta1
    m += (1.0 - beta1) * g
    v *= beta2
    v += (1.0 - beta2) * (g * g)
    c1 = 1.0 - beta1 ** step
    c2 = np.sqrt(1.0 - beta2 ** step)
    w -= (lr / c1) * m / (np.sqrt(v) / c2 + eps)
    return ()


def _adamw_cost(ins, outs, attrs):
    """FLOPs per element: decay 1, m 3, v 4, sqrt/scale/eps 3, step 3 = 14; bytes: read w, g, m, v,
    write w, m, v (in place: the node has no outputs)."""
    w = ins[0]
    return {"flops": 14 * w.size, "bytes_read": 4 * w.nbytes, "bytes_written": 3 * w.nbytes, "kind": "vector"}


# Not registered in the op table (it is not a user-facing op): a Primitive object used only in
# DryRun's training-step graphs.
ADAMW_UPDATE = Primitive("adamw_update", _adamw_infer, _adamw_kernel, None, _adamw_cost,
                         doc="fused in-place AdamW update of one parameter (DryRun's optimizer model)")


# -- what DryRun captured --------------------------------------------------------------------------

class Capture:
    """A graph plus what DryRun knows about its pieces.

    `roles`: value id -> "input" | "parameter" | "frozen parameter" | "optimizer state" |
    "constant" for every graph param and capture. `phases`: (forward_end, backward_end) node
    indices for a training step (forward = nodes[:forward_end], backward up to backward_end, then
    the optimizer), None for a forward-only graph. `grad_of`: value id of a gradient -> the
    parameter's name.
    """

    def __init__(self, graph, roles, phases, grad_of, train, n_params):
        self.graph = graph
        self.roles = roles
        self.phases = phases
        self.grad_of = grad_of
        self.train = train
        self.n_params = n_params

    def phase_of(self, node_index: int) -> str:
        if self.phases is None:
            return "step" if self.train else "forward"
        fwd, bwd = self.phases
        return "forward" if node_index < fwd else "backward" if node_index < bwd else "optimizer"


def _default_weights(fn):
    owner = fn if hasattr(fn, "trainable_params") else getattr(fn, "__self__", None)
    if owner is not None and hasattr(owner, "trainable_params"):
        return list(owner.trainable_params())
    raise OpValueError("dryrun", "weights=[...] (the Parameters to train) for a plain function with train=True",
                       f"{getattr(fn, '__qualname__', type(fn).__name__)}, which is not a Cell or a Cell's method")


def _name_of(fn):
    if hasattr(fn, "construct"):
        return f"{type(fn).__name__}.construct"
    return getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))


def _optimizer_state(w, prefix):
    arr = (abstract_array(w.shape, w.dtype) if is_abstract(w._data)
           else np.zeros(w.shape, dtype=w.dtype.np))
    # (_wrap: Parameter(ndarray) copies, which would materialize the zero-stride abstract array)
    return Parameter(_wrap(arr), name=f"{prefix}.{w.name}", requires_grad=False)


def capture(fn, args, *, train=False, weights=None, optimizer="adamw", learning_rate=1e-3,
            betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01) -> Capture:
    """Capture `fn(*args)` (forward) or its training step into a Graph; see the module docstring."""
    if not callable(fn):
        raise OpTypeError("dryrun", "a function or Cell to analyse", type(fn).__name__)
    if optimizer not in ("adamw", None):
        raise OpValueError("dryrun", "optimizer 'adamw' or None", repr(optimizer))
    name = _name_of(fn)
    if train:
        weights = _default_weights(fn) if weights is None else list(weights)
        for w in weights:
            if not isinstance(w, Parameter):
                raise OpTypeError("dryrun", "weights as Parameters", type(w).__name__)
    session = TraceSession(f"dryrun[{name}]" if not train else f"train_step[{name}]", fn)
    call_args = []
    for i, a in enumerate(args):
        aval = as_abstract(a, i)
        call_args.append(session.param(aval) if aval is not None else a)
    marks = {}
    states = []
    try:
        with session.running():
            try:
                if not train:
                    out = fn(*call_args)
                else:
                    out, marks = _train_step(session, fn, call_args, weights, optimizer, states,
                                             dict(lr=float(learning_rate), beta1=float(betas[0]),
                                                  beta2=float(betas[1]), eps=float(eps),
                                                  weight_decay=float(weight_decay), step=1))
            finally:
                overwritten = session.restore_captured_storage()
            if overwritten:
                raise CaptureError("dryrun", "parameters that keep their storage while being captured",
                                   f"a traced value assigned to {', '.join(overwritten)}",
                                   where=_where(user_source()))
            graph, _ = session.finish(out)
    finally:
        session.finished = True

    roles = {p.id: "input" for p in graph.params}
    weight_ids = {id(w) for w in weights} if train else set()
    state_ids = {id(s) for s in states}
    for v, t in graph.captures:
        if id(t) in state_ids:
            roles[v.id] = "optimizer state"
        elif isinstance(t, Parameter):
            roles[v.id] = "parameter" if (id(t) in weight_ids or (not train and t.requires_grad)) \
                else "frozen parameter"
        else:
            roles[v.id] = "constant"
    phases = (marks["forward_end"], marks["backward_end"]) if train else None
    n_params = sum(int(np.prod(t.shape)) for v, t in graph.captures if roles[v.id] in ("parameter",
                                                                                      "frozen parameter"))
    return Capture(graph, roles, phases, marks.get("grad_of", {}), train, n_params)


def _train_step(session, fn, call_args, weights, optimizer, states, hyper):
    from ...autograd import value_and_grad
    marks = {}

    def forward(*a):
        loss = fn(*a)
        if not isinstance(loss, Tensor) or int(np.prod(loss.shape)) != 1:
            what = f"shape {tuple(loss.shape)}" if isinstance(loss, Tensor) else type(loss).__name__
            raise OpValueError("dryrun", "a function returning a scalar loss when train=True", what)
        marks["forward_end"] = len(session.builder.nodes)
        return loss

    loss, grads = value_and_grad(forward, None, weights)(*call_args)
    marks["backward_end"] = len(session.builder.nodes)
    grad_of = {}
    for w, g in zip(weights, grads):
        if isinstance(g, Tensor) and type(g._data).__name__ == "SymbolicArray":
            grad_of[session.value_of(g).id] = w.name
    marks["grad_of"] = grad_of
    if optimizer is None:
        return (loss, tuple(grads)), marks
    b = session.builder
    for w, g in zip(weights, grads):
        if g is None:
            continue
        m = _optimizer_state(w, "exp_avg")
        v = _optimizer_state(w, "exp_avg_sq")
        states.extend((m, v))
        ins = (session.value_of(w), session.value_of(g), b.capture(m, m.name), b.capture(v, v.name))
        b.add_node(ADAMW_UPDATE, ins, dict(hyper), (), source=user_source())
    return loss, marks


__all__ = ["Capture", "capture", "ADAMW_UPDATE"]
