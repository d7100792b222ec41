"""Damaged and hostile versions of a real training checkpoint, one at a time, reproducibly.

`make_mutant(index, kind, seed, run_dir, outside_dir)` changes the fresh copy of a run in `run_dir`
(`latest` + `ckpt-NNNNNN/{model.safetensors, state.json}`, as `minispore train` wrote it) in one
way drawn from `random.Random(f"{seed}-{index}")`, and says what it did. The kinds:

* **truncation** of the weights file or of state.json at a random offset (a quarter of the cuts
  fall inside the safetensors header, where parsers are most fragile);
* **bit flips**: 1-3 random bits of the weights header, of the weights data or of state.json;
* **hostile safetensors headers**, written on purpose: a header length near 2**64, offsets past
  the end, backwards or overlapping, dtype codes that do not exist or have another size, shapes
  with huge or negative dimensions or a product past 2**64, JSON nested 100,000 deep, a header
  that is not an object, invalid UTF-8, duplicate keys, removed or extra tensors. Most are
  *re-signed* (the sha256 that state.json records is recomputed) so the parser itself is reached
  instead of the checksum stopping everything first;
* **hostile state.json**: deep nesting, huge and negative numbers, wrong types for every field
  the loader reads, a sampler or RNG state that cannot exist, a manifest that lies;
* **the file system**: a FIFO, a symlink to /dev/zero, a symlink out of the run directory, a
  symlink loop, a dangling link, a directory, an empty file or a huge sparse file in place of one
  of the files, and `latest` pointing outside the run.

`Mutant.legal` marks a mutant that is a well-formed checkpoint holding *other legal values* (a
header padded with spaces, a file saved without a checksum): loading it is not silent corruption,
so a load that returns the changed values counts as ok. For every other mutant a load that returns
anything but the original values is a wrong result.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import struct

MODEL, STATE, LATEST = "model.safetensors", "state.json", "latest"

# kind -> share of the mutants (largest-remainder rounding keeps the total exact)
KIND_SHARES = {
    "truncate weights": 0.12, "truncate state.json": 0.06, "bit flips in the weights header": 0.12,
    "bit flips in the weights data": 0.08, "bit flips in state.json": 0.16, "hostile safetensors header": 0.22,
    "hostile state.json": 0.16, "file system": 0.08,
}
# which public loading path reads each kind (cycled through by index)
PATHS_FOR = {kind: ("manager", "generate", "load_checkpoint") if "weights" in kind or "safetensors" in kind
             else ("manager", "generate") for kind in KIND_SHARES}
PATHS_FOR["file system"] = ("manager", "generate", "load_checkpoint")


@dataclasses.dataclass
class Mutant:
    index: int
    kind: str
    what: str                    # a description of the change, for the report
    path: str                    # the loading path: "manager" | "generate" | "load_checkpoint"
    legal: bool = False          # well-formed with other legal values: loading the change is fine


def schedule(n: int) -> list[str]:
    """The kind of each of `n` mutants, in an interleaved order (so a short run sees every kind)."""
    quotas = {k: int(n * s) for k, s in KIND_SHARES.items()}
    rest = sorted(KIND_SHARES, key=lambda k: -(n * KIND_SHARES[k] - quotas[k]))
    for k in rest[:n - sum(quotas.values())]:
        quotas[k] += 1
    kinds, left = [], dict(quotas)
    while len(kinds) < n:
        for k in KIND_SHARES:
            if left[k]:
                kinds.append(k)
                left[k] -= 1
    return kinds


def copy_run(base_run: str, run_dir: str) -> None:
    """A fresh, writable copy of the base run (its `latest` and the checkpoint it names)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    name = open(os.path.join(base_run, LATEST), encoding="utf-8").read().strip()
    os.makedirs(os.path.join(run_dir, name))
    for f in (MODEL, STATE):
        shutil.copyfile(os.path.join(base_run, name, f), os.path.join(run_dir, name, f))
    shutil.copyfile(os.path.join(base_run, LATEST), os.path.join(run_dir, LATEST))


def ckpt_dir(run_dir: str) -> str:
    return os.path.join(run_dir, open(os.path.join(run_dir, LATEST), encoding="utf-8").read().strip())


# ---------------------------------------------------------------------------------------------
# the safetensors file as (header dict, data bytes), and back
def read_weights(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:], raw


