"""grad / value_and_grad / GradOperation / vjp / jvp with MindSpore's semantics.

* `grad_position`: int or a tuple of one -> one bare gradient (MindSpore unwraps `(0,)`), a longer
  tuple -> a tuple, None -> no input gradients. Lists and negative positions are refused.
* `weights`: Parameters (e.g. `net.trainable_params()`) -> a tuple of their gradients; one bare
  Parameter -> its gradient alone. With both: `(input_grads, weight_grads)`.
* Each gradient has the dtype of what it differentiates (an Int32 input gets an Int32 gradient).
* Several outputs without `has_aux`: the gradient of their sum.
  With `has_aux=True` only output 0 is differentiated; `grad` returns `(grads, aux)` and
  `value_and_grad` returns `((out0, *aux), grads)`.
* `sens_param=True`: the caller passes the output cotangent as an extra trailing argument.
* `return_ids=True`: each gradient is paired with its position (inputs) or name (weights).
"""
from __future__ import annotations

import functools
import numbers

from ..common import grad_state
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor, _wrap
from . import tape


def _positions(grad_position, nargs):
    """The input positions to differentiate: an int or a tuple of ints (MindSpore refuses lists and
    negative positions), each naming one of the `nargs` inputs."""
    if grad_position is None:
        return ()
    single = isinstance(grad_position, numbers.Integral) and not isinstance(grad_position, bool)
    if not single and not isinstance(grad_position, tuple):
        raise OpTypeError("grad", "'grad_position' as an int, a tuple of ints, or None", repr(grad_position))
    pos = (grad_position,) if single else grad_position
    for p in pos:
        if not isinstance(p, numbers.Integral) or isinstance(p, bool):
            raise OpTypeError("grad", "'grad_position' as an int, a tuple of ints, or None", repr(grad_position))
        if not 0 <= p < nargs:
            raise OpValueError("grad", f"'grad_position' entries in [0, {nargs}) for {nargs} inputs",
                               repr(grad_position))
    return tuple(int(p) for p in pos)


def _weights_list(weights):
    if weights is None:
        return []
    if isinstance(weights, Parameter):
        return [weights]
    ws = list(weights)
    for w in ws:
        if not isinstance(w, Tensor):
            raise OpTypeError("grad", "'weights' as Parameters (e.g. net.trainable_params())", type(w).__name__)
    return ws


def _detach(x):
    if isinstance(x, Tensor):
        return _wrap(x._data) if x._node is not None else x
    if isinstance(x, tuple):
        return tuple(_detach(v) for v in x)
    if isinstance(x, list):
        return [_detach(v) for v in x]
    return x


def _ones_like(t):
    from ..ops import functional as F
    return F.ones_like(t)


def _cast(t, dtype):
    from ..ops import functional as F
    return F.cast(t, dtype)


def _zeros_like(t):
    from ..ops import functional as F
    return F.zeros_like(t)


def _compute(fn, args, kwargs, grad_position, weights, has_aux, sens_param):
    """Run fn forward with the tape on, then backward. Returns (output, input_grads, weight_grads)."""
    sens = None
    if sens_param:
        if not args:
            raise OpValueError("grad", "the sensitivity (output cotangent) as the last argument "
                               "when sens_param=True", "no arguments")
        sens, args = args[-1], args[:-1]
    positions = _positions(grad_position, len(args))
    ws = _weights_list(weights)
    args = list(args)
    for p in positions:
        if not isinstance(args[p], Tensor):
            raise OpTypeError("grad", f"input {p} (a grad_position) to be a Tensor", type(args[p]).__name__)

    grad_state.depth += 1
    # The tensors themselves become the leaves (their old nodes are put back afterwards), as in
    # MindSpore: every use of the same object counts, including one captured by fn from outside,
    # and an object passed at two positions gets the whole gradient at both.
    saved = []                          # (tensor, its node before this call), restored in finally
    leaf_of = {}                        # id(tensor) -> its leaf node in this call
    Node, make_leaf_node = tape.Node, tape.make_leaf_node

    def leaf(t):
        n = leaf_of.get(id(t))
        if n is None:
            # (a plain leaf unless an outer gradient tracks t: then make_leaf_node links the two)
            n = Node(None, (), {}, t, ()) if t._node is None else make_leaf_node(t, t)
            saved.append((t, t._node))
            t._node = n
            leaf_of[id(t)] = n
        return n

    backward_done = False
    try:
        input_leaves = [leaf(args[p]) for p in positions]
        weight_leaves = [leaf(w) for w in ws]

        out = fn(*args, **kwargs)

        if has_aux:
            if not isinstance(out, tuple) or len(out) < 1:
                raise OpValueError("grad", "fn to return a tuple (output, *aux) when has_aux=True",
                                   type(out).__name__)
            diff_outs = (out[0],)
        else:
            diff_outs = out if isinstance(out, tuple) else (out,)
        if sens is not None:
            douts = tuple(sens) if isinstance(sens, (tuple, list)) else (sens,)
            if len(douts) != len(diff_outs):
                raise OpValueError("grad", f"{len(diff_outs)} sensitivities (one per output)", str(len(douts)))
            douts = tuple(d if isinstance(d, Tensor) else Tensor(d, dtype=o.dtype) for d, o in zip(douts, diff_outs))
        else:
            douts = tuple(_ones_like(o) if isinstance(o, Tensor) else None for o in diff_outs)

        grad_state.depth -= 1          # backward of this level is recorded only by outer levels
        backward_done = True
        leaves = input_leaves + weight_leaves
        grads, order = tape.backward(diff_outs, douts, leaves)
    finally:
        if not backward_done:
            grad_state.depth -= 1
        for t, n in reversed(saved):
            t._node = n
    if grad_state.depth == 0:
        tape.release(order)

    originals = [args[p] for p in positions] + ws
    # a gradient has its input's dtype (MindSpore: d(sum(int32 x))/dx is Int32, not the sum's Int64)
    grads = [_zeros_like(x) if g is None else g if g.dtype is x.dtype else _cast(g, x.dtype)
             for g, x in zip(grads, originals)]
    if grad_state.depth == 0:
        out = _detach(out)
    return out, grads[:len(positions)], grads[len(positions):], positions


