"""The safetensors file format, as MindSpore writes it (`format="safetensors"`).

A safetensors file is::

    8 bytes      N, the header length (little-endian uint64)
    N bytes      JSON: {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [2, 3],
                                                          "data_offsets": [begin, end]}, ...}
    the rest     raw little-endian C-order tensor bytes; offsets are relative to this section

It holds no code and no pickles, so loading a hostile file can at worst give wrong numbers or an
error. The `safetensors` package does the byte-level work (and checks every offset, dtype and shape
of the header against the file size); this module maps its dtypes to minispore's, adds MindSpore's
metadata, and turns every way a file can be broken into one `CheckpointError` naming the file.

What MindSpore writes, and what we add on top:

* metadata `{"format": "ms"}`; tensors in sorted name order.
* `crc_check=True`: metadata `"crc_num"` = crc32 over, for each tensor in sorted name order, its
  UTF-8 name and then its raw bytes (exactly MindSpore's number, so files stay interchangeable).
  That checksum does not cover dtypes or shapes: flipping one header byte turns "F32" into "I32"
  and the file still "verifies". So we also store `"crc_layout"`: crc32 over every tensor's name,
  dtype code and shape, and every string value. A file from real MindSpore has no `crc_layout`;
  then only `crc_num` is checked.
* String values (MindSpore's `append_dict` allows them; its safetensors writer cannot store them)
  go in the metadata under `"str:<name>"`.
"""
from __future__ import annotations

import json
import zlib

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

from ..common import dtype as mstype
from ..common.errors import MinisporeError

STR_PREFIX = "str:"

# safetensors dtype code <-> minispore dtype. safetensors also knows float8 types; minispore has
# no such dtypes, so a file holding them is rejected with a clear message.
CODE_TO_DTYPE = {
    "F64": mstype.float64, "F32": mstype.float32, "F16": mstype.float16, "BF16": mstype.bfloat16,
    "I64": mstype.int64, "I32": mstype.int32, "I16": mstype.int16, "I8": mstype.int8,
    "U8": mstype.uint8, "BOOL": mstype.bool_,
}
for _code, _name in (("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64")):
    if hasattr(mstype, _name):                  # the wide unsigned types, where minispore has them
        CODE_TO_DTYPE[_code] = getattr(mstype, _name)
DTYPE_TO_CODE = {d.np: code for code, d in CODE_TO_DTYPE.items()}
assert np.dtype(ml_dtypes.bfloat16) in DTYPE_TO_CODE


class CheckpointError(MinisporeError, ValueError):
    """A checkpoint file is missing, unreadable, truncated, corrupted or inconsistent.

    Subclasses ValueError because MindSpore raises ValueError for a bad checkpoint file.
    """

    def __init__(self, op: str, path, problem: str):
        self.op, self.path, self.problem = op, str(path), problem
        super().__init__(f"For '{op}', the checkpoint file '{path}' {problem}")


def _crc_num(tensors: dict) -> int:
    """MindSpore's checksum: crc32 of name bytes then data bytes, tensors in sorted name order."""
    crc = 0
    for name in sorted(tensors):
        crc = zlib.crc32(name.encode("utf-8"), crc)
        crc = zlib.crc32(_raw_bytes(tensors[name]), crc)
    return crc


def _crc_layout(tensors: dict, strings: dict) -> int:
    """Our checksum over what `crc_num` misses: dtypes, shapes and string values."""
    crc = 0
    for name in sorted(tensors):
        arr = tensors[name]
        crc = zlib.crc32(f"{name}\0{DTYPE_TO_CODE[arr.dtype]}\0{list(arr.shape)}\n".encode("utf-8"), crc)
    for name in sorted(strings):
        crc = zlib.crc32(f"{STR_PREFIX}{name}\0{strings[name]}\n".encode("utf-8"), crc)
    return crc


def _raw_bytes(arr: np.ndarray):
    """A zero-copy byte view of a C-contiguous array (0-d arrays included)."""
    return arr.reshape(-1).view(np.uint8)


