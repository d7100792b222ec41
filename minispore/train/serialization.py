"""`save_checkpoint`, `load_checkpoint`, `load_param_into_net`: MindSpore's checkpoint API.

    ms.save_checkpoint(net, "model.ckpt")                    # names come from Parameter.name
    param_dict = ms.load_checkpoint("model.ckpt")            # {name: Parameter (or str)}
    param_not_load, ckpt_not_load = ms.load_param_into_net(net2, param_dict)

Two file formats (`format=`): MindSpore's protobuf "ckpt" (the default, as in MindSpore; see
`ckpt_codec`) and "safetensors" (see `safetensors_codec`). A file name that does not end with the
format gets `.<format>` appended on save (`"net"` -> `"net.ckpt"`, `"net.ckpt"` stays), and a load
refuses a name that does not end with its format, both exactly as MindSpore 2.x does. Neither
format can contain code: minispore never unpickles and never evaluates anything read from a file.
A missing, truncated, corrupted or hostile file raises `CheckpointError` (a ValueError) that names
the file and what is wrong with it.

Writes are atomic (`atomic_io.atomic_write_bytes`): the file appears complete or not at all, and is
left read-only (0o400), as MindSpore does.

Reads treat the file as untrusted (`read_checkpoint_bytes`): only a regular file is opened (a FIFO
would block, `/dev/zero` would never end), the memory it implies is checked before reading, and
it is read once, into one buffer that the decoders parse without further copies.

Loads into a network are all or nothing (`assign_all`): every value is checked against its
Parameter first, and if an assignment still fails half-way (MemoryError, Ctrl-C) the Parameters
already assigned get their old storage back before the exception propagates.
"""
from __future__ import annotations

import atexit
import logging
import numbers
import os
import threading

import numpy as np

from ..common import dtype as mstype
from ..common import memory_limit, untrusted_files
from ..common.errors import MinisporeRuntimeError, OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor, _wrap
from . import ckpt_codec, safetensors_codec
from .atomic_io import atomic_write_bytes
from .safetensors_codec import CheckpointError

logger = logging.getLogger("minispore")

FORMATS = ("ckpt", "safetensors")
DEFAULT_FORMAT = "ckpt"          # MindSpore's default for save_checkpoint and load_checkpoint


# ---------------------------------------------------------------------------------------------
# What gets saved: every save_obj form becomes a list of (name, ndarray | str)
def _is_cell(obj) -> bool:
    """Duck-typed Cell check, so this layer does not import minispore.nn (which sits above it)."""
    return callable(getattr(obj, "parameters_and_names", None))


def _as_array(op: str, name: str, value) -> np.ndarray:
    """The C-contiguous, little-endian ndarray to write for a Parameter/Tensor/ndarray value."""
    if isinstance(value, Tensor):
        arr = value.asnumpy()
    elif isinstance(value, np.ndarray):
        arr = value
    else:
        raise OpTypeError(op, f"the value of '{name}' to be a Parameter, Tensor, ndarray or str",
                          type(value).__name__)
    if arr.dtype.byteorder == ">":              # files are little-endian
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    if arr.dtype not in safetensors_codec.DTYPE_TO_CODE:
        raise OpTypeError(op, f"'{name}' to have a minispore dtype "
                          f"({', '.join(str(d) for d in mstype.ALL_DTYPES)})", f"numpy dtype {arr.dtype}")
    # (not np.ascontiguousarray: it turns a 0-d array into shape (1,))
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _check_name(op: str, name) -> str:
    if not isinstance(name, str) or not name:
        raise OpTypeError(op, "parameter names to be non-empty strings", repr(name))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise OpValueError(op, "parameter names encodable as UTF-8", repr(name)) from None
    return name