def _format(grad_position, positions, in_grads, weights, w_grads, return_ids):
    """MindSpore's return structure: one input gradient bare (an int position, or a tuple of one),
    several as a tuple; likewise one Parameter as `weights` gives its gradient bare, a list or
    ParameterTuple gives a tuple; with both, `(input_grads, weight_grads)`."""
    ws = _weights_list(weights)
    if return_ids:
        in_grads = [(p, g) for p, g in zip(positions, in_grads)]
        w_grads = [(w.name if isinstance(w, Parameter) else i, g) for i, (w, g) in enumerate(zip(ws, w_grads))]
    ig = in_grads[0] if len(positions) == 1 else tuple(in_grads)
    if weights is None:
        return ig
    wg = w_grads[0] if isinstance(weights, Parameter) else tuple(w_grads)
    return wg if grad_position is None else (ig, wg)


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False, sens_param=False):
    """A function returning the gradient of `fn` (see the module docstring for the semantics)."""
    if grad_position is None and weights is None:
        raise OpValueError("grad", "grad_position or weights (something to differentiate)",
                           "grad_position=None and weights=None")

    @functools.wraps(fn)
    def grad_fn(*args, **kwargs):
        out, ig, wg, pos = _compute(fn, args, kwargs, grad_position, weights, has_aux, sens_param)
        g = _format(grad_position, pos, ig, weights, wg, return_ids)
        if has_aux:
            return g, tuple(out[1:])
        return g

    return grad_fn


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False, sens_param=False):
    """A function returning `(fn(*args), gradient)`."""
    if grad_position is None and weights is None:
        raise OpValueError("value_and_grad", "grad_position or weights (something to differentiate)",
                           "grad_position=None and weights=None")

    @functools.wraps(fn)
    def value_and_grad_fn(*args, **kwargs):
        out, ig, wg, pos = _compute(fn, args, kwargs, grad_position, weights, has_aux, sens_param)
        return out, _format(grad_position, pos, ig, weights, wg, return_ids)

    return value_and_grad_fn


class GradOperation:
    """`GradOperation(get_all=False, get_by_list=False, sens_param=False)(fn[, params])(*inputs)`."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all, self.get_by_list, self.sens_param = get_all, get_by_list, sens_param

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise OpValueError("GradOperation", "a parameter list when get_by_list=True", "None")
        get_all, get_by_list, sens_param = self.get_all, self.get_by_list, self.sens_param

        @functools.wraps(fn)
        def grad_fn(*args, **kwargs):
            nargs = len(args) - (1 if sens_param else 0)
            position = tuple(range(nargs)) if get_all else (0 if not get_by_list else None)
            ws = weights if get_by_list else None
            out, ig, wg, pos = _compute(fn, args, kwargs, position, ws, False, sens_param)
            if get_by_list and get_all:
                return tuple(ig), tuple(wg)
            if get_by_list:
                return tuple(wg)
            if get_all:
                return tuple(ig)
            return ig[0]

        return grad_fn


def vjp(fn, *inputs, weights=None, has_aux=False):
    """`(outputs, vjp_fn)`; `vjp_fn(v)` returns the input gradients of <fn(*inputs), v>."""
    grad_state.depth += 1
    try:
        leaves = [tape.make_leaf(x) if isinstance(x, Tensor) else x for x in inputs]
        out = fn(*leaves)
    finally:
        grad_state.depth -= 1
    main = out[0] if has_aux else out
    aux = out[1:] if has_aux else None
    leaf_nodes = [x._node for x in leaves if isinstance(x, Tensor)]

    def vjp_fn(v):
        outs = main if isinstance(main, tuple) else (main,)
        vs = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        grads, _ = tape.backward(outs, vs, leaf_nodes)
        grads = [g if g is not None else _zeros_like(x) for g, x in zip(grads, inputs)]
        return grads[0] if len(grads) == 1 else tuple(grads)

    result = _detach(main) if grad_state.depth == 0 else main
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def jvp(fn, inputs, v, has_aux=False):
    """Forward-mode product J·v, computed as the gradient of a VJP (the 'double VJP' trick)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    vs = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    holder = {}

    def pullback(u):
        out, f_vjp = vjp(fn, *inputs)[:2]
        holder["out"] = out
        g = f_vjp(u)
        return g

    out0 = fn(*inputs)
    out0 = out0[0] if has_aux else out0
    u0 = _zeros_like(out0) if isinstance(out0, Tensor) else tuple(_zeros_like(o) for o in out0)
    tangents = grad(pullback, grad_position=0, sens_param=True)(u0, vs if len(vs) > 1 else vs[0])
    return _detach(out0), tangents
