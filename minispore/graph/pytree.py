"""Flattening nested Python structures (tuples, lists, dicts) into leaves and a template.

Every capture mode and the jit front door agree on ONE order for a call's tensor inputs:
`flatten((args, kwargs))`, depth first, tuple/list items in order, dict items in insertion order
(kwargs are sorted by name first). A graph's params are exactly those leaves, in that order.

The *template* is the structure with each leaf replaced by `Slot(i)` and every other object kept
as it is; `fill(template, values)` puts values back. Outputs are flattened the same way.
"""
from __future__ import annotations

from ..common.tensor import Tensor
from .ir import Slot


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def flatten(obj, is_leaf=is_tensor, leaf_types=None):
    """`(leaves, template)` for a nested structure of tuples/lists/dicts.

    A leaf is an object for which `is_leaf(x)` is true or, when `leaf_types` is given instead, an
    instance of one of those types (tested inline: cheaper than a call per object)."""
    leaves: list = []
    append = leaves.append
    if is_leaf is is_tensor and leaf_types is None:
        leaf_types = Tensor                 # the common case, tested inline: this runs per output

    def walk(x):
        if isinstance(x, leaf_types) if leaf_types is not None else is_leaf(x):
            append(x)
            return Slot(len(leaves) - 1)
        t = type(x)
        if t is tuple or t is list:
            items = [walk(v) for v in x]
            return tuple(items) if t is tuple else items
        if t is dict:
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, tuple) and hasattr(x, "_fields"):      # a namedtuple: keep its type
            return type(x)(*[walk(v) for v in x])
        return x

    return leaves, walk(obj)


def flatten_call(args, kwargs, is_leaf=is_tensor):
    """Leaves and template of a call: `((args, sorted kwargs))`."""
    kw = {k: kwargs[k] for k in sorted(kwargs)} if kwargs else {}
    return flatten((tuple(args), kw), is_leaf)


def fill(template, values):
    """Inverse of flatten: the template with Slot(i) replaced by values[i]."""
    t = type(template)
    if t is Slot:
        return values[template.index]
    if t is tuple:
        return tuple([fill(v, values) for v in template])
    if t is list:
        return [fill(v, values) for v in template]
    if t is dict:
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, tuple) and hasattr(template, "_fields"):
        return type(template)(*[fill(v, values) for v in template])
    return template


__all__ = ["flatten", "flatten_call", "fill", "is_tensor", "Slot"]