def encode(tensors: dict, strings: dict, crc_check: bool = False) -> bytes:
    """Serialize {name: C-contiguous ndarray} and {name: str} into safetensors bytes."""
    metadata = {"format": "ms"}
    for name, value in strings.items():
        metadata[STR_PREFIX + name] = value
    if crc_check:
        metadata["crc_num"] = str(_crc_num(tensors))
        metadata["crc_layout"] = str(_crc_layout(tensors, strings))
    # safetensors reads each array's memory directly: callers pass C-contiguous little-endian
    # arrays (see serialization._as_array). It lays tensors out in its own canonical order.
    return safetensors.numpy.save({name: tensors[name] for name in sorted(tensors)}, metadata=metadata)


def decode(raw: bytes, path, crc_check: bool = False, op: str = "load_checkpoint"):
    """Parse safetensors bytes into ({name: ndarray}, {name: str}); raise CheckpointError if broken.

    Returned arrays own writable copies of their bytes (nothing is memory-mapped, so the file can be
    replaced or deleted afterwards).
    """
    if len(raw) < 8:
        raise CheckpointError(op, path, f"is too short to be a safetensors file ({len(raw)} bytes; "
                              "the header length alone takes 8)")
    header_len = int.from_bytes(raw[:8], "little")
    if header_len > len(raw) - 8:
        raise CheckpointError(op, path, f"declares a {header_len}-byte header but only {len(raw) - 8} "
                              "bytes follow: the file is truncated or is not a safetensors file")
    try:
        entries = safetensors.deserialize(raw)          # checks offsets, dtypes and sizes
        header = json.loads(raw[8:8 + header_len].decode("utf-8"))
    except (safetensors.SafetensorError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(op, path, f"is not a valid safetensors file: {e}") from None
    metadata = header.get("__metadata__", {}) if isinstance(header, dict) else {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(op, path, "has a '__metadata__' entry that is not a map of strings")

    tensors = {}
    for name, info in entries:
        code = info["dtype"]
        if code not in CODE_TO_DTYPE:
            raise CheckpointError(op, path, f"stores '{name}' as {code}, a dtype minispore does not support "
                                  f"(supported: {', '.join(CODE_TO_DTYPE)})")
        if metadata.get(name) == "Int4":
            raise CheckpointError(op, path, f"stores '{name}' as MindSpore's packed Int4 (qint4x2), "
                                  "which minispore does not support")
        dt = CODE_TO_DTYPE[code].np
        shape = tuple(int(s) for s in info["shape"])
        data = info["data"]
        if len(data) != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:   # deserialize checks this too
            raise CheckpointError(op, path, f"has {len(data)} bytes for '{name}' of shape {shape} and "
                                  f"dtype {code}")
        arr = np.frombuffer(data, dtype=dt).reshape(shape)
        tensors[name] = arr if arr.flags.writeable else arr.copy()     # (bytes, not bytearray, in old versions)

    strings = {k[len(STR_PREFIX):]: v for k, v in metadata.items() if k.startswith(STR_PREFIX)}
    clash = sorted(set(strings) & set(tensors))
    if clash:
        raise CheckpointError(op, path, f"stores both a tensor and a string under the names {clash}")

    if crc_check:
        _verify_crc(metadata, tensors, strings, path, op)
    return tensors, strings


def _verify_crc(metadata, tensors, strings, path, op):
    if "crc_num" not in metadata:
        import warnings
        warnings.warn(f"For '{op}', the safetensors file '{path}' does not contain a crc code "
                      "(it was saved without crc_check=True); it is loaded unchecked.", stacklevel=4)
        return
    checks = [("crc_num", _crc_num(tensors))]
    if "crc_layout" in metadata:
        checks.append(("crc_layout", _crc_layout(tensors, strings)))
    for key, computed in checks:
        if metadata[key] != str(computed):
            raise CheckpointError(op, path, f"failed the crc check ({key}: stored {metadata[key]!r}, "
                                  f"computed {computed}); the file is damaged")


__all__ = ["CheckpointError", "encode", "decode", "CODE_TO_DTYPE", "DTYPE_TO_CODE"]
