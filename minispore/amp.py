"""`mindspore.amp`: automatic mixed precision, loss scaling and overflow checks.

Mixed precision runs the expensive, numerically tolerant operations (matmuls, convolutions) in
float16/bfloat16 and keeps the sensitive ones (normalizations, losses, the parameters and their
updates) in float32. MindSpore offers it at four levels, which minispore reproduces:

* **O0**: nothing changes.
* **O1**: a *white list* (Dense, Conv*, RNN cells, and the class-style primitives MatMul,
  BatchMatMul, Conv2D, ReLU, PReLU, ...) runs in low precision; each of their outputs is cast back
  to float32, so everything between them stays float32. (MindSpore rewrites the network's source
  to insert the casts; minispore marks the white-listed cells `to_float(dtype)` and casts their
  outputs back with a forward hook, which computes the same numbers.)
* **O2**: the whole network runs in low precision except a *black list* (BatchNorm1d/2d/3d,
  LayerNorm) kept in float32, whose outputs are cast back to low precision; the network's outputs
  are cast to float32 (`_OutputTo32`).
* **O3**: everything in low precision; outputs cast to float32.

Parameters always stay float32 ("master weights"): `Cell.to_float` casts them on use, and the cast
is differentiable, so gradients arrive in float32 for the optimizer.

Loss scaling: float16 gradients of small losses underflow to zero. Multiplying the loss by a large
factor before the backward pass and dividing the gradients by it afterwards keeps them
representable. A *dynamic* scale halves on overflow (inf/nan gradients, that step is skipped) and
doubles after `scale_window` clean steps. The training cell is `nn.TrainOneStepWithLossScaleCell`
(minispore/nn/wrap_loss_scale.py); the managers Model uses are in train/loss_scale_manager.py;
the functional API (`DynamicLossScaler`, `StaticLossScaler`, `all_finite`) is here.

`build_train_network(network, optimizer, loss_fn, level, **kwargs)` assembles all of it the way
`Model(..., amp_level=...)` does. One deliberate difference: MindSpore's CPU backend refuses a loss
scale *update cell* there ("Only loss_scale_manager=None or FixedLossScaleManager(drop_overflow_update
=False) are supported on device CPU", so level O2's default DynamicLossScaleManager fails on CPU);
minispore has the overflow check on every device, so it builds the loss-scaling cell.
"""
from __future__ import annotations

import numbers

import numpy as np

from .common import dtype as mstype
from .common.errors import OpTypeError, OpValueError
from .common.tensor import Parameter, Tensor
from .train.loss_scale_manager import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager

__all__ = ["DynamicLossScaleManager", "LossScaleManager", "FixedLossScaleManager", "build_train_network",
           "DynamicLossScaler", "StaticLossScaler", "LossScaler", "auto_mixed_precision", "all_finite",
           "custom_mixed_precision", "get_white_list", "get_black_list"]

# Names, not classes: the lists are resolved against minispore.nn / minispore.ops when used, so a
# layer or class-style primitive added later is picked up without editing this file.
_WHITE_CELLS = ("Conv1d", "Conv2d", "Conv3d", "Conv1dTranspose", "Conv2dTranspose", "Conv3dTranspose", "Dense",
                "LSTMCell", "RNNCell", "GRUCell")
_WHITE_PRIMITIVES = ("Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose", "Conv2DBackpropInput", "MatMul",
                     "BatchMatMul", "PReLU", "ReLU", "Ger")
_BLACK_CELLS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm")
_LEVELS = ("O0", "O1", "O2", "O3")


def _nn():
    from . import nn
    return nn


def _classes(module, names):
    return [getattr(module, n) for n in names if isinstance(getattr(module, n, None), type)]


def get_white_list():
    """The O1 white list: cell classes, then class-style primitive classes (those minispore has)."""
    from . import ops
    return _classes(_nn(), _WHITE_CELLS) + _classes(ops, _WHITE_PRIMITIVES)


def get_black_list():
    """The O2 black list: the normalization cells kept in float32."""
    return _classes(_nn(), _BLACK_CELLS)


# -- casting helpers -------------------------------------------------------------------------------

