"""What a compiled graph may depend on, and how each kind of state is guarded - written once.

A graph is only valid for the state it was captured with. Every value it may have read is one of
the kinds below, and for each kind this is where minispore checks it: in memory on every jit call
(graph/cache.py's guards, the Cell walk of guards/walk.py), and on disk for the compile cache
(guards/stable.py renders the same facts process-independently for the key; what is only known
after the capture is a guard stored in the entry; what neither can express makes the graph
uncacheable - graph/compile_cache/).

=======================================  ==========================  =================================
the graph read                           in memory (every call)      on disk (compile cache)
=======================================  ==========================  =================================
tensor arguments: shape, dtype           in the call key             in the key
Python constants among the arguments     by value, in the call key   by type and value, in the key
a Cell's plain attributes (SCALARS,      by value (StateGuard, or    by value, in the key
dtypes) and its flags                    the layer signature)
a Cell's sub-cells and Parameters        by identity                 by name, class, shape and dtype
other attributes (a config object,       by identity; their own      by their whole state (class and
a function)                              scalars walked one deep     `__dict__`; code of functions)
plain containers (list, tuple, dict,     by contents, up to          by contents, whatever their size
set) held by objects, globals, closures  MAX_GUARDED_ITEMS           (MAX_KEY_ITEMS in all)
NumPy arrays                             by identity (keep changing  by a SHA-256 of their bytes
                                         arrays in Tensors)
globals and closure variables the code   scalars by value, objects   described like attributes
names                                    by identity
a user class's scalar class attributes   by value (through getattr)  with the class, in the key
a container the code only appends to     by identity                 by its type only
(`log.append(x)`)
environment variables the capture read   a capture guard             a guard stored in the entry
source files of the graph's nodes        -                           SHA-256, stored in the entry
=======================================  ==========================  =================================

What no guard sees (keep such reads out of captured code): a tensor's *values* read as Python
numbers during the capture, writes that bypass the Cell API inside a `@lazy_inline` layer
(`cell.__dict__[k] = v`: the layer is re-checked only when the Cell state epoch moves), and C code
calling getenv().

The definitions every walker shares live here, so the walkers cannot disagree on them:

* `SCALARS`: the types compared by value. `JSON_SCALARS` is the subset JSON can hold (the disk
  rendering describes a complex number as a value of the standard library instead);
* `CONTAINERS`: the plain containers (exact types in memory) guarded by what they hold;
* `CELL_REGISTRIES`: a Cell's dicts of sub-cells, Parameters and hooks - the walks follow them
  themselves, they are not attributes; `CELL_BOOKKEEPING` adds the flags dict (read as flags);
* `VOLATILE_ATTRS`: counters and caches that change without changing what a cell computes;
* `is_jit_private(name)`: the `_jit*` attributes jit keeps on a Cell (its phase, its config,
  its caches). jit reads them itself, so the in-memory guards skip them; the disk key describes
  them (a second process must see a cell's jit config).
"""
from __future__ import annotations

SCALARS = (bool, int, float, complex, str, bytes, type(None))
JSON_SCALARS = tuple(t for t in SCALARS if t is not complex)
CONTAINERS = (list, tuple, dict, set, frozenset)      # the plain containers guarded by contents

CELL_REGISTRIES = frozenset(("_params", "_cells", "_params_list", "_forward_hooks", "_forward_pre_hooks"))
CELL_BOOKKEEPING = CELL_REGISTRIES | {"_flags"}
# `_plain_call` stands for "no hooks, no bprop, no to_float" (all three are guarded themselves);
# `_attached` marks a cell a container has prefixed; `_casting` is True only while construct runs
VOLATILE_ATTRS = frozenset(("_hook_id", "_default_name_id", "_casting", "_attached", "_plain_call"))

MAX_GUARDED_ITEMS = 256    # container elements (nested included) guarded by contents on every call
MAX_DICT = 256             # larger object dicts (a dataset's index, a cache) are not walked per call


def is_jit_private(name: str) -> bool:
    """A `_jit*` attribute: jit's own bookkeeping on a Cell (see the module docstring)."""
    return name.startswith("_jit")


__all__ = ["SCALARS", "JSON_SCALARS", "CONTAINERS", "CELL_REGISTRIES", "CELL_BOOKKEEPING", "VOLATILE_ATTRS",
           "MAX_GUARDED_ITEMS", "MAX_DICT", "is_jit_private"]
