"""`nn.Cell`: the base class of every layer, loss, optimizer and network (MindSpore's `nn.Cell`).

A Cell is a callable object whose `construct` says what it computes. Assigning a `Parameter` or a
Cell to an attribute *registers* it (in `_params` / `_cells`, in assignment order), which is what
lets a network list its parameters, move between train/eval mode, and save checkpoints.

Parameter names follow MindSpore's rule: a parameter is first named after its attribute
(`weight`); whenever a Cell is assigned as a child of another (`self.proj = Dense(...)`), the names
of all its parameters get the attribute name as a prefix (`proj.weight`), so after a network is
built each parameter's `.name` is its dotted path from the network root (`blocks.0.proj.weight`).
A cell shared by two parents keeps the names from where it was attached first (MindSpore would
rename it again). A Cell made with `auto_prefix=False` does not prefix its children (the wrapper cells
`WithLossCell`, `TrainOneStepCell` and the optimizers use this so the network's names do not change
when it is wrapped).

Custom gradients: a Cell may define `bprop(self, *inputs, out, dout)` returning one gradient per
input. While a gradient is being recorded, such a Cell runs `construct` with the tape off and
records a single tape node whose backward rule is `bprop` (see `_CellBprop`).
"""
from __future__ import annotations

from collections import OrderedDict

from ..common import dtype as mstype
from ..common import grad_state
from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from ..common.state_epoch import Registry, touch
from ..common.tensor import Parameter, ParameterTuple, Tensor, _wrap
from ..jit import CELL_HOOK as _JIT_HOOK, cell_call as _jit_cell_call, set_cell_jit_config  # graph mode

_DEFAULT_PARAM_NAME = "Parameter"


class _HookHandle:
    """Returned by `register_forward_hook` / `register_forward_pre_hook`; `.remove()` unregisters."""

    def __init__(self, cell, store: str, key: int):
        self._cell, self._store, self._key = cell, store, key

    def remove(self):
        self._cell.__dict__[self._store].pop(self._key, None)
        self._cell._refresh_plain_call()


class _CellBprop:
    """A one-off 'primitive' standing for a whole Cell with a user-defined `bprop` on the tape."""

    __slots__ = ("cell", "name")

    def __init__(self, cell):
        self.cell = cell
        self.name = type(cell).__name__

    def bprop(self, inputs, out, dout):
        grads = self.cell.bprop(*inputs, out, dout)
        if not isinstance(grads, tuple):
            grads = (grads,)
        if len(grads) != len(inputs):
            raise OpValueError(f"{self.name}.bprop", f"one gradient per input ({len(inputs)})",
                               f"{len(grads)} gradients")
        from ..ops import functional as F
        result = []
        for x, g in zip(inputs, grads):
            if not isinstance(x, Tensor) or g is None:
                result.append(None)
            elif isinstance(g, Tensor):
                result.append(g)
            else:                     # a Python number such as 0: a constant gradient of x's shape
                result.append(F.zeros_like(x) + g)
        return tuple(result)