def _check_text(op: str, name: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise OpValueError(op, f"the string value of '{name}' to be valid Unicode (encodable as UTF-8)",
                           f"{value!r:.60}") from None
    return value


def _collect(save_obj, choice_func, op="save_checkpoint") -> list:
    """[(name, value)] from a Cell, a list of Parameters / {"name", "data"} dicts, or a dict."""
    if _is_cell(save_obj):
        pairs, seen = [], set()
        for name, param in save_obj.parameters_and_names():
            if id(param) in seen:                     # a shared (tied) Parameter is saved once
                continue
            seen.add(id(param))
            pairs.append((getattr(param, "name", name), param))
    elif isinstance(save_obj, (list, tuple)):
        pairs = []
        for item in save_obj:
            if isinstance(item, Parameter):
                pairs.append((item.name, item))
            elif isinstance(item, dict) and "name" in item and "data" in item:
                pairs.append((item["name"], item["data"]))
            else:
                raise OpTypeError(op, "'save_obj' list items to be Parameters or {'name': str, 'data': Tensor} "
                                  "dicts", f"{type(item).__name__} {item!r:.80}")
    elif isinstance(save_obj, dict):
        pairs = list(save_obj.items())
    else:
        raise OpTypeError(op, "'save_obj' to be a Cell, a list or a dict", type(save_obj).__name__)

    items, names = [], set()
    for name, value in pairs:
        name = _check_name(op, name)
        if choice_func is not None and not choice_func(name):
            continue
        if name in names:
            raise OpValueError(op, "unique parameter names", f"'{name}' twice (two different Parameters "
                               "share a name; give them distinct names)")
        names.add(name)
        items.append((name, _check_text(op, name, value) if isinstance(value, str) else _as_array(op, name, value)))
    return items


def _append_items(append_dict, op="save_checkpoint") -> list:
    """MindSpore's append_dict conversions: int -> Int64, float -> Float32, bool -> Bool, str stays."""
    if append_dict is None:
        return []
    if not isinstance(append_dict, dict):
        raise OpTypeError(op, "'append_dict' to be a dict", type(append_dict).__name__)
    items = []
    for key, value in append_dict.items():
        _check_name(op, key)
        if isinstance(value, str):
            items.append((key, _check_text(op, key, value)))
        elif isinstance(value, (bool, np.bool_)):
            items.append((key, np.asarray(value, dtype=np.bool_)))
        elif isinstance(value, numbers.Integral):
            items.append((key, np.asarray(value, dtype=np.int64)))
        elif isinstance(value, numbers.Real):
            items.append((key, np.asarray(value, dtype=np.float32)))
        elif isinstance(value, Tensor):
            items.append((key, _as_array(op, key, value)))
        else:
            raise OpTypeError(op, "'append_dict' values to be int, float, bool, str, Parameter or Tensor",
                              f"{type(value).__name__} for key '{key}'")
    return items


# ---------------------------------------------------------------------------------------------
# Asynchronous saves: a background thread writes a snapshot while training continues
_async_threads: list[threading.Thread] = []
_async_errors: list[BaseException] = []


def _wait_async_saves():
    """Block until every pending asynchronous save has finished; re-raise the first failure."""
    while _async_threads:
        _async_threads.pop(0).join()
    if _async_errors:
        err = _async_errors.pop(0)
        _async_errors.clear()
        raise MinisporeRuntimeError(f"An asynchronous save_checkpoint failed: {err}") from err


atexit.register(_wait_async_saves)      # an interpreter exit never drops a checkpoint being written


def _write(path, items, fmt, crc_check):
    if fmt == "safetensors":
        tensors = {n: v for n, v in items if not isinstance(v, str)}
        strings = {n: v for n, v in items if isinstance(v, str)}
        data = safetensors_codec.encode(tensors, strings, crc_check)
    else:
        data = ckpt_codec.encode(items, crc_check)
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise CheckpointError("save_checkpoint", path, f"could not be written: {e}") from e


def _async_write(path, items, fmt, crc_check):
    try:
        _write(path, items, fmt, crc_check)
    except BaseException as e:         # noqa: BLE001  (reported by the next wait)
        logger.error("Failed to save the checkpoint file %s: %s", path, e)
        _async_errors.append(e)


# ---------------------------------------------------------------------------------------------
def _check_format(op, fmt):
    if fmt not in FORMATS:
        raise OpValueError(op, "'format' to be 'ckpt' or 'safetensors'", repr(fmt))


def _check_bool(op, arg, v):
    if not isinstance(v, (bool, np.bool_)):
        raise OpTypeError(op, f"'{arg}' to be a bool", f"{type(v).__name__} {v!r}")
    return bool(v)


def _check_no_encryption(op, key, mode):
    if key is None:
        return
    if not isinstance(key, bytes):
        raise OpTypeError(op, "'enc_key'/'dec_key' to be None or bytes", type(key).__name__)
    raise OpValueError(op, "no encryption key (minispore does not implement AES-GCM/AES-CBC/SM4-CBC "
                       "checkpoint encryption)", f"a {len(key)}-byte key with mode {mode!r}")


def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False, append_dict=None,
                    enc_key=None, enc_mode="AES-GCM", choice_func=None, crc_check=False,
                    format=DEFAULT_FORMAT, **kwargs):
    """Save parameters (and extra values) to one checkpoint file, atomically.

    Args:
        save_obj: a Cell (its `parameters_and_names()`, saved under each `Parameter.name`), a list of
            Parameters or of `{"name": str, "data": Tensor}` dicts, or a dict `{name: Parameter |
            Tensor | ndarray | str}` such as `load_checkpoint` returns.
        ckpt_file_name: the file to write. `.<format>` is appended if the name does not end with the
            format string (MindSpore's rule: "net" -> "net.ckpt"; "net.ckpt" and even "netckpt" stay;
            "net.safetensors" -> "net.safetensors.ckpt"). An existing file, even a read-only one, is
            replaced atomically.
        integrated_save: MindSpore merges model-parallel slices when True. There is one device here,
            so it only has to be a bool.
        async_save: False, True, "thread" or "process": return as soon as the values are snapshotted
            and write in the background. minispore writes in a thread for both strings (the write is
            I/O, which releases the GIL). Later saves, loads and interpreter exit wait for it.
        append_dict: extra `{name: int | float | bool | str | Tensor}`; ints become Int64 scalars,
            floats Float32, bools Bool; strings load back as `str`.
        enc_key, enc_mode: encryption is not implemented; `enc_key` must be None.
        choice_func: `choice_func(name) -> bool` picks the parameters to save.
        crc_check: store a crc32 so `load_checkpoint(..., crc_check=True)` detects damage.
        format: "ckpt" (default: MindSpore's protobuf format) or "safetensors".
    """
    op = "save_checkpoint"
    _check_format(op, format)
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise OpTypeError(op, "'ckpt_file_name' to be a str (or os.PathLike)", type(ckpt_file_name).__name__)
    _check_bool(op, "integrated_save", integrated_save)
    if not (isinstance(async_save, bool) or async_save in ("thread", "process")):
        raise OpValueError(op, "'async_save' to be a bool, 'thread' or 'process'", repr(async_save))
    crc_check = _check_bool(op, "crc_check", crc_check)
    _check_no_encryption(op, enc_key, enc_mode)
    if choice_func is not None and not callable(choice_func):
        raise OpTypeError(op, "'choice_func' to be a callable(name) -> bool", type(choice_func).__name__)
    unknown = set(kwargs) - {"remove_redundancy", "incremental", "global_step_num"}
    if unknown:
        raise OpTypeError(op, "known keyword arguments", f"unexpected {sorted(unknown)}")

    path = os.path.realpath(os.fspath(ckpt_file_name))
    if not path.endswith(format):
        path += "." + format
    if os.path.isdir(path):
        raise CheckpointError(op, path, "is a directory; 'ckpt_file_name' must name a file")
    if not os.path.isdir(os.path.dirname(path)):
        raise CheckpointError(op, path, f"cannot be written: the directory '{os.path.dirname(path)}' "
                              "does not exist")

    items = _collect(save_obj, choice_func, op)
    names = {n for n, _ in items}
    for name, value in _append_items(append_dict, op):
        if name in names:
            raise OpValueError(op, "'append_dict' keys different from parameter names", f"'{name}' in both")
        items.append((name, value))
    if format == "safetensors" and any(n == "__metadata__" for n, _ in items):
        raise OpValueError(op, "no parameter named '__metadata__' (the safetensors header reserves it)",
                           "'__metadata__'")

    _wait_async_saves()                     # one save at a time, in call order
    if async_save:
        # Snapshot now: training may update the Parameters in place while the thread writes.
        snapshot = [(n, v if isinstance(v, str) else v.copy()) for n, v in items]
        t = threading.Thread(target=_async_write, args=(path, snapshot, format, crc_check),
                             name="minispore-async-save", daemon=False)
        _async_threads.append(t)
        t.start()
    else:
        _write(path, items, format, crc_check)


