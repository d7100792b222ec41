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
(minispore/nn/wrap_loss_scale.py, which also defines the overflow check `all_finite`); the
loss-scale managers Model takes (`DynamicLossScaleManager`, `FixedLossScaleManager`; MindSpore
also exports them from `mindspore.train`) and the functional API (`DynamicLossScaler`,
`StaticLossScaler`) are here.

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
from .common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from .common.tensor import Parameter, Tensor
from . import nn                                   # amp sits above nn (ARCHITECTURE.md §2)
from .nn.cell import Cell
from .nn.wrap_loss_scale import all_finite         # the overflow check, next to the cell that runs it

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


# -- loss-scale managers ----------------------------------------------------------------------------
# The objects `Model(..., loss_scale_manager=...)` and `build_train_network` take (MindSpore also
# spells them `mindspore.train.FixedLossScaleManager`; minispore.train re-exports these).
#
# A manager holds the *policy*; `get_update_cell()` turns it into the Cell the training step runs
# (`nn.DynamicLossScaleUpdateCell` / `nn.FixedLossScaleUpdateCell`, or None when there is nothing to
# update and overflowed steps are not dropped). `update_loss_scale(overflow)` applies the same
# policy on the host, for a hand-written loop.
#
# * `FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)`: a constant scale. With
#   drop_overflow_update=True, the step checks gradients for inf/nan and skips the update on
#   overflow (via a FixedLossScaleUpdateCell); with False there is no check (`get_update_cell()` is
#   None) and the scale is handed to the TrainOneStepCell as `sens` -- the optimizer must then be
#   built with the same `loss_scale` to divide it out again.
# * `DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)`: on an
#   overflow the scale is divided by scale_factor (not below 1) and the step is skipped; after
#   every scale_window steps without overflow it is multiplied by scale_factor.

class LossScaleManager:
    """Base class: `get_loss_scale()`, `update_loss_scale(overflow)`, `get_update_cell()`."""

    def get_loss_scale(self):
        """The current loss scale."""

    def update_loss_scale(self, overflow):
        """Adjust the scale after a step (`overflow`: whether its gradients had inf/nan)."""

    def get_update_cell(self):
        """The Cell a TrainOneStepWithLossScaleCell runs to update the scale, or None."""


def _real(who, name, v):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise OpTypeError(who, f"{name} as a number", type(v).__name__)
    return v


class FixedLossScaleManager(LossScaleManager):
    """`FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)`."""

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        if _real("FixedLossScaleManager", "loss_scale", loss_scale) < 1:
            raise OpValueError("FixedLossScaleManager", "loss_scale >= 1", repr(loss_scale))
        self._loss_scale = loss_scale
        self._drop_overflow_update = drop_overflow_update

    def get_loss_scale(self):
        return self._loss_scale

    def get_drop_overflow_update(self):
        """Whether a step whose gradients overflow is skipped."""
        return self._drop_overflow_update

    def update_loss_scale(self, overflow):
        """A fixed scale never changes."""

    def get_update_cell(self):
        if not self._drop_overflow_update:
            return None
        return nn.FixedLossScaleUpdateCell(self._loss_scale)


class DynamicLossScaleManager(LossScaleManager):
    """`DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)`."""

    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        who = "DynamicLossScaleManager"
        if _real(who, "init_loss_scale", init_loss_scale) < 1.0:
            raise OpValueError(who, "init_loss_scale >= 1", repr(init_loss_scale))
        if not isinstance(scale_window, numbers.Integral) or isinstance(scale_window, bool) or scale_window <= 0:
            raise OpValueError(who, "scale_window as a positive int", repr(scale_window))
        if _real(who, "scale_factor", scale_factor) <= 0:
            raise OpValueError(who, "scale_factor > 0", repr(scale_factor))
        self.loss_scale = init_loss_scale
        self.scale_window = scale_window
        self.scale_factor = scale_factor
        self.increase_ratio = scale_factor
        self.decrease_ratio = 1 / scale_factor
        self.cur_iter = 1
        self.last_overflow_iter = 0
        self.bad_step_max = 1000
        self.bad_step = 0

    def get_loss_scale(self):
        return self.loss_scale

    def update_loss_scale(self, overflow):
        """MindSpore's host-side rule: halve (by decrease_ratio, not below 1) on overflow; multiply
        by increase_ratio whenever the steps since the last overflow are a multiple of
        scale_window. More than bad_step_max overflows in a row is an error."""
        if overflow:
            self.loss_scale = max(self.loss_scale * self.decrease_ratio, 1)
            self.last_overflow_iter = self.cur_iter
            self.bad_step += 1
        else:
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                self.loss_scale *= self.increase_ratio
            self.bad_step = 0
        if self.bad_step > self.bad_step_max:
            raise MinisporeRuntimeError(f"Dynamic loss scale: {self.bad_step} overflows in a row, more than "
                                        f"bad_step_max={self.bad_step_max}")
        self.cur_iter += 1

    def get_drop_overflow_update(self):
        """Always True: an overflowed step is skipped."""
        return True

    def get_update_cell(self):
        return nn.DynamicLossScaleUpdateCell(self.loss_scale, self.scale_factor, self.scale_window)