def _cast_floats(x, dtype):
    """Cast every floating Tensor in `x` (a Tensor or nested tuple/list) to `dtype`
    (MindSpore's `F.mixed_precision_cast`); other values pass through."""
    if isinstance(x, Tensor):
        if x.dtype.is_floating and x.dtype is not dtype:
            from .ops import functional as F
            return F.cast(x, dtype)
        return x
    if isinstance(x, tuple):
        return tuple(_cast_floats(v, dtype) for v in x)
    if isinstance(x, list):
        return [_cast_floats(v, dtype) for v in x]
    return x


def _cell_base():
    from .nn.cell import Cell
    return Cell


def _wrapper_classes():
    """`_OutputTo16` / `_OutputTo32`, defined on first use (amp imports before nn is loaded)."""
    global _OutputTo16, _OutputTo32
    if _OutputTo16 is not None:
        return _OutputTo16, _OutputTo32
    Cell = _cell_base()

    class OutputTo16(Cell):
        """Runs `backbone` and casts its floating outputs to low precision (wraps a black-listed
        cell inside an O2 network, so the layers after it see float16 again)."""

        def __init__(self, backbone, dtype=mstype.float16):
            super().__init__(auto_prefix=False)
            self._backbone = backbone
            self.dtype = dtype
            _copy_amp_level(backbone, self)

        def construct(self, *args, **kwargs):
            return _cast_floats(self._backbone(*args, **kwargs), self.dtype)

    class OutputTo32(Cell):
        """Runs `backbone` and casts its floating outputs to float32 (the outside of an O2/O3 network)."""

        def __init__(self, backbone):
            super().__init__(auto_prefix=False)
            self._backbone = backbone
            _copy_amp_level(backbone, self)

        def construct(self, *args, **kwargs):
            return _cast_floats(self._backbone(*args, **kwargs), mstype.float32)

    OutputTo16.__name__ = OutputTo16.__qualname__ = "_OutputTo16"
    OutputTo32.__name__ = OutputTo32.__qualname__ = "_OutputTo32"
    _OutputTo16, _OutputTo32 = OutputTo16, OutputTo32
    return OutputTo16, OutputTo32


_OutputTo16 = _OutputTo32 = None


def _copy_amp_level(src, dst):
    level = src.__dict__.get("_amp_level")
    if level is not None:
        dst.__dict__["_amp_level"] = level


class _CastPrimitive:
    """A white-listed class-style primitive under O1: floating inputs cast to low precision, the
    result cast back to float32. Everything else (attributes, repr) is the wrapped primitive's."""

    def __init__(self, prim, dtype):
        self.__dict__["_prim"] = prim
        self.__dict__["_dtype"] = dtype

    def __call__(self, *args, **kwargs):
        args = tuple(_cast_floats(a, self._dtype) for a in args)
        return _cast_floats(self._prim(*args, **kwargs), mstype.float32)

    def __getattr__(self, name):
        return getattr(self.__dict__["_prim"], name)

    def __repr__(self):
        return repr(self._prim)


def _cast_output_hook(cell, inputs, output):
    return _cast_floats(output, mstype.float32)


# -- auto_mixed_precision ----------------------------------------------------------------------------

def _check_dtype(dtype, who):
    if dtype not in (mstype.float16, mstype.bfloat16):
        raise OpValueError(who, "dtype float16 or bfloat16", str(dtype))


def _white_list_cast(network, dtype, white_cells, white_prims):
    """O1: white-listed cells run in `dtype` with float32 outputs; so do white-listed primitives
    held as cell attributes (e.g. `self.matmul = ops.MatMul()`)."""
    white_cells = tuple(white_cells)
    white_prims = tuple(white_prims)
    for _, cell in list(network.cells_and_names()):
        if white_cells and isinstance(cell, white_cells) and cell.__dict__.get("_mp_dtype") is None:
            cell.to_float(dtype)
            cell.register_forward_hook(_cast_output_hook)
            continue
        for attr, value in list(cell.__dict__.items()):
            if isinstance(value, white_prims) and not isinstance(value, _CastPrimitive):
                cell.__dict__[attr] = _CastPrimitive(value, dtype)
    return network


def _auto_black_list(network, black_list, dtype):
    """O2: `network.to_float(dtype)`, then every black-listed descendant back to float32 with its
    outputs cast to `dtype` (MindSpore replaces it by `_OutputTo16(cell.to_float(float32))` in its
    parent, so parameter names do not change)."""
    to16, _ = _wrapper_classes()
    network.to_float(dtype)
    black = tuple(black_list)

    def visit(cell):
        for name, sub in list(cell._cells.items()):
            if sub is None or sub is cell or isinstance(sub, to16):
                continue
            if black and isinstance(sub, black):
                cell._cells[name] = to16(sub.to_float(mstype.float32), dtype)
            else:
                visit(sub)

    visit(network)
    return network