# ---------------------------------------------------------------------------------------------
def _check_prefix(arg, prefix):
    if prefix is None:
        return None
    if isinstance(prefix, str):
        prefix = (prefix,)
    if not isinstance(prefix, (list, tuple)) or not prefix:
        raise OpTypeError("load_checkpoint", f"'{arg}' to be a str or a non-empty list/tuple of str",
                          repr(prefix))
    for p in prefix:
        if not isinstance(p, str) or not p:
            raise OpValueError("load_checkpoint", f"'{arg}' entries to be non-empty strings", repr(p))
    return tuple(prefix)


def _wanted(name, specify_prefix, filter_prefix, choice_func) -> bool:
    """MindSpore's rule: the (deprecated) prefix arguments, when given, override choice_func."""
    if specify_prefix is not None or filter_prefix is not None:
        if specify_prefix is not None and not name.startswith(specify_prefix):
            return False
        return not (filter_prefix is not None and name.startswith(filter_prefix))
    return choice_func is None or bool(choice_func(name))


def read_checkpoint_bytes(op: str, path: str, what: str = "checkpoint file",
                          missing: str = "does not exist") -> bytearray:
    """The whole of a checkpoint file someone else may have written, as one writable buffer.

    * Only a regular file is read (`untrusted_files.open_regular`: the *opened* descriptor is
      checked, so a FIFO cannot block and a symlink to `/dev/zero` is refused, not read forever).
    * Before reading, the memory it implies -- the file's bytes plus the arrays decoded from them,
      about twice its size -- is checked against the limit (`memory_limit.check_fits`), so a file
      too large for this machine is a clear error instead of swapping or an out-of-memory kill.
    * It is read once, with `readinto`: the decoders then slice this buffer without copying, and
      a hash of it (CheckpointManager's sha256) describes exactly the bytes that get parsed.

    Every refusal is a CheckpointError naming `path`; `missing` is the phrase for a path with
    nothing at it.
    """
    try:
        f, size = untrusted_files.open_regular(path, what)
    except untrusted_files.UntrustedFileError as e:
        raise _as_checkpoint_error(op, path, e, missing) from e
    with f:
        memory_limit.check_fits(2 * size, f"Loading the {what} '{path}' ({memory_limit.format_bytes(size)})",
                                hint="Load it on a machine with more memory.")
        buf = bytearray(size)
        view, filled = memoryview(buf), 0
        try:
            while filled < size:
                n = f.readinto(view[filled:])
                if not n:
                    break
                filled += n
            grew = f.read(1)
        except OSError as e:
            raise CheckpointError(op, path, f"could not be read: {e}") from e
        finally:
            view.release()
    if filled < size or grew:
        raise CheckpointError(op, path, "changed size while it was being read; load it again once nothing "
                              "is writing to it")
    return buf


