"""MindSpore's own `.ckpt` format: protocol buffers, written and read by hand.

The schema (`mindspore/ccsrc/utils/checkpoint.proto`, proto2)::

    message Checkpoint {
      message Value {
        required string tag = 1;                      // parameter name
        oneof value { TensorProto tensor = 2; MapTensorProto maptensor = 3; }
      }
      repeated Value value = 1;
    }
    message TensorProto {
      repeated int64 dims = 1;                        // shape; [] for a scalar
      required string tensor_type = 2;                // "Float32", "BFloat16", ... or "str"
      required bytes tensor_content = 3;              // raw little-endian C-order bytes
    }

MindSpore serializes one `Checkpoint` message *per parameter* and concatenates them. Protobuf's
merge rule (a repeated field seen again is appended) makes the concatenation parse as a single
`Checkpoint`, so the reader below just reads `value` entries until the bytes run out. A parameter
above `SLICE_SIZE` KB is split into several entries with the same tag, each carrying the full dims
and the next `SLICE_SIZE` KB of its raw bytes (MindSpore's `_write_parameter_bytes_data`, the path a
synchronous save of Tensors takes; its array path splits along axis 0 instead). The reader joins the
contents of consecutive entries with the same tag, so it reads either kind of split. For the same
values and names, the bytes written here equal MindSpore 2.10's (tests/fixtures/mindspore/ckpt).

Strings (from `append_dict`) are stored with type "str", dims [0] and NumPy's unicode bytes
(UTF-32, 4 bytes per character). `crc_check=True` appends `b"crc_num"` and the crc32 of everything
before it as 10 big-endian bytes.

The wire format needs only two encodings: a *varint* (7 bits per byte, high bit = "more bytes
follow"; negative int64 values take 10 bytes) and *length-delimited* fields (key, varint length,
payload). Each field starts with a key `field_number << 3 | wire_type`.
"""
from __future__ import annotations

import zlib

import numpy as np

from ..common import dtype as mstype
from .safetensors_codec import CheckpointError

SLICE_SIZE = 512 * 1024          # KB: parameters larger than this are split (MindSpore's constant)
CRC_MARK = b"crc_num"

VARINT, I64, LEN, I32 = 0, 1, 2, 5        # wire types (3 and 4, "groups", are obsolete)

NAME_TO_DTYPE = {d.name: d for d in mstype.ALL_DTYPES}   # "Float32" -> mstype.float32, ...
# MindSpore tensor types minispore may lack (Int4 is MindSpore's packed qint4x2)
KNOWN_UNSUPPORTED = tuple(n for n in ("UInt16", "UInt32", "UInt64", "Int4") if n not in NAME_TO_DTYPE)