def auto_mixed_precision(network, amp_level="O0", dtype=mstype.float16):
    """Return `network` prepared for mixed precision at `amp_level` ("O0"-"O3", see the module
    docstring). O2/O3 return a wrapper cell; O0/O1 return `network` itself."""
    Cell = _cell_base()
    if not isinstance(network, Cell):
        raise OpTypeError("auto_mixed_precision", f"network as a Cell for amp_level '{amp_level}'",
                          type(network).__name__)
    _check_dtype(dtype, "auto_mixed_precision")
    if amp_level not in _LEVELS:
        if amp_level == "auto":
            raise OpValueError("auto_mixed_precision", f"amp_level in {list(_LEVELS)} (minispore has no per-op "
                               "'auto' strategy)", repr(amp_level))
        raise OpValueError("auto_mixed_precision", f"amp_level in {list(_LEVELS)}", repr(amp_level))
    if amp_level == "O0":
        return network
    from . import ops
    if amp_level == "O1":
        network = _white_list_cast(network, dtype, _classes(_nn(), _WHITE_CELLS), _classes(ops, _WHITE_PRIMITIVES))
    elif amp_level == "O2":
        _, to32 = _wrapper_classes()
        network = to32(_auto_black_list(network, get_black_list(), dtype))
    else:
        _, to32 = _wrapper_classes()
        network.to_float(dtype)
        network = to32(network)
    network.__dict__["_amp_level"] = amp_level
    return network


def custom_mixed_precision(network, *, white_list=None, black_list=None, dtype=mstype.float16):
    """O1 with your own white list of cell/primitive classes, or O2 with your own black list of cells."""
    Cell = _cell_base()
    who = "custom_mixed_precision"
    if not isinstance(network, Cell):
        raise OpTypeError(who, "network as a Cell", type(network).__name__)
    if (white_list is None) == (black_list is None):
        raise OpValueError(who, "exactly one of white_list and black_list", "both" if white_list else "neither")
    _check_dtype(dtype, who)
    given = white_list if white_list is not None else black_list
    if not isinstance(given, list) or not all(isinstance(c, type) for c in given):
        raise OpTypeError(who, "a list of classes", repr(given)[:80])
    if white_list is not None:
        cells = [c for c in white_list if issubclass(c, Cell)]
        return _white_list_cast(network, dtype, cells, [c for c in white_list if not issubclass(c, Cell)])
    if not all(issubclass(c, Cell) for c in black_list):
        raise OpTypeError(who, "black_list of Cell classes", repr(black_list)[:80])
    _, to32 = _wrapper_classes()
    return to32(_auto_black_list(network, black_list, dtype))


# -- build_train_network -------------------------------------------------------------------------------

def _config_level(level):
    """MindSpore's `_config_level` table (a fresh DynamicLossScaleManager for O2 each time)."""
    return {
        "O0": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float32, "loss_scale_manager": None},
        "O1": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float32, "loss_scale_manager": None},
        "O2": {"keep_batchnorm_fp32": True, "cast_model_type": mstype.float16,
               "loss_scale_manager": DynamicLossScaleManager()},
        "O3": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float16, "loss_scale_manager": None},
    }[level]


def _check_kwargs(kwargs):
    who = "build_train_network"
    for key in kwargs:
        if key not in ("cast_model_type", "keep_batchnorm_fp32", "loss_scale_manager"):
            raise OpValueError(who, "keyword arguments among cast_model_type, keep_batchnorm_fp32, "
                               "loss_scale_manager", repr(key))
    if "cast_model_type" in kwargs and kwargs["cast_model_type"] not in (mstype.float16, mstype.float32):
        raise OpTypeError(who, "cast_model_type float16 or float32", str(kwargs["cast_model_type"]))
    if "keep_batchnorm_fp32" in kwargs and not isinstance(kwargs["keep_batchnorm_fp32"], bool):
        raise OpTypeError(who, "keep_batchnorm_fp32 as a bool", type(kwargs["keep_batchnorm_fp32"]).__name__)
    lsm = kwargs.get("loss_scale_manager")
    if lsm is not None and not isinstance(lsm, LossScaleManager):
        raise OpTypeError(who, "loss_scale_manager as a LossScaleManager or None", type(lsm).__name__)