def _as_checkpoint_error(op, path, e: untrusted_files.UntrustedFileError, missing: str) -> CheckpointError:
    """The CheckpointError for a refusal of `untrusted_files` (one error class for every bad checkpoint)."""
    if e.got == "nothing at that path":
        return CheckpointError(op, path, missing)
    if e.got == "a directory":
        return CheckpointError(op, path, "is a directory, not a checkpoint file")
    if e.expected == "a regular file":
        return CheckpointError(op, path, f"is not a regular file: it is {e.got}")
    return CheckpointError(op, path, f"could not be read: expected {e.expected}, but got {e.got}")


def read_checkpoint_items(ckpt_file_name, crc_check=False, format=DEFAULT_FORMAT, op="load_checkpoint"):
    """[(name, ndarray | str)] stored in a checkpoint file, validated; the low-level half of
    `load_checkpoint` (no Parameters are built)."""
    _check_format(op, format)
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise OpTypeError(op, "'ckpt_file_name' to be a str (or os.PathLike)", type(ckpt_file_name).__name__)
    if not os.fspath(ckpt_file_name).endswith(format):
        raise OpValueError(op, f"a file name ending with '{format}' (the 'format' argument)",
                           f"'{ckpt_file_name}'")
    path = os.path.realpath(os.fspath(ckpt_file_name))
    _wait_async_saves()                     # a save still being written in the background
    raw = read_checkpoint_bytes(op, path, missing="does not exist; check 'ckpt_file_name'")
    if format == "safetensors":
        tensors, strings = safetensors_codec.decode(raw, path, crc_check, op)
        return sorted({**tensors, **strings}.items())
    return ckpt_codec.decode(raw, path, crc_check, op)


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None, dec_key=None,
                    dec_mode="AES-GCM", specify_prefix=None, choice_func=None, crc_check=False,
                    remove_redundancy=False, format=DEFAULT_FORMAT):
    """Load a checkpoint file into `{name: Parameter}` (values saved as strings stay `str`).

    Args:
        ckpt_file_name: the file; its name must end with `format`.
        net: if given, the loaded values are also put into it with `load_param_into_net`.
        strict_load: passed to `load_param_into_net`.
        filter_prefix / specify_prefix: (deprecated in MindSpore) skip names starting with
            `filter_prefix`; keep only names starting with `specify_prefix`. Either one overrides
            `choice_func`.
        choice_func: `choice_func(name) -> bool` picks the entries to load.
        dec_key, dec_mode: decryption is not implemented; `dec_key` must be None.
        crc_check: verify the file's stored crc32 (a warning if the file has none).
        remove_redundancy: only meaningful for data-parallel checkpoints; passed to
            `load_param_into_net`.
        format: "ckpt" (default, as MindSpore) or "safetensors".

    Returns:
        dict name -> Parameter (named `name`, requires_grad=True as MindSpore builds them) or str,
        in file order for ckpt and in sorted name order for safetensors.

    Raises:
        CheckpointError (ValueError): the file is missing, unreadable, not a checkpoint, damaged, or
            nothing is left after filtering.
    """
    op = "load_checkpoint"
    specify_prefix = _check_prefix("specify_prefix", specify_prefix)
    filter_prefix = _check_prefix("filter_prefix", filter_prefix)
    crc_check = _check_bool(op, "crc_check", crc_check)
    _check_bool(op, "strict_load", strict_load)
    _check_bool(op, "remove_redundancy", remove_redundancy)
    _check_no_encryption(op, dec_key, dec_mode)
    if choice_func is not None and not callable(choice_func):
        raise OpTypeError(op, "'choice_func' to be a callable(name) -> bool", type(choice_func).__name__)

    items = read_checkpoint_items(ckpt_file_name, crc_check, format, op)
    parameter_dict = {}
    for name, value in items:
        if not _wanted(name, specify_prefix, filter_prefix, choice_func):
            continue
        parameter_dict[name] = value if isinstance(value, str) else Parameter(value, name=name)
    if not parameter_dict:
        raise CheckpointError(op, os.path.realpath(os.fspath(ckpt_file_name)),
                              "gave an empty parameter dict after filtering; check 'choice_func', "
                              "'filter_prefix' and 'specify_prefix'")
    if net is not None:
        load_param_into_net(net, parameter_dict, strict_load, remove_redundancy)
    return parameter_dict