class Cell:
    """Base class of all neural-network cells. Subclasses implement `construct(*inputs)`.

    `Cell(auto_prefix=True, flags=None)`. See the module docstring for registration and naming.
    """

    # Graph mode: a Cell whose class sets this runs as a host call, eagerly, in program order,
    # instead of being traced (it computes on NumPy arrays in place, not with ops). The optimizers
    # and learning-rate schedules set it (nn/optim/optimizer.py), as do loss-scale updates and
    # BatchNorm's statistics.
    jit_host_call = False

    def __init__(self, auto_prefix=True, flags=None):
        d = self.__dict__
        # Registry: an OrderedDict whose writes count as state changes (common/state_epoch.py)
        d["_params"] = Registry()
        d["_cells"] = Registry()
        d["_params_list"] = Registry()        # attribute name -> ParameterTuple registered as a whole
        d["_auto_prefix"] = bool(auto_prefix)
        d["training"] = False
        # MindSpore's compile-phase label (`phase`). Named _jit*: the layer-state guard skips such
        # keys, since minispore's graphs do not depend on the label (set_train must not recompile)
        d["_jit_phase"] = "train"
        d["requires_grad"] = False
        d["_mp_dtype"] = None                 # set by to_float(): cast float inputs/params to it
        d["_casting"] = False                 # True while construct runs under to_float
        d["_forward_pre_hooks"] = Registry()
        d["_forward_hooks"] = Registry()
        d["_hook_id"] = 0
        d["_default_name_id"] = 0
        d["_flags"] = dict(flags) if flags else {}
        # the fast path of __call__ is taken unless hooks, to_float or a custom bprop are in play
        d["_plain_call"] = not hasattr(type(self), "bprop")

    # -- attribute registration ---------------------------------------------------------------
    def __getattr__(self, name):
        # only reached when normal lookup fails: parameters and cells live outside __dict__
        d = self.__dict__
        params = d.get("_params")
        if params is not None:
            if name in params:
                p = params[name]
                if d["_casting"] and p is not None:
                    return _cast_param(p, d["_mp_dtype"])
                return p
            if name in d["_cells"]:
                return d["_cells"][name]
            if name in d["_params_list"]:
                return d["_params_list"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        touch()                     # any attribute write may change what a compiled graph baked
        d = self.__dict__
        params = d.get("_params")
        if isinstance(value, Parameter):
            self._set_param_attr(name, value)
        elif isinstance(value, ParameterTuple):
            self._set_param_tuple_attr(name, value)
        elif isinstance(value, Cell):
            self._set_cell_attr(name, value)
        elif params is not None and name in params:
            if value is None:
                params[name] = None
            elif isinstance(value, Tensor) and params[name] is not None:
                params[name].set_data(value)
            else:
                raise OpTypeError(type(self).__name__, f"a Parameter, Tensor or None for parameter attribute '{name}'",
                                  type(value).__name__)
        elif params is not None and name in d["_cells"]:
            if value is not None:
                raise OpTypeError(type(self).__name__, f"a Cell or None for cell attribute '{name}'",
                                  type(value).__name__)
            d["_cells"][name] = None
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        touch()
        d = self.__dict__
        for store in ("_params", "_cells", "_params_list"):
            if name in d.get(store, ()):
                del d[store][name]
                return
        object.__delattr__(self, name)

    def _require_init(self, what):
        if "_params" not in self.__dict__:
            raise MinisporeRuntimeError(f"Cell '{type(self).__name__}': cannot assign {what} before "
                                        f"Cell.__init__() is called (call super().__init__() first)")

    def _set_param_attr(self, name, value):
        self._require_init("parameters")
        d = self.__dict__
        if name in d["_cells"]:
            raise OpTypeError(type(self).__name__, f"attribute '{name}' to stay a Cell", "a Parameter")
        d.pop(name, None)
        self.insert_param_to_cell(name, value)

    def _set_param_tuple_attr(self, name, value):
        """Register every Parameter of a ParameterTuple under its own (possibly dotted) name.

        This is how optimizers hold their state: `self.moment1 = ParameterTuple(clones named
        'moment1.<param name>')` makes `moment1.dense.weight` a parameter of the optimizer.
        """
        self._require_init("parameters")
        d = self.__dict__
        seen = set()
        for p in value:
            if id(p) in seen:
                continue
            seen.add(id(p))
            if not isinstance(p, Parameter):
                raise OpTypeError(type(self).__name__, "a ParameterTuple of Parameters", type(p).__name__)
            if p.name == _DEFAULT_PARAM_NAME:
                p.name = f"{_DEFAULT_PARAM_NAME}${d['_default_name_id']}"
                d["_default_name_id"] += 1
            existing = d["_params"].get(p.name)
            if existing is not None and existing is not p:
                raise OpValueError(type(self).__name__, "unique parameter names in a ParameterTuple",
                                   f"two different parameters named '{p.name}'")
            d["_params"][p.name] = p
        d.pop(name, None)
        d["_params_list"][name] = value

    def _set_cell_attr(self, name, value):
        self._require_init("cells")
        d = self.__dict__
        if name in d["_params"]:
            raise OpTypeError(type(self).__name__, f"attribute '{name}' to stay a Parameter", "a Cell")
        d.pop(name, None)
        if d["_auto_prefix"] and not value.__dict__.get("_attached", False):
            value.update_parameters_name(name + ".")
            # a cell attached a second time (a shared layer) keeps the names of its first place
            value.__dict__["_attached"] = True
        d["_cells"][name] = value

    def insert_param_to_cell(self, param_name, param, check_name_contain_dot=True):
        """Register `param` under `param_name` (the attribute name). A parameter still carrying the
        default name 'Parameter' is renamed to `param_name`."""
        self._require_init("parameters")
        if not isinstance(param_name, str) or not param_name:
            raise OpValueError("insert_param_to_cell", "a non-empty parameter name", repr(param_name))
        if check_name_contain_dot and "." in param_name:
            raise OpValueError("insert_param_to_cell", "a parameter name without '.'", repr(param_name))
        if param is not None and not isinstance(param, Parameter):
            raise OpTypeError("insert_param_to_cell", "a Parameter or None", type(param).__name__)
        if isinstance(param, Parameter) and param.name == _DEFAULT_PARAM_NAME:
            param.name = param_name
        self.__dict__["_params"][param_name] = param

    def insert_child_to_cell(self, child_name, child_cell):
        """Register `child_cell` under `child_name` (same as attribute assignment)."""
        if not isinstance(child_name, str) or not child_name or "." in child_name:
            raise OpValueError("insert_child_to_cell", "a non-empty child name without '.'", repr(child_name))
        if child_cell is not None and not isinstance(child_cell, Cell):
            raise OpTypeError("insert_child_to_cell", "a Cell or None", type(child_cell).__name__)
        if child_cell is None:
            self.__dict__["_cells"][child_name] = None
        else:
            self._set_cell_attr(child_name, child_cell)

    def update_parameters_name(self, prefix="", recurse=True):
        """Prefix the names of all parameters (MindSpore does this when a cell becomes a child)."""
        if not isinstance(prefix, str):
            raise OpTypeError("update_parameters_name", "prefix as a str", type(prefix).__name__)
        for name, param in self.parameters_and_names(expand=recurse):
            param.name = prefix + name

    # -- traversal ----------------------------------------------------------------------------
    def cells_and_names(self, cells=None, name_prefix=""):
        """(name, cell) for this cell and every descendant, depth first, each cell once."""
        seen = cells if cells is not None else set()
        if id(self) in seen:
            return
        seen.add(id(self))
        yield name_prefix, self
        for name, cell in self._cells.items():
            if cell is not None:
                child = f"{name_prefix}.{name}" if name_prefix else name
                yield from cell.cells_and_names(seen, child)

    def parameters_and_names(self, name_prefix="", expand=True):
        """(dotted name, Parameter) for this cell's own parameters, then each child's, each once."""
        cells = self.cells_and_names(name_prefix=name_prefix) if expand else [(name_prefix, self)]
        seen = set()
        for cell_name, cell in cells:
            for par_name, par in cell._params.items():
                if par is not None and id(par) not in seen:
                    seen.add(id(par))
                    yield (f"{cell_name}.{par_name}" if cell_name else par_name), par

    def get_parameters(self, expand=True):
        """Iterate over the parameters (recursively when `expand`)."""
        for _, p in self.parameters_and_names(expand=expand):
            yield p

    def trainable_params(self, recurse=True):
        """Parameters with `requires_grad=True`, in registration order."""
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        """OrderedDict `param.name -> Parameter`."""
        return OrderedDict((p.name, p) for p in self.get_parameters(expand=recurse))

    def name_cells(self):
        """OrderedDict of the direct children `name -> cell`."""
        out, seen = OrderedDict(), set()
        for name, cell in self._cells.items():
            if cell is not None and id(cell) not in seen:
                seen.add(id(cell))
                out[name] = cell
        return out

    def cells(self):
        """The direct children."""
        return self.name_cells().values()

    def get_flags(self):
        return self._flags

    def add_flags(self, **flags):
        touch()
        self._flags.update(flags)
        return self

    def add_flags_recursive(self, **flags):
        touch()
        for _, cell in self.cells_and_names():
            cell._flags.update(flags)
        return self

    @property
    def cls_name(self):
        return type(self).__name__

    # -- modes ----------------------------------------------------------------------------------
    def set_train(self, mode=True):
        """Training mode on (Dropout active) or off, for this cell and all descendants. Also sets
        this cell's `phase` to 'train' / 'predict' (MindSpore: only on the cell called, not on its
        descendants)."""
        touch()
        for _, cell in self.cells_and_names():
            cell.__dict__["training"] = bool(mode)
        self.__dict__["_jit_phase"] = "train" if mode else "predict"
        return self

    @property
    def phase(self):
        """MindSpore's compile-phase label: 'train' for a new cell, 'predict' after
        `set_train(False)`; `Model` sets 'train' / 'eval'. minispore's jit does not key on it."""
        return self.__dict__.get("_jit_phase", "train")

    @phase.setter
    def phase(self, value):
        if not isinstance(value, str):
            raise OpTypeError("Cell", "the property 'phase' to be a str", type(value).__name__)
        self.__dict__["_jit_phase"] = value

    def set_grad(self, requires_grad=True):
        """Kept for MindSpore compatibility. In minispore a gradient is recorded only while
        `grad`/`value_and_grad` runs, so this flag changes nothing."""
        touch()
        self.__dict__["requires_grad"] = bool(requires_grad)
        return self

    def to_float(self, dst_type):
        """Run this cell and its descendants in `dst_type` (float16/bfloat16/float32): floating
        inputs and parameters are cast to it on use; the parameters themselves keep their dtype.
        A later call on a descendant overrides it there (amp's O2 keeps LayerNorm in float32 so).
        Returns the cell."""
        d = mstype.as_dtype(dst_type)
        if d not in (mstype.float16, mstype.float32, mstype.bfloat16):
            raise OpValueError("to_float", "dst_type float16, float32 or bfloat16", str(d))
        touch()
        for _, cell in self.cells_and_names():
            cell.__dict__["_mp_dtype"] = d
            cell._refresh_plain_call()
        return self

    def _refresh_plain_call(self):
        d = self.__dict__
        d["_plain_call"] = (not d["_forward_pre_hooks"] and not d["_forward_hooks"]
                            and d["_mp_dtype"] is None and not hasattr(type(self), "bprop"))

    # -- hooks --------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook_fn):
        """`hook_fn(cell, inputs) -> None | new inputs` runs before `construct`."""
        return self._add_hook("_forward_pre_hooks", hook_fn)

    def register_forward_hook(self, hook_fn):
        """`hook_fn(cell, inputs, output) -> None | new output` runs after `construct`."""
        return self._add_hook("_forward_hooks", hook_fn)

    def _add_hook(self, store, fn):
        if not callable(fn):
            raise OpTypeError(store.strip("_"), "a callable hook", type(fn).__name__)
        d = self.__dict__
        key = d["_hook_id"]
        d["_hook_id"] = key + 1
        d[store][key] = fn
        self._refresh_plain_call()
        return _HookHandle(self, store, key)

    # -- calling --------------------------------------------------------------------------------
    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement construct()")

    def shard(self, in_strategy, out_strategy=None, parameter_plan=None, device="Ascend", level=0):
        """`Cell.shard(in_strategy, out_strategy=None, parameter_plan=None)` (semi-auto parallel):
        inside a semi_auto_parallel graph this cell's tensor inputs take the layouts of
        `in_strategy` (one tuple of split counts, `ms.Layout` or None per input) and the ops inside
        follow by sharding propagation; `parameter_plan` {parameter name: strategy} stores those
        parameters split. Returns the cell. (graph/parallel/strategies.py)"""
        from ..graph.parallel.strategies import shard_cell
        return shard_cell(self, in_strategy, out_strategy, parameter_plan)

    @property
    def pipeline_stage(self):
        """The pipeline stage this cell runs on (MindSpore's `Cell.pipeline_stage`); -1: not set
        (it runs with the cell before it). nn.PipelineCell reads it (nn/pipeline.py); with
        `pipeline_interleave` it is the virtual stage, run by device stage mod pipeline_stages."""
        return self.__dict__.get("_pipeline_stage", -1)

    @pipeline_stage.setter
    def pipeline_stage(self, value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise OpTypeError("Cell.pipeline_stage", "an int", f"{type(value).__name__} {value!r}")
        if value < 0:
            raise OpValueError("Cell.pipeline_stage", "a stage >= 0", repr(value))
        touch()
        self.__dict__["_pipeline_stage"] = int(value)

    def __call__(self, *args, **kwargs):
        # Graph mode (minispore/jit.py `cell_call`): in GRAPH_MODE, or while jit captures a graph,
        # the call is compiled / inlined into the graph / run as a host call. One attribute read.
        if _JIT_HOOK.enabled:
            return _jit_cell_call(self, args, kwargs, host=_runs_on_host(self))
        # fast path, equal to _call_slow when no hook, to_float or custom bprop is set: saves ~1.6 µs
        # a call (measured 0.4 vs 2.0 µs for an identity Cell), paid by every layer of every step
        if self.__dict__.get("_plain_call"):
            return self.construct(*args, **kwargs)
        return self._call_slow(args, kwargs)

    def _call_slow(self, args, kwargs):
        d = self.__dict__
        if "_params" not in d:
            raise MinisporeRuntimeError(f"Cell '{type(self).__name__}' was called before Cell.__init__() ran "
                                        f"(call super().__init__() in its __init__)")
        for hook in list(d["_forward_pre_hooks"].values()):
            new = hook(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        mp = d["_mp_dtype"]
        if mp is not None:
            args = tuple(_cast_input(a, mp) for a in args)
            kwargs = {k: _cast_input(v, mp) for k, v in kwargs.items()}
        was_casting = d["_casting"]
        d["_casting"] = mp is not None
        try:
            if hasattr(type(self), "bprop") and grad_state.depth > 0 and _any_tracked(args):
                out = self._run_with_custom_bprop(args, kwargs)
            else:
                out = self.construct(*args, **kwargs)
        finally:
            d["_casting"] = was_casting
        for hook in list(d["_forward_hooks"].values()):
            new = hook(self, args, out)
            if new is not None:
                out = new
        return out

    def _run_with_custom_bprop(self, args, kwargs):
        """Run construct untaped, then tape one node whose backward is `self.bprop`."""
        saved = grad_state.depth
        grad_state.depth = 0
        try:
            out = self.construct(*args, **kwargs)
        finally:
            grad_state.depth = saved
        # fresh output tensors: an output may alias an input, whose own tape node must survive
        if isinstance(out, Tensor):
            out = _wrap(out._data)
        elif isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
            out = tuple(_wrap(o._data) for o in out)
        else:
            raise OpTypeError(f"{type(self).__name__}.bprop", "construct to return a Tensor or a tuple of Tensors "
                              "when the cell defines bprop", type(out).__name__)
        grad_state.record(_CellBprop(self), tuple(args), {}, out)
        return out

    def set_jit_config(self, jit_config):
        """Graph-mode settings for this cell (a `minispore.JitConfig`), used under GRAPH_MODE."""
        set_cell_jit_config(self, jit_config)

    # -- repr -----------------------------------------------------------------------------------
    def extend_repr(self):
        """Extra text shown inside `ClassName<...>`; layers override it."""
        return ""

    def __repr__(self):
        extra = self.extend_repr()
        info = type(self).__name__ + "<"
        children = self.name_cells()
        if children:
            sub = "\n"
            if extra:
                sub += f"{extra}\n"
            for key, value in children.items():
                sub += f"({key}): {value!r}\n"
            info += sub.replace("\n", "\n  ") + ">"
        else:
            info += extra + ">"
        return info

    # -- misc -------------------------------------------------------------------------------------
    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        touch()
        self.__dict__.update(state)

    def __bool__(self):
        return True


def _runs_on_host(cell):
    """Graph mode: whether `cell` runs as a host call (`Cell.jit_host_call`, a fact its class
    carries, so this module needs to know no optimizer or schedule)."""
    # (read on the class: a subclass of something other than Cell may lack it, and on the instance
    # a missing name goes through Cell.__getattr__ and raises)
    return getattr(type(cell), "jit_host_call", False)


def _any_tracked(args):
    for a in args:
        if isinstance(a, Tensor) and a._node is not None:
            return True
        if isinstance(a, (tuple, list)) and _any_tracked(a):
            return True
    return False


def _cast_input(x, dt):
    if isinstance(x, Tensor) and x.dtype.is_floating and x.dtype is not dt:
        from ..ops import functional as F
        return F.cast(x, dt)
    if isinstance(x, tuple):
        return tuple(_cast_input(v, dt) for v in x)
    if isinstance(x, list):
        return [_cast_input(v, dt) for v in x]
    return x


def _cast_param(p, dt):
    if p.dtype.is_floating and p.dtype is not dt:
        from ..ops import functional as F
        return F.cast(p, dt)        # differentiable: the gradient flows back to the fp32 parameter
    return p