def write_raw(path, header_bytes: bytes, data: bytes, declared_len: int | None = None):
    n = len(header_bytes) if declared_len is None else declared_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n % 2**64) + header_bytes + data)


def resign(ckpt: str) -> None:
    """Make state.json agree with the (changed) weights file: recompute the sha256 it records, and
    state.json's checksum of itself (see `write_state`)."""
    state_path = os.path.join(ckpt, STATE)
    try:
        state = json.load(open(state_path, encoding="utf-8"))
    except (ValueError, OSError):
        return
    if not isinstance(state, dict):
        return
    state["model_sha256"] = hashlib.sha256(open(os.path.join(ckpt, MODEL), "rb").read()).hexdigest()
    write_state(state_path, state)


STATE_CHECKSUM = "state_sha256"


def state_checksum(state: dict) -> str:
    """The checksum a checkpoint's state.json carries of itself (checkpoint format 2, documented in
    minispore/train/checkpoint_manager.py): sha256 of the canonical JSON of every other field -
    `json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)`
    as ASCII. Recomputed here from that description, not with minispore's function."""
    body = {k: v for k, v in state.items() if k != STATE_CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_state(path, state: dict, text: str | None = None) -> None:
    """Write state.json (or `text` verbatim). A state that carries a self-checksum gets it
    recomputed, so a deliberately edited state reaches the loader's later checks instead of being
    refused by the checksum alone; the checksum's own protection is what the bit flips test."""
    if text is None:
        if isinstance(state, dict) and STATE_CHECKSUM in state:
            state = {**state, STATE_CHECKSUM: state_checksum(state)}
        text = json.dumps(state, indent=1, allow_nan=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------
def _truncate(path, rnd, header_end=None):
    size = os.path.getsize(path)
    if header_end and rnd.random() < 0.25:
        cut = rnd.randrange(0, header_end)
    else:
        cut = rnd.randrange(0, size)
    with open(path, "r+b") as f:
        f.truncate(cut)
    return f"cut to {cut} of {size} bytes"


def _flip(path, rnd, lo, hi):
    data = bytearray(open(path, "rb").read())
    flips = []
    for _ in range(rnd.randint(1, 3)):
        pos, bit = rnd.randrange(lo, hi), rnd.randrange(8)
        data[pos] ^= 1 << bit
        flips.append(f"byte {pos} bit {bit}")
    open(path, "wb").write(bytes(data))
    return ", ".join(flips)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _hostile_header(ckpt, rnd) -> tuple[str, bool, bool]:
    """Rewrite the weights file with a crafted header: (what, legal, resign)."""
    path = os.path.join(ckpt, MODEL)
    header, data, raw = read_weights(path)
    names = [k for k in header if k != "__metadata__"]
    name = rnd.choice(names)
    entry = header[name]
    variant = rnd.choice([
        "huge length", "length past the end", "length zero", "offsets past the end", "offsets backwards",
        "offsets overlap", "negative offset", "offsets not ints", "no offsets", "unknown dtype",
        "dtype of another size", "dtype of the same size", "huge shape", "negative shape", "shape product overflow",
        "transposed shape", "deep JSON", "deep metadata", "not an object", "invalid UTF-8", "duplicate key",
        "tensor removed", "tensor added", "metadata not strings", "crc removed", "crc wrong", "padded header",
        "huge numbers", "NaN in shape",
    ])
    legal, sign = False, rnd.random() < 0.8
    h = json.loads(json.dumps(header))
    e = h[name]
    body = None
    declared = None
    if variant == "huge length":
        declared = rnd.choice([2**64 - 1, 2**63, 2**63 - 1, 2**40])
    elif variant == "length past the end":
        declared = len(json.dumps(h).encode()) + rnd.randint(1, len(data) + 64)
    elif variant == "length zero":
        declared = 0
    elif variant == "offsets past the end":
        e["data_offsets"] = [e["data_offsets"][0], len(data) + rnd.randint(1, 10**6)]
    elif variant == "offsets backwards":
        e["data_offsets"] = [e["data_offsets"][1], e["data_offsets"][0]]
    elif variant == "offsets overlap":
        other = header[rnd.choice(names)]
        e["data_offsets"] = list(other["data_offsets"])
    elif variant == "negative offset":
        e["data_offsets"] = [-rnd.randint(1, 4096), e["data_offsets"][1]]
    elif variant == "offsets not ints":
        e["data_offsets"] = rnd.choice([[0.5, 4096], ["0", "4096"], None, [0], [0, 1, 2], {"a": 1}])
    elif variant == "no offsets":
        del e["data_offsets"]
    elif variant == "unknown dtype":
        e["dtype"] = rnd.choice(["F33", "", "f32", "float32", "C64", "F8_E4M3", "Q4", 7, None, ["F32"]])
    elif variant == "dtype of another size":
        e["dtype"] = rnd.choice(["F64", "F16", "BF16", "I8", "U8", "BOOL", "I64"])
    elif variant == "dtype of the same size":
        e["dtype"] = rnd.choice(["I32", "U32"])
    elif variant == "huge shape":
        e["shape"] = [2**40, 2**40]
    elif variant == "negative shape":
        e["shape"] = [-1] + list(e["shape"][1:]) if e["shape"] else [-1]
    elif variant == "shape product overflow":
        e["shape"] = [2**32, 2**32, 1]
    elif variant == "transposed shape":
        e["shape"] = list(reversed(e["shape"])) if len(e["shape"]) > 1 else [1] + list(e["shape"])
    elif variant == "deep JSON":
        body = ('{"__metadata__": {"format": "ms"}, "x": ' + _deep(rnd.choice([1000, 100000])) + "}").encode()
    elif variant == "deep metadata":
        h["__metadata__"]["format"] = json.loads(_deep(50))
        body = json.dumps(h).encode()[:-1] + b', "deep": ' + _deep(100000).encode() + b"}"
    elif variant == "not an object":
        body = rnd.choice([b"[]", b'"F32"', b"3", b"null", b"[{}]"])
    elif variant == "invalid UTF-8":
        body = json.dumps(h).encode().replace(b'"F32"', b'"F\xff2"', 1)
    elif variant == "duplicate key":
        text = json.dumps(h)
        body = (text[:-1] + ", " + json.dumps(name) + ": " + json.dumps({**entry, "shape": [1]}) + "}").encode()
    elif variant == "tensor removed":
        del h[name]
    elif variant == "tensor added":
        h["extra.weight"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    elif variant == "metadata not strings":
        h["__metadata__"]["crc_num"] = rnd.choice([123, None, ["1"], {"a": "b"}])
    elif variant == "crc removed":
        h["__metadata__"].pop("crc_num", None)
        h["__metadata__"].pop("crc_layout", None)
        legal = True             # a file saved without crc_check: loaded unchecked, with a warning
    elif variant == "crc wrong":
        h["__metadata__"]["crc_num"] = str(rnd.randrange(2**32))
    elif variant == "padded header":
        body = json.dumps(h).encode() + b" " * rnd.randint(1, 64)      # the spec allows trailing spaces
        legal = True
    elif variant == "huge numbers":
        e["shape"] = [10**400] if rnd.random() < 0.5 else e["shape"]
        e["data_offsets"] = [0, 10**400]
    elif variant == "NaN in shape":
        body = json.dumps(h).encode().replace(json.dumps(e["shape"]).encode(), b"[NaN, 1]", 1)
    if body is None:
        body = json.dumps(h).encode()
    write_raw(path, body, data, declared)
    if sign:
        resign(ckpt)
    return f"{variant} ('{name}'){', re-signed' if sign else ''}", legal, sign


def _hostile_state(ckpt, rnd) -> tuple[str, bool]:
    """Rewrite state.json with a crafted value (re-signed where the format checksums it)."""
    path = os.path.join(ckpt, STATE)
    state = json.load(open(path, encoding="utf-8"))
    variant = rnd.choice([
        "deep JSON", "deep extra_state", "huge step", "negative step", "step not an int", "step changed",
        "format_version huge", "format_version not an int", "sha not a string", "tensors not a dict",
        "manifest dtype", "manifest shape", "manifest missing a tensor", "manifest extra tensor",
        "net_params renamed", "optimizer_params dropped", "rng_state garbage", "rng_state huge",
        "sampler counter implausible", "sampler negative", "sampler wrong types", "sampler other seed",
        "config model changed", "config tokenizer changed", "extra_state not a dict", "history changed",
        "top level a list", "huge string", "NaN everywhere",
    ])
    legal = False
    text = None
    if variant == "deep JSON":
        text = _deep(rnd.choice([1000, 100000]))
    elif variant == "deep extra_state":
        state["extra_state"]["deep"] = "__DEEP__"
        if STATE_CHECKSUM in state:          # (over the placeholder: the parse is what is tested)
            state[STATE_CHECKSUM] = state_checksum(state)
        text = json.dumps(state).replace('"__DEEP__"', _deep(100000))
    elif variant == "huge step":
        state["step"] = rnd.choice([10**100, 2**63, 2**64 + 1])
        legal = True                     # an int >= 0, the domain CheckpointManager.save documents
    elif variant == "negative step":
        state["step"] = -rnd.randint(1, 10**6)
    elif variant == "step not an int":
        state["step"] = rnd.choice([300.5, "300", None, True, [300]])
    elif variant == "step changed":
        state["step"] = state["step"] - rnd.randint(1, 5)
        legal = True                     # a consistent file that says another step
    elif variant == "format_version huge":
        state["format_version"] = rnd.choice([2**70, 999])
    elif variant == "format_version not an int":
        state["format_version"] = rnd.choice(["1", 1.0, None, -1])
    elif variant == "sha not a string":
        state["model_sha256"] = rnd.choice([None, 0, ["x"], "0" * 64])
    elif variant == "tensors not a dict":
        state["tensors"] = rnd.choice([[], "x", None, {"a": 1}])
    elif variant == "manifest dtype":
        k = rnd.choice(list(state["tensors"]))
        state["tensors"][k]["dtype"] = rnd.choice(["Float64", "Int32", "nonsense", 3, None])
    elif variant == "manifest shape":
        k = rnd.choice(list(state["tensors"]))
        state["tensors"][k]["shape"] = rnd.choice([[1], [-1], [2**40], "x", None, [[1]]])
    elif variant == "manifest missing a tensor":
        del state["tensors"][rnd.choice(list(state["tensors"]))]
    elif variant == "manifest extra tensor":
        state["tensors"]["ghost.weight"] = {"dtype": "Float32", "shape": [2]}
    elif variant == "net_params renamed":
        i = rnd.randrange(len(state["net_params"]))
        state["net_params"][i] = state["net_params"][i] + ".x"
    elif variant == "optimizer_params dropped":
        state["optimizer_params"] = state["optimizer_params"][1:]
    elif variant == "rng_state garbage":
        state["rng_state"] = rnd.choice([None, "x", [], {"bit_generator": "MT19937"}, {"bit_generator": "Nope"},
                                         {"bit_generator": "PCG64", "state": {"state": "x", "inc": 1}}])
    elif variant == "rng_state huge":
        state["rng_state"]["state"]["state"] = 2**200
    elif variant == "sampler counter implausible":
        drawn = rnd.choice([10**30, -5, 2**64])
        state["sampler_state"]["batches_drawn"] = drawn
        legal = drawn >= 0               # the sampler documents an int >= 0; the generator state decides
    elif variant == "sampler negative":
        state["sampler_state"][rnd.choice(["batch_size", "block_size", "data_len"])] = -rnd.randint(1, 100)
    elif variant == "sampler wrong types":
        state["sampler_state"] = rnd.choice([None, [], "x", {"seed": "a"}, {**state["sampler_state"],
                                                                               "bit_generator": "PCG64"}])
    elif variant == "sampler other seed":
        state["sampler_state"]["seed"] = state["sampler_state"]["seed"] + 1
        legal = True                     # a seed is informational once the generator state is saved
    elif variant == "config model changed":
        state["config"]["model"]["dim"] = rnd.choice([64, 0, -1, "32", 2**40])
    elif variant == "config tokenizer changed":
        tok = state["config"]["tokenizer"]
        key = next(iter(tok))
        tok[key] = rnd.choice([None, "", [], "ab", 5])
    elif variant == "extra_state not a dict":
        state["extra_state"] = rnd.choice([[], "x", None, 1])
    elif variant == "history changed":
        hist = state["extra_state"]["history"]["train_loss"]
        hist[rnd.randrange(len(hist))] = rnd.choice([0.0, -1.0, 1e308])
        legal = True                     # well-formed: another history is a legal value
    elif variant == "top level a list":
        text = json.dumps([state])
    elif variant == "huge string":
        state["minispore_version"] = "x" * rnd.choice([10**6, 10**7])
        legal = True
    elif variant == "NaN everywhere":
        state["step"] = float("nan")
        state["sampler_state"]["batches_drawn"] = float("inf")
    write_state(path, state, text)
    return variant, legal


def _file_system(run_dir, ckpt, outside, rnd) -> tuple[str, bool, str]:
    """Put something that is not a checkpoint file in place of one: (what, legal, path hint)."""
    target = rnd.choice([MODEL, STATE, LATEST])
    path = os.path.join(run_dir, LATEST) if target == LATEST else os.path.join(ckpt, target)
    variant = rnd.choice(["FIFO", "symlink to /dev/zero", "symlink out of the run", "symlink loop",
                          "dangling symlink", "directory", "empty file", "huge sparse file", "latest escapes",
                          "checkpoint dir linked out of the run"])
    legal = False
    if variant == "latest escapes":
        target, path = LATEST, os.path.join(run_dir, LATEST)
        os.remove(path)
        escaped = os.path.join(outside, "ckpt-escaped")
        if not os.path.exists(escaped):
            shutil.copytree(ckpt, escaped)
        with open(path, "w") as f:
            f.write(rnd.choice(["../outside/ckpt-escaped", escaped, "../../../../../../etc", "/dev/zero"]) + "\n")
        return f"latest names a path outside the run", legal, target
    if variant == "checkpoint dir linked out of the run":
        escaped = os.path.join(outside, "ckpt-linked")
        if not os.path.exists(escaped):
            shutil.copytree(ckpt, escaped)
        shutil.rmtree(ckpt)
        os.symlink(escaped, ckpt)
        return "the checkpoint directory is a symlink to a copy outside the run", legal, MODEL
    if os.path.lexists(path):
        os.remove(path)
    if variant == "FIFO":
        os.mkfifo(path)
    elif variant == "symlink to /dev/zero":
        os.symlink("/dev/zero", path)
    elif variant == "symlink out of the run":
        copy = os.path.join(outside, f"copy-{target}")
        if not os.path.exists(copy):
            src = os.path.join(outside, "pristine", target)
            shutil.copyfile(src, copy)
        os.symlink(copy, path)
    elif variant == "symlink loop":
        os.symlink(os.path.basename(path), path)          # (relative: the same in every copy)
    elif variant == "dangling symlink":
        os.symlink(os.path.join(outside, "does-not-exist"), path)
    elif variant == "directory":
        os.mkdir(path)
    elif variant == "empty file":
        open(path, "wb").close()
    elif variant == "huge sparse file":
        with open(path, "wb") as f:
            f.truncate(rnd.choice([16, 64]) << 30)          # no disk used: holes read as zeros
    return f"{variant} in place of {target}", legal, target


def make_mutant(index: int, kind: str, seed: int, run_dir: str, outside: str) -> Mutant:
    """Apply mutant `index` (of `kind`) to the fresh copy of the run in `run_dir`."""
    rnd = random.Random(f"{seed}-{index}")
    ckpt = ckpt_dir(run_dir)
    paths = PATHS_FOR[kind]
    load_path = paths[index % len(paths)]
    model_path, state_path = os.path.join(ckpt, MODEL), os.path.join(ckpt, STATE)
    legal = False
    if kind == "truncate weights":
        header_end = 8 + struct.unpack("<Q", open(model_path, "rb").read(8))[0]
        what = _truncate(model_path, rnd, header_end)
    elif kind == "truncate state.json":
        what = _truncate(state_path, rnd)
    elif kind == "bit flips in the weights header":
        header_end = 8 + struct.unpack("<Q", open(model_path, "rb").read(8))[0]
        what = _flip(model_path, rnd, 0, header_end)
    elif kind == "bit flips in the weights data":
        header_end = 8 + struct.unpack("<Q", open(model_path, "rb").read(8))[0]
        what = _flip(model_path, rnd, header_end, os.path.getsize(model_path))
    elif kind == "bit flips in state.json":
        what = _flip(state_path, rnd, 0, os.path.getsize(state_path))
    elif kind == "hostile safetensors header":
        what, legal, _ = _hostile_header(ckpt, rnd)
    elif kind == "hostile state.json":
        what, legal = _hostile_state(ckpt, rnd)
    elif kind == "file system":
        what, legal, target = _file_system(run_dir, ckpt, outside, rnd)
        if target != MODEL and load_path == "load_checkpoint":
            load_path = "manager"               # load_checkpoint reads only the weights file
    else:
        raise ValueError(f"unknown mutant kind {kind!r}")
    return Mutant(index, kind, what, load_path, legal)


__all__ = ["KIND_SHARES", "Mutant", "schedule", "copy_run", "make_mutant", "read_weights", "resign"]