# ---------------------------------------------------------------------------------------------
_FLOATS = {d for d in mstype.FLOAT_DTYPES}
_INTS = {mstype.int8, mstype.int16, mstype.int32, mstype.int64}


def _drops_trailing_ones(file_shape, net_shape) -> bool:
    """True when `file_shape` is `net_shape` followed by extra 1s (MindSpore's _special_process_par)."""
    n = len(net_shape)
    return (len(file_shape) > n and tuple(file_shape[:n]) == net_shape
            and all(d == 1 for d in file_shape[n:]))


def _plan_update(param, new, strict_load) -> np.ndarray:
    """Check that `new` fits `param`; return the array to store (converted if allowed)."""
    op = "load_param_into_net"
    name = param.name
    new_arr = new.asnumpy()
    if _drops_trailing_ones(new_arr.shape, tuple(param.shape)):
        # MindSpore's one shape relaxation: (12, 2048, 1, 1) in the file loads into (12, 2048)
        # (checkpoints written by Ascend's 4-D layouts; also a (1,) value into a () Parameter)
        new_arr = new_arr.reshape(tuple(param.shape))
    if tuple(param.shape) != tuple(new_arr.shape):
        raise MinisporeRuntimeError(
            f"For '{op}', {name} in the argument 'net' should have the same shape as {name} in the "
            f"argument 'parameter_dict'. But got its shape {tuple(param.shape)} in the argument 'net' and "
            f"shape {tuple(new_arr.shape)} in the argument 'parameter_dict'. May you need to check whether "
            f"the checkpoint you loaded is correct or the batch size and so on in the 'net' and "
            f"'parameter_dict' are same.")
    old_t, new_t = param.dtype, mstype.from_numpy_dtype(new_arr.dtype)
    if old_t is not new_t:
        # MindSpore converts float<->float and int<->int unless strict_load; anything else is an error
        if strict_load or not ({old_t, new_t} <= _FLOATS or {old_t, new_t} <= _INTS):
            raise MinisporeRuntimeError(
                f"For '{op}', {name} in the argument 'net' should have the same type as {name} in the "
                f"argument 'parameter_dict'. But got its type {old_t} in the argument 'net' and type "
                f"{new_t} in the argument 'parameter_dict'. May you need to check whether the checkpoint "
                f"you loaded is correct.")
        logger.warning("The type of %s:%s in 'parameter_dict' is different from the type of it in "
                       "'net':%s, then the type convert from %s to %s in the network.",
                       name, new_t, old_t, new_t, old_t)
        return new_arr.astype(old_t.np)
    return new_arr.copy()       # the net must not share memory with the dict (or with another net)