def _keep_batchnorm_fp32(network):
    """Black-listed descendants back to float32, outputs cast to float16 (build_train_network's
    keep_batchnorm_fp32=True)."""
    to16, _ = _wrapper_classes()
    black = tuple(get_black_list())
    for name, sub in list(network._cells.items()):
        if sub is None or sub is network:
            continue
        if black and isinstance(sub, black):
            network._cells[name] = to16(sub.to_float(mstype.float32))
        else:
            _keep_batchnorm_fp32(sub)


def _mixed_precision_process(network, config, level):
    """MindSpore's `_auto_mixed_precision_process` (the default, non-rewrite branch)."""
    if config["cast_model_type"] == mstype.float16:
        network.to_float(mstype.float16)
        if config["keep_batchnorm_fp32"]:
            _keep_batchnorm_fp32(network)
    elif not config["keep_batchnorm_fp32"] and level == "O2":
        network.to_float(mstype.float16)
    elif config["cast_model_type"] == mstype.float32 and level in ("O2", "O3"):
        pass
    else:
        network = auto_mixed_precision(network, level)
    return network


def _loss_cell_class():
    """build_train_network's WithLossCell for low-precision networks: casts the network output and
    the label to float32 before the loss."""
    global _AmpWithLossCell
    if _AmpWithLossCell is None:
        Cell = _cell_base()

        class WithLossCell(Cell):
            def __init__(self, backbone, loss_fn):
                super().__init__(auto_prefix=False)
                self._backbone = backbone
                self._loss_fn = loss_fn
                _copy_amp_level(backbone, self)

            def construct(self, data, label):
                out = self._backbone(data)
                label = _cast_floats(label, mstype.float32)
                return self._loss_fn(_cast_floats(out, mstype.float32), label)

        _AmpWithLossCell = WithLossCell
    return _AmpWithLossCell


_AmpWithLossCell = None


def _add_loss_network(network, loss_fn, cast_model_type):
    nn = _nn()
    if not isinstance(loss_fn, nn.Cell):
        raise OpTypeError("build_train_network", "loss_fn as a Cell", type(loss_fn).__name__)
    if cast_model_type in (mstype.float16, mstype.bfloat16) or \
            network.__dict__.get("_amp_level") in ("O2", "O3"):
        return _loss_cell_class()(network, loss_fn)
    return nn.WithLossCell(network, loss_fn)


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0", **kwargs):
    """A training cell for `network`: mixed precision at `level`, the loss (if `loss_fn`), loss
    scaling from `loss_scale_manager` (O2's default: a DynamicLossScaleManager). kwargs:
    `cast_model_type` (float16/float32), `keep_batchnorm_fp32` (bool), `loss_scale_manager`.

    Returns `nn.TrainOneStepWithLossScaleCell` when the manager has an update cell (dynamic, or
    fixed with drop_overflow_update=True), else `nn.TrainOneStepCell(network, optimizer, sens=loss
    scale)`, in training mode."""
    nn = _nn()
    who = "build_train_network"
    if not isinstance(optimizer, nn.Optimizer):
        raise OpTypeError(who, "optimizer as an nn.Optimizer", type(optimizer).__name__)
    if not isinstance(level, str):
        raise OpTypeError(who, "level as a str in ['O0', 'O1', 'O2', 'O3']", type(level).__name__)
    if level not in _LEVELS:
        raise OpValueError(who, "level in ['O0', 'O1', 'O2', 'O3']", repr(level))
    if boost_level != "O0":
        if boost_level in ("O1", "O2"):
            raise OpValueError(who, "boost_level 'O0' (minispore has no mindspore.boost)", repr(boost_level))
        raise OpValueError(who, "boost_level in ['O0', 'O1', 'O2']", repr(boost_level))
    _check_kwargs(kwargs)
    config = dict(_config_level(level), **kwargs)
    network = _mixed_precision_process(network, config, level)
    if loss_fn:
        network = _add_loss_network(network, loss_fn, config["cast_model_type"])
    loss_scale = None
    manager = config["loss_scale_manager"]
    if manager is not None:
        loss_scale = manager.get_loss_scale()
        update_cell = manager.get_update_cell()
        if update_cell is not None:
            return nn.TrainOneStepWithLossScaleCell(network, optimizer, scale_sense=update_cell).set_train()
    return nn.TrainOneStepCell(network, optimizer, loss_scale).set_train()