# -- white and black lists ---------------------------------------------------------------------------

def _classes(module, names):
    return [getattr(module, n) for n in names if isinstance(getattr(module, n, None), type)]


def get_white_list():
    """The O1 white list: cell classes, then class-style primitive classes (those minispore has)."""
    from . import ops
    return _classes(nn, _WHITE_CELLS) + _classes(ops, _WHITE_PRIMITIVES)


def get_black_list():
    """The O2 black list: the normalization cells kept in float32."""
    return _classes(nn, _BLACK_CELLS)


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


class _OutputTo16(Cell):
    """Runs `backbone` and casts its floating outputs to low precision (wraps a black-listed
    cell inside an O2 network, so the layers after it see float16 again)."""

    def __init__(self, backbone, dtype=mstype.float16):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self.dtype = dtype
        _copy_amp_level(backbone, self)

    def construct(self, *args, **kwargs):
        return _cast_floats(self._backbone(*args, **kwargs), self.dtype)


class _OutputTo32(Cell):
    """Runs `backbone` and casts its floating outputs to float32 (the outside of an O2/O3 network)."""

    def __init__(self, backbone):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        _copy_amp_level(backbone, self)

    def construct(self, *args, **kwargs):
        return _cast_floats(self._backbone(*args, **kwargs), mstype.float32)


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
    network.to_float(dtype)
    black = tuple(black_list)

    def visit(cell):
        for name, sub in list(cell._cells.items()):
            if sub is None or sub is cell or isinstance(sub, _OutputTo16):
                continue
            if black and isinstance(sub, black):
                cell._cells[name] = _OutputTo16(sub.to_float(mstype.float32), dtype)
            else:
                visit(sub)

    visit(network)
    return network


def auto_mixed_precision(network, amp_level="O0", dtype=mstype.float16):
    """Return `network` prepared for mixed precision at `amp_level` ("O0"-"O3", see the module
    docstring). O2/O3 return a wrapper cell; O0/O1 return `network` itself."""
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
        network = _white_list_cast(network, dtype, _classes(nn, _WHITE_CELLS), _classes(ops, _WHITE_PRIMITIVES))
    elif amp_level == "O2":
        network = _OutputTo32(_auto_black_list(network, get_black_list(), dtype))
    else:
        network.to_float(dtype)
        network = _OutputTo32(network)
    network.__dict__["_amp_level"] = amp_level
    return network


def custom_mixed_precision(network, *, white_list=None, black_list=None, dtype=mstype.float16):
    """O1 with your own white list of cell/primitive classes, or O2 with your own black list of cells."""
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
    return _OutputTo32(_auto_black_list(network, black_list, dtype))


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
    black = tuple(get_black_list())
    for name, sub in list(network._cells.items()):
        if sub is None or sub is network:
            continue
        if black and isinstance(sub, black):
            network._cells[name] = _OutputTo16(sub.to_float(mstype.float32))
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


class _AmpWithLossCell(Cell):
    """build_train_network's WithLossCell for low-precision networks: casts the network output and
    the label to float32 before the loss."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self._loss_fn = loss_fn
        _copy_amp_level(backbone, self)

    def construct(self, data, label):
        out = self._backbone(data)
        label = _cast_floats(label, mstype.float32)
        return self._loss_fn(_cast_floats(out, mstype.float32), label)


# MindSpore defines this cell inside `_add_loss_network` as `WithLossCell`; its repr shows that name
_AmpWithLossCell.__name__ = _AmpWithLossCell.__qualname__ = "WithLossCell"


def _add_loss_network(network, loss_fn, cast_model_type):
    if not isinstance(loss_fn, nn.Cell):
        raise OpTypeError("build_train_network", "loss_fn as a Cell", type(loss_fn).__name__)
    if cast_model_type in (mstype.float16, mstype.bfloat16) or \
            network.__dict__.get("_amp_level") in ("O2", "O3"):
        return _AmpWithLossCell(network, loss_fn)
    return nn.WithLossCell(network, loss_fn)


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0", **kwargs):
    """A training cell for `network`: mixed precision at `level`, the loss (if `loss_fn`), loss
    scaling from `loss_scale_manager` (O2's default: a DynamicLossScaleManager). kwargs:
    `cast_model_type` (float16/float32), `keep_batchnorm_fp32` (bool), `loss_scale_manager`.

    Returns `nn.TrainOneStepWithLossScaleCell` when the manager has an update cell (dynamic, or
    fixed with drop_overflow_update=True), else `nn.TrainOneStepCell(network, optimizer, sens=loss
    scale)`, in training mode."""
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

# `all_finite` (the overflow check) is defined in nn/wrap_loss_scale.py, next to the training cell
# that runs it, and imported on first use (see `__getattr__` at the end).


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