def load_param_into_net(net, parameter_dict, strict_load=False, remove_redundancy=False):
    """Copy values from `parameter_dict` into the net's Parameters, matched by `Parameter.name`.

    Nothing is changed unless every matched parameter fits (shape, and dtype as below), so a failed
    load leaves the net as it was.

    * Shapes must agree exactly (RuntimeError with MindSpore's wording otherwise).
    * Dtypes: with `strict_load=False` a float value loads into any float Parameter and an int into
      any int Parameter (converted, with a warning); other differences are errors.
    * With `strict_load=False`, net parameters whose names are missing are looked up once more
      under a prefix: if the dict has `backbone.fc.weight` where the net has `fc.weight`, the
      prefix `backbone.` is used for every still-missing parameter (MindSpore's rule, restricted
      here to whole dotted name components).
    * String entries (from `append_dict`) are never loaded into a net.

    Returns:
        (param_not_load, ckpt_not_load): names of net parameters that got no value, and names in the
        dict that were not used.
    """
    op = "load_param_into_net"
    if not _is_cell(net):
        raise OpTypeError(op, "the argument 'net' to be a Cell", type(net).__name__)
    if not isinstance(parameter_dict, dict):
        raise OpTypeError(op, "the argument 'parameter_dict' to be a dict", type(parameter_dict).__name__)
    for key, value in parameter_dict.items():
        if not isinstance(key, str) or not isinstance(value, (Tensor, str)):
            raise OpTypeError(op, "'parameter_dict' items to be str -> Parameter (or str)",
                              f"{type(key).__name__} -> {type(value).__name__}")
    strict_load = _check_bool(op, "strict_load", strict_load)
    if _check_bool(op, "remove_redundancy", remove_redundancy):
        raise OpTypeError(op, "remove_redundancy=False (the deduplication feature for loading a checkpoint "
                          "can only be used in parallel scenarios)", "stand_alone")

    net_params, seen = [], set()
    for _, param in net.parameters_and_names():
        if id(param) not in seen:
            seen.add(id(param))
            net_params.append(param)

    plan, used, param_not_load = [], set(), []
    for param in net_params:
        value = parameter_dict.get(param.name)
        if isinstance(value, Tensor):
            plan.append((param, _plan_update(param, value, strict_load)))
            used.add(param.name)
        elif value is None and not param.name.startswith("accu_grads"):
            param_not_load.append(param.name)

    if param_not_load and not strict_load:
        param_not_load = _plan_prefixed(net_params, parameter_dict, param_not_load, plan, used, strict_load)

    assign_validated(plan)                  # everything fits: now write, all or nothing
    if param_not_load:
        logger.warning("For '%s', %d parameters in the 'net' are not loaded, because they are not in the "
                       "'parameter_dict': %s", op, len(param_not_load), param_not_load)
    ckpt_not_load = [k for k in parameter_dict if k not in used]
    return param_not_load, ckpt_not_load