# -- functional loss scaling ---------------------------------------------------------------------------

def all_finite(inputs):
    """True (a bool Tensor of shape ()) when every element of every Tensor in `inputs` is finite."""
    from .ops import functional as F
    if not isinstance(inputs, (Tensor, tuple, list)):
        raise OpTypeError("all_finite", "a Tensor or a tuple/list of Tensors", type(inputs).__name__)
    tensors = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise OpTypeError("all_finite", "a Tensor or a tuple/list of Tensors", type(t).__name__)
    ok = None
    for t in tensors:
        fin = F.isfinite(t).all()
        ok = fin if ok is None else F.logical_and(ok, fin)
    return ok if ok is not None else Tensor(np.array(True))


def _scale_value_param(scale_value, who):
    if not isinstance(scale_value, numbers.Real) or isinstance(scale_value, bool):
        raise OpTypeError(who, "scale_value as a float or int", type(scale_value).__name__)
    if scale_value < 1.0:
        raise OpValueError(who, "scale_value >= 1", repr(scale_value))
    return Parameter(Tensor(np.array(scale_value, np.float32)), name="scale_value")


def _positive_int(v, name, who):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise OpValueError(who, f"{name} as a positive int", repr(v))
    return int(v)


def _map_scale(inputs, factor):
    """Multiply each Tensor of `inputs` (a Tensor or a tuple/list) by `factor` (a float32 Tensor),
    cast to the Tensor's dtype."""
    from .ops import functional as F
    if isinstance(inputs, Tensor):
        return inputs * F.cast(factor, inputs.dtype)
    if not isinstance(inputs, (tuple, list)):
        raise OpTypeError("LossScaler", "a Tensor or a tuple/list of Tensors", type(inputs).__name__)
    return type(inputs)(_map_scale(x, factor) for x in inputs)


class LossScaler:
    """Base of the functional loss scalers: `scale(inputs)`, `unscale(inputs)`, `adjust(grads_finite)`."""

    def scale(self, inputs):
        raise NotImplementedError

    def unscale(self, inputs):
        raise NotImplementedError

    def adjust(self, grads_finite):
        raise NotImplementedError


class StaticLossScaler(LossScaler):
    """A fixed scale: `scale(x) = x * scale_value`, `unscale(x) = x / scale_value`."""

    def __init__(self, scale_value):
        self.scale_value = _scale_value_param(scale_value, "StaticLossScaler")

    def scale(self, inputs):
        return _map_scale(inputs, self.scale_value)

    def unscale(self, inputs):
        from .ops import functional as F
        return _map_scale(inputs, F.reciprocal(self.scale_value))

    def adjust(self, grads_finite):
        return False


class DynamicLossScaler(LossScaler):
    """A scale that adapts: `adjust(grads_finite)` divides it by `scale_factor` (not below 1) when
    the gradients overflowed, and multiplies it by `scale_factor` after `scale_window` finite steps
    in a row (`counter` counts them; an overflow resets it)."""

    def __init__(self, scale_value, scale_factor, scale_window):
        self.scale_value = _scale_value_param(scale_value, "DynamicLossScaler")
        self.scale_window = _positive_int(scale_window, "scale_window", "DynamicLossScaler")
        self.scale_factor = _positive_int(scale_factor, "scale_factor", "DynamicLossScaler")
        self.counter = Parameter(Tensor(np.array(0, np.int32)), name="counter")

    def scale(self, inputs):
        return _map_scale(inputs, self.scale_value)

    def unscale(self, inputs):
        from .ops import functional as F
        return _map_scale(inputs, F.reciprocal(self.scale_value))

    def adjust(self, grads_finite):
        finite = bool(np.asarray(grads_finite._data if isinstance(grads_finite, Tensor) else grads_finite))
        scale = np.float32(self.scale_value._data)
        counter = int(self.counter._data)
        if finite:
            if counter == self.scale_window - 1:
                grown = np.float32(scale * np.float32(self.scale_factor))
                if np.isfinite(grown):
                    scale = grown
            counter = (counter + 1) % self.scale_window
        else:
            scale = max(np.float32(1.0), np.float32(scale / np.float32(self.scale_factor)))
            counter = 0
        self.scale_value.set_data(Tensor(np.array(scale, np.float32)))
        self.counter.set_data(Tensor(np.array(counter, np.int32)))
        return True