# -- encoding ------------------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64                      # int64 two's complement: always 10 bytes
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, embedded messages)."""
    return _varint(number << 3 | LEN) + _varint(len(payload)) + payload


def _entry(tag: str, dims, tensor_type: str, content: bytes) -> bytes:
    """One serialized `Checkpoint` holding one `Value`."""
    tensor = b"".join(_varint(1 << 3 | VARINT) + _varint(int(d)) for d in dims)   # proto2: unpacked
    tensor += _field(2, tensor_type.encode("utf-8")) + _field(3, content)
    value = _field(1, tag.encode("utf-8")) + _field(2, tensor)
    return _field(1, value)


def encode(items: list, crc_check: bool = False) -> bytes:
    """Serialize [(name, C-contiguous ndarray | str)] in the given order (MindSpore keeps the order of
    `parameters_and_names()` followed by `append_dict`)."""
    chunks = []
    for name, value in items:
        if isinstance(value, str):
            # NumPy's '<U' layout: UTF-32-LE, at least one character ("" is stored as one NUL)
            chunks.append(_entry(name, [0], "str", (value or "\0").encode("utf-32-le")))
            continue
        type_name = mstype.from_numpy_dtype(value.dtype).name
        raw = np.ascontiguousarray(value).tobytes()
        step = 1024 * SLICE_SIZE
        # (an empty tensor still gets one entry; MindSpore's byte loop would write none and lose it)
        for start in range(0, max(len(raw), 1), step):
            chunks.append(_entry(name, value.shape, type_name, raw[start:start + step]))
    body = b"".join(chunks)
    if crc_check:
        body += CRC_MARK + zlib.crc32(body).to_bytes(10, "big")
    return body


# -- decoding ------------------------------------------------------------------------------------
class _Reader:
    """Walks protobuf fields in `buf[pos:end]`; every malformed byte sequence raises ValueError."""

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None):
        self.buf, self.pos = buf, pos
        self.end = len(buf) if end is None else end

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= self.end:
                raise ValueError("a varint runs past the end of its message")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift >= 70:
                raise ValueError("a varint is longer than 10 bytes")

    def fields(self):
        """Yield (field_number, wire_type, value): an int for varints, (start, end) for LEN fields."""
        while self.pos < self.end:
            key = self.varint()
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ValueError("field number 0 is invalid")
            if wire == VARINT:
                yield number, wire, self.varint()
            elif wire == LEN:
                n = self.varint()
                if n > self.end - self.pos:
                    raise ValueError(f"a field claims {n} bytes but only {self.end - self.pos} remain")
                yield number, wire, (self.pos, self.pos + n)
                self.pos += n
            elif wire in (I64, I32):                      # unknown fixed-size field: skip it
                size = 8 if wire == I64 else 4
                if size > self.end - self.pos:
                    raise ValueError("a fixed-size field runs past the end of its message")
                self.pos += size
            else:
                raise ValueError(f"wire type {wire} is invalid")


def _int64(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _parse_tensor(buf, start, end, tensor):
    """Merge one TensorProto into `tensor` (protobuf merge: repeated fields append, others overwrite)."""
    r = _Reader(buf, start, end)
    for number, wire, val in r.fields():
        if number == 1 and wire == VARINT:
            tensor["dims"].append(_int64(val))
        elif number == 1 and wire == LEN:                 # a packed encoding of `dims` is legal too
            sub = _Reader(buf, *val)
            while sub.pos < sub.end:
                tensor["dims"].append(_int64(sub.varint()))
        elif number == 2 and wire == LEN:
            tensor["type"] = bytes(buf[val[0]:val[1]]).decode("utf-8")
        elif number == 3 and wire == LEN:
            tensor["content"] = buf[val[0]:val[1]]
        elif number in (1, 2, 3):
            raise ValueError(f"TensorProto field {number} has the wrong wire type {wire}")


def _parse_value(buf, start, end):
    r = _Reader(buf, start, end)
    tag, tensor, has_map = None, {"dims": [], "type": None, "content": None}, False
    for number, wire, val in r.fields():
        if number == 1 and wire == LEN:
            tag = bytes(buf[val[0]:val[1]]).decode("utf-8")
        elif number == 2 and wire == LEN:
            _parse_tensor(buf, val[0], val[1], tensor)
        elif number == 3 and wire == LEN:
            has_map = True
        elif number in (1, 2, 3):
            raise ValueError(f"Value field {number} has the wrong wire type {wire}")
    if tag is None:
        raise ValueError("a Value has no 'tag' (parameter name)")
    if has_map:
        raise ValueError(f"'{tag}' is a MapParameter (MapTensorProto), which minispore does not support")
    if tensor["type"] is None or tensor["content"] is None:
        raise ValueError(f"'{tag}' lacks its required tensor_type or tensor_content")
    return tag, tensor


def _to_value(tag, dims, type_name, chunks: list):
    """The value of one parameter from the slices of the file holding its content (memoryviews)."""
    size = sum(len(c) for c in chunks)
    if type_name == "str":
        if size % 4:
            raise ValueError(f"string '{tag}' has {size} bytes, not a multiple of 4 (UTF-32)")
        return str(b"".join(chunks), "utf-32-le").rstrip("\0")
    if type_name not in NAME_TO_DTYPE:
        why = "a dtype minispore does not support" if type_name in KNOWN_UNSUPPORTED else "an unknown dtype"
        raise ValueError(f"'{tag}' has tensor_type {type_name!r}, {why}")
    if any(d < 0 for d in dims):
        raise ValueError(f"'{tag}' has negative dims {dims}")
    dt = NAME_TO_DTYPE[type_name].np
    count = 1
    for d in dims:
        count *= d
    if count * dt.itemsize != size:
        raise ValueError(f"'{tag}' has dims {dims} of {type_name} ({count * dt.itemsize} bytes) "
                         f"but {size} bytes of content")
    # one copy out of the file's buffer (a sliced parameter is joined by that same copy): the array
    # is aligned, writable and owns its memory
    if len(chunks) == 1:
        return np.frombuffer(chunks[0], dtype=dt).reshape(dims).copy()
    return np.frombuffer(bytearray().join(chunks), dtype=dt).reshape(dims)


def decode(raw, path, crc_check: bool = False, op: str = "load_checkpoint") -> list:
    """Parse `.ckpt` bytes (bytes, bytearray or memoryview) into [(name, ndarray | str)] in file
    order; CheckpointError if broken. The fields are read through a memoryview, so the only copy
    of a tensor's bytes is the array returned for it."""
    raw = memoryview(raw).cast("B") if isinstance(raw, memoryview) else memoryview(raw)
    body = raw
    if raw[-17:-10] == CRC_MARK:
        body = raw[:-17]
        if crc_check and zlib.crc32(body) != int.from_bytes(raw[-10:], "big"):
            raise CheckpointError(op, path, "failed the crc check; the file is damaged")
    elif crc_check:
        import warnings
        warnings.warn(f"For '{op}', the ckpt file '{path}' does not contain a crc code; it is loaded "
                      "unchecked.", stacklevel=4)
    try:
        entries = []                                   # [tag, dims, type, [content chunks]]
        for number, wire, val in _Reader(body).fields():
            if number != 1 or wire != LEN:
                continue                               # unknown top-level field: skipped, as protobuf does
            tag, tensor = _parse_value(body, *val)
            if entries and entries[-1][0] == tag:      # a slice of the previous parameter
                entries[-1][1], entries[-1][2] = tensor["dims"], tensor["type"]
                entries[-1][3].append(tensor["content"])
            else:
                entries.append([tag, tensor["dims"], tensor["type"], [tensor["content"]]])
        return [(tag, _to_value(tag, dims, type_name, chunks)) for tag, dims, type_name, chunks in entries]
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(op, path, f"is not a valid MindSpore .ckpt file: {e}") from None


__all__ = ["encode", "decode", "SLICE_SIZE"]