def _plan_prefixed(net_params, parameter_dict, missing, plan, used, strict_load):
    """Find a prefix P such that P + name is in the dict for a missing name; load all such names."""
    by_name = {p.name: p for p in net_params}
    missing = list(missing)
    while missing:
        prefix = None
        for name in missing:
            for key, value in parameter_dict.items():
                if isinstance(value, Tensor) and key not in used and key.endswith("." + name):
                    prefix = key[:-len(name)]
                    break
            if prefix is not None:
                break
        if prefix is None:
            break
        logger.warning("For 'load_param_into_net', remove parameter prefix name: %s, continue to load.", prefix)
        still = []
        for name in missing:
            value = parameter_dict.get(prefix + name)
            if isinstance(value, Tensor):
                plan.append((by_name[name], _plan_update(by_name[name], value, strict_load)))
                used.add(prefix + name)
            else:
                still.append(name)
        missing = still
    return missing


# ---------------------------------------------------------------------------------------------
# All or nothing: check every value, then assign every value (or, on failure, none)
def _describe_array(arr: np.ndarray) -> str:
    try:
        name = str(mstype.from_numpy_dtype(arr.dtype))
    except (OpTypeError, KeyError, TypeError):
        name = f"numpy {arr.dtype}"
    return f"{name}{list(arr.shape)}"


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality of two arrays of one shape and dtype (NaN equals the same NaN; no float rules)."""
    return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(b).reshape(-1).view(np.uint8)))


def validate_all(params_by_name: dict, arrays: dict, where: str) -> list:
    """The first half of `assign_all`: check every entry, change nothing; returns [(Parameter, array)]."""
    if not isinstance(where, str):
        raise OpTypeError("assign_all", "'where' as a str naming the caller", type(where).__name__)
    if not isinstance(params_by_name, dict):
        raise OpTypeError(where, "'params_by_name' to be a dict {name: Parameter}", type(params_by_name).__name__)
    if not isinstance(arrays, dict):
        raise OpTypeError(where, "'arrays' to be a dict {name: ndarray}", type(arrays).__name__)
    wrong_types, problems = [], []
    pairs, first_name = [], {}                  # id(Parameter) -> the name it was first reached by
    for name, value in arrays.items():
        param = params_by_name.get(name)
        if not isinstance(value, np.ndarray):
            wrong_types.append(f"'{name}' is a {type(value).__name__}")
        elif param is None:
            problems.append(f"'{name}' names no Parameter")
        elif not isinstance(param, Parameter):
            wrong_types.append(f"the Parameter for '{name}' is a {type(param).__name__}")
        elif tuple(value.shape) != tuple(param.shape) or value.dtype != param.dtype.np:
            problems.append(f"'{name}' is {_describe_array(value)} for a {param.dtype}{list(param.shape)} Parameter")
        elif id(param) in first_name:           # a tied Parameter, reached under two names
            earlier = first_name[id(param)]
            if not _same_bytes(value, arrays[earlier]):
                problems.append(f"'{earlier}' and '{name}' are the same Parameter but have different values")
        else:
            first_name[id(param)] = name
            pairs.append((param, value))
    if wrong_types:
        raise OpTypeError(where, "every value to be a NumPy ndarray for a Parameter", "; ".join(wrong_types))
    if problems:
        shown = problems[:8] + ([f"and {len(problems) - 8} more"] if len(problems) > 8 else [])
        raise OpValueError(where, "every array to match its Parameter's name, shape and dtype", "; ".join(shown))
    # A Parameter must own contiguous, writable storage (optimizers update it in place): copy the
    # arrays that are not, now, while nothing has been changed yet.
    return [(p, v if v.flags.c_contiguous and v.flags.writeable else v.copy(order="C")) for p, v in pairs]


def assign_validated(pairs: list) -> None:
    """The second half of `assign_all`: store each array in its Parameter; undo them all on failure.

    The old storage of each Parameter is kept until every assignment has succeeded; if one raises
    (anything, including KeyboardInterrupt), every Parameter touched so far gets its old storage
    back and the exception propagates.
    """
    old = []
    try:
        for param, arr in pairs:
            old.append((param, param.asnumpy()))        # the storage itself (no copy)
            param.set_data(_wrap(arr))
    except BaseException:
        for param, arr in reversed(old):
            param.set_data(_wrap(arr))
        raise


def assign_all(params_by_name: dict, arrays: dict, where: str) -> None:
    """Put `arrays[name]` into `params_by_name[name]` for every name in `arrays`: all of them, or none.

        assign_all(dict(net.parameters_and_names()), {"fc.weight": w, "fc.bias": b}, "from_pretrained")

    Checked for every entry before any Parameter changes (problems are listed together):
      * `where` is a str (the caller's name, used in the messages), the two arguments are dicts;
      * every value is a NumPy ndarray (OpTypeError otherwise);
      * every name in `arrays` is a key of `params_by_name` (names only in `params_by_name` are left
        alone: whether a missing value is an error is the caller's rule);
      * every array has exactly its Parameter's shape and dtype: no conversion, no broadcasting, no
        dropped trailing 1s (the caller converts as its own rules allow first);
      * a Parameter reached under two names (tied weights) gets bitwise-equal values under both,
        and is assigned once.
    Values are not checked for finiteness: a NaN in a checkpoint is data, not damage.
    Problems raise OpValueError(where, ...) naming each entry, e.g. "'fc.bias' is Float32[4] for a
    Float32[3] Parameter; 'fc.scale' names no Parameter".

    Then each Parameter takes its array as storage *without copying* when the array is
    C-contiguous and writable (so pass arrays nobody else keeps writing to); other arrays (read-only
    ones from `np.frombuffer`, non-contiguous views) are copied first. If an assignment fails
    half-way, every Parameter already assigned gets its old storage back before the exception
    propagates, so the net is either fully loaded or exactly as it was. Returns None.
    """
    assign_validated(validate_all(params_by_name, arrays, where))


__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net", "read_checkpoint_items",
           "read_checkpoint_bytes", "assign_all", "CheckpointError"]
