"""The safetensors file format, as MindSpore writes it (`format="safetensors"`).

A safetensors file is::

    8 bytes      N, the header length (little-endian uint64)
    N bytes      JSON: {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [2, 3],
                                                          "data_offsets": [begin, end]}, ...}
    the rest     raw little-endian C-order tensor bytes; offsets are relative to this section

It holds no code and no pickles, so loading a hostile file can at worst give wrong numbers or an
error. Writing uses the `safetensors` package. Reading is done here, by hand, because the format
is small enough to check completely and because the reader must never trust a number in the file
before comparing it with the file itself:

* the header length is compared with the bytes that follow *and* capped (`MAX_HEADER_BYTES`, the
  reference implementation's 100 MB) before the header is decoded;
* the header is parsed by `untrusted_files.parse_json` (bad UTF-8, bad JSON and deep nesting are
  refused with a clear message, never a RecursionError);
* every entry needs a known dtype, a shape of at most 64 non-negative ints, and data offsets whose
  length is exactly shape x item size (computed with Python ints, so a shape of 2**40 x 2**40
  cannot overflow into a small number), inside the data section;
* the entries must tile the data section exactly, as the reference implementation requires: no
  gaps, no overlaps, no bytes left over.

Each tensor is then copied out of the file's buffer once, so the arrays own their memory and the
buffer can be dropped. Every way a file can be broken is one `CheckpointError` naming the file.

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

import math
import zlib

import ml_dtypes
import numpy as np
import safetensors.numpy

from ..common import dtype as mstype
from ..common import untrusted_files
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
# the other dtype codes of the safetensors format: a file may hold them, minispore cannot
OTHER_CODES = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
               "U16", "U32", "U64"} - set(CODE_TO_DTYPE)

MAX_HEADER_BYTES = 100_000_000   # the reference implementation refuses larger headers too
MAX_DIMS = 64                    # NumPy's limit on the number of dimensions


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


class _Malformed(ValueError):
    """A structural problem with a safetensors file (reported as 'is not a valid safetensors file')."""


def _entry_layout(name, info, data_len):
    """(code, shape, begin, end) of one header entry, every number checked against the file."""
    if not isinstance(info, dict):
        raise _Malformed(f"the entry for '{name}' is a {type(info).__name__}, not an object")
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(code, str):
        raise _Malformed(f"'{name}' has no dtype string")
    if code not in CODE_TO_DTYPE and code not in OTHER_CODES:
        raise _Malformed(f"'{name}' has the unknown dtype {code!r}")
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise _Malformed(f"'{name}' has the shape {shape!r:.80}; expected a list of at most {MAX_DIMS} "
                         "non-negative ints")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise _Malformed(f"'{name}' has the data_offsets {offsets!r:.80}; expected [begin, end] with "
                         "0 <= begin <= end")
    begin, end = offsets
    if end > data_len:
        raise _Malformed(f"'{name}' ends at byte {end:,}, past the end of the {data_len:,}-byte data "
                         "section (the file is truncated or damaged)")
    if code in CODE_TO_DTYPE:
        need = math.prod(shape) * CODE_TO_DTYPE[code].np.itemsize      # Python ints: no overflow
        if need != end - begin:
            raise _Malformed(f"'{name}' of shape {shape} and dtype {code} needs {need:,} bytes, but its "
                             f"data_offsets span {end - begin:,}")
    return code, tuple(shape), begin, end


def _check_tiling(layout, data_len):
    """The tensors must cover the data section exactly once, in some order (no gaps, no overlaps)."""
    pos = 0
    for name, (_, _, begin, end) in sorted(layout.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin != pos:
            raise _Malformed(f"'{name}' starts at byte {begin:,} of the data but the tensors before it end "
                             f"at byte {pos:,} (tensors must follow each other without gaps or overlaps)")
        pos = end
    if pos != data_len:
        raise _Malformed(f"the tensors cover {pos:,} of the {data_len:,} data bytes")


def decode(raw, path, crc_check: bool = False, op: str = "load_checkpoint"):
    """Parse safetensors bytes (bytes, bytearray or memoryview) into ({name: ndarray}, {name: str});
    raise CheckpointError if anything is broken (see the module docstring for what is checked).

    Returned arrays own writable copies of their bytes (nothing is memory-mapped or shared with
    `raw`, so the file and the buffer can go away afterwards).
    """
    buf = memoryview(raw).cast("B") if not isinstance(raw, (bytes, bytearray)) else memoryview(raw)
    size = len(buf)
    if size < 8:
        raise CheckpointError(op, path, f"is too short to be a safetensors file ({size} bytes; "
                              "the header length alone takes 8)")
    header_len = int.from_bytes(buf[:8], "little")
    if header_len > size - 8:
        raise CheckpointError(op, path, f"declares a {header_len}-byte header but only {size - 8} "
                              "bytes follow: the file is truncated or is not a safetensors file")
    if header_len > MAX_HEADER_BYTES:
        raise CheckpointError(op, path, f"is not a valid safetensors file: it declares a header of "
                              f"{header_len:,} bytes; at most {MAX_HEADER_BYTES:,} are accepted")
    try:
        header = untrusted_files.parse_json(bytes(buf[8:8 + header_len]), "the safetensors header", str(path))
    except untrusted_files.UntrustedFileError as e:
        raise CheckpointError(op, path, f"is not a valid safetensors file: its header is not "
                              f"{e.expected} ({e.got})") from None
    data = buf[8 + header_len:]
    try:
        if not isinstance(header, dict):
            raise _Malformed(f"the header is a JSON {type(header).__name__}, not an object")
        metadata = header.pop("__metadata__", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise CheckpointError(op, path, "has a '__metadata__' entry that is not a map of strings")
        layout = {name: _entry_layout(name, info, len(data)) for name, info in header.items()}
        _check_tiling(layout, len(data))
    except _Malformed as e:
        raise CheckpointError(op, path, f"is not a valid safetensors file: {e}") from None

    tensors = {}
    for name, (code, shape, begin, end) in layout.items():
        if code not in CODE_TO_DTYPE:
            raise CheckpointError(op, path, f"stores '{name}' as {code}, a dtype minispore does not support "
                                  f"(supported: {', '.join(CODE_TO_DTYPE)})")
        if metadata.get(name) == "Int4":
            raise CheckpointError(op, path, f"stores '{name}' as MindSpore's packed Int4 (qint4x2), "
                                  "which minispore does not support")
        dt = CODE_TO_DTYPE[code].np
        # one copy out of the file's buffer: aligned, writable, owned by the array
        tensors[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(shape).copy()

    strings = {k[len(STR_PREFIX):]: v for k, v in metadata.items() if k.startswith(STR_PREFIX)}
    clash = sorted(set(strings) & set(tensors))
    if clash:
        raise CheckpointError(op, path, f"stores both a tensor and a string under the names {clash}")

    if crc_check:
        _verify_crc(metadata, tensors, strings, path, op)
    return tensors, strings


def _verify_crc(metadata, tensors, strings, path, op):
    if "crc_num" not in metadata and any(k.startswith("crc") for k in metadata):
        # a file saved with crc_check=True holds both keys; one without the other is a damaged header,
        # and reading it as "saved unchecked" would skip the very check that would catch the damage
        raise CheckpointError(op, path, f"has crc metadata {sorted(k for k in metadata if k.startswith('crc'))} "
                              "but no 'crc_num'; the header is damaged")
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
