"""The compile cache: captured graphs stored on disk, so a later process skips capture.

    ms.set_context(enable_compile_cache=True, compile_cache_path="./cache.ms")
    # or, with lower priority (MindSpore's variables): MS_COMPILER_CACHE_ENABLE=1 MS_COMPILER_CACHE_PATH=...

Entries live in `<path>/rank_<RANK_ID>/graph_cache/` (MindSpore's layout; RANK_ID defaults to 0):
`<key>.json` (a header line, then the graph) and, when the graph holds constant tensors,
`<key>.bin` (their raw bytes; dtype, shape and offset of each are in the JSON).

**The rule** (written once, for memory and disk together, in graph/guards/rule.py; what follows
is its disk column in full). A second process must never get the first process's numbers. Every value a captured
graph depends on is therefore, in this order of preference, (1) *in the key*, (2) *a guard stored
in the entry and checked when it is loaded*, or (3) a reason to *refuse to cache* the graph
(counted as `uncacheable` and logged with the reason) - never trusted. Concretely:

1. **The key** is a SHA-256 of everything that can be read before capturing (`call_token`):
   * the minispore, Python and NumPy versions and this file format's version; the jit settings
     (capture mode, jit level, fullgraph, options);
   * the call's arguments (`call_token`, key.py): tensor shapes and dtypes (their values are read by reference when the
     graph runs), Python constants by type and value;
   * the function: its code (bytecode, constants and names, nested functions included), defaults,
     closure variables, and every global its code names (guards/stable.py); of a container the
     code only appends to (`log.append(...)`, cache.write_only_names) just its type. Functions
     reached that way are described the same way, so a `value_and_grad` wrapper leads to the loss
     and a helper to the globals *it* names. Of a global module, the attributes the code names
     (`config.SCALE`); of a global class, its attributes the code names (`Config.SCALE`);
   * objects by their state, not their identity: a Cell as every sub-cell's class, plain
     attributes, every other attribute (containers, arrays, configs, functions, plain objects) and
     its parameters' names, shapes and dtypes, plus each user Cell class's class attributes and
     methods (code, defaults, closures and the globals they name: a helper method reading a
     global); any other object as its class and its `__dict__`, all of it;
   * **contents, not sizes**: lists, tuples, dicts and sets element by element, in order, and NumPy
     arrays by a SHA-256 of their bytes whatever their size (hashing runs at about a GB/s, once per
     compile).
   Functions of the standard library and installed packages are described by name (their code is
   fixed by the environment); minispore's own by the version, plus their closures.
2. **Guards stored in the entry**, for what is only known once the capture ran; a load that finds
   one no longer holds counts the entry *stale* (recaptured and rewritten) and a loaded entry keeps
   them as its in-memory guards:
   * the environment variables read while capturing (`os.environ[...]`, `.get`, `os.getenv`, `in`),
     recorded by every capture mode (trace/environ_reads.py) as `{"environ": [[name, value or
     null], ...]}`;
   * the globals the ast mode's interpreted code read (`{"globals": [[module, name, token]]}`),
     those the key already describes marked "key", and containers the code only appends to
     (`log.append(...)`: their contents cannot have shaped the graph) marked "written";
   * the SHA-256 of every source file the graph's nodes came from (the model's files).
3. **Uncacheable**: a graph with breaks (bytecode), a guard the format cannot express (another
   mode's Python callable), an attribute or object of a type with no description (no `__dict__`:
   a lock, a random generator, an array of Python objects), objects nested more than
   `OBJECT_DEPTH` levels below the call, more than `MAX_KEY_ITEMS` container elements or
   `MAX_KEY_ARRAY_BYTES` of arrays in one key, a source file that is not a regular file.
   Such a function still runs, compiled in memory, every time.

Known limits (what no key or guard here sees; keep such reads out of captured code): the values
of a *tensor* read as Python numbers during the capture (`float(param.asnumpy()[0])` on a
Parameter - tensors are in the key by shape and dtype, their values change with training and the
graph reads them by reference), `os.environb`, and C code calling getenv().

**Format** (safe, no code): JSON. Primitives are stored by NAME and looked up in the registry;
attributes are encoded explicitly by type (a JSON array is a tuple, `{"l": [...]}` a list, `{"dt": "Float32"}` a dtype,
`{"sl": [0, 4, 1]}` a slice ...) - an attribute of any other type makes the graph uncacheable, it is
never pickled. Captured tensors are stored as *paths* from the call's arguments, globals and
closures (`closure gf -> closure fn -> self -> param layers.0.attention.wq.weight`), resolved
again in the new process, so Parameters are shared as before; constant tensors built during the
capture (RoPE tables, masks) are stored as raw bytes in the .bin file.

**Never trusted**: a load checks the format and versions, the key, the SHA-256 of the payload and
of the .bin, the source files, the guards, every primitive name, and that each captured tensor's
path leads to a tensor of the recorded shape and dtype. Every file is opened as a regular file of
bounded size only (common/untrusted_files.py): an entry that is a FIFO, a device, a directory, or
larger than `MAX_ENTRY_BYTES`, is corrupt - never a read that blocks. Any failure - or a JSON
error, a truncated file - counts as *stale* or *corrupt*, is logged on
`logging.getLogger("minispore.jit")`, and the function is captured again and the entry rewritten
(through a fresh temporary file and a rename). A cache directory that cannot be written is
reported once (a RuntimeWarning) and bypassed.

Counters (`stats()`): hits, misses, stores, stale, corrupt, uncacheable, captures (real captures
run by jit while the cache is on) - the tests count captures in a second process with them.

**Modules**: key.py (the key, and the guards stored in an entry), serialize.py (the format: a
CaptureResult as JSON and back), files.py (settings, counters, storing and loading an entry).
The rendering hashed into the key is guards/stable.py.
"""
from __future__ import annotations

# (the limits are read where they are defined - guards/stable.py, files.py - so a test that
# changes one patches it there, not here)
from ..guards.stable import MAX_KEY_ARRAY_BYTES, MAX_KEY_ITEMS, OBJECT_DEPTH, Uncacheable, code_hash, stable_token
from .files import (MAX_ENTRY_BYTES, MAX_SOURCE_BYTES, cache_dir, count_capture, enabled, load, logger,
                    reset_stats, stats, store)
from .key import FORMAT, Stale, call_token, key_of
from .serialize import decode, decode_result, encode, encode_result, resolve, tensor_paths

__all__ = ["enabled", "cache_dir", "load", "store", "stats", "reset_stats", "count_capture", "stable_token",
           "call_token", "key_of", "code_hash", "encode", "decode", "encode_result", "decode_result",
           "tensor_paths", "resolve", "Uncacheable", "Stale", "FORMAT", "MAX_KEY_ITEMS", "MAX_KEY_ARRAY_BYTES",
           "OBJECT_DEPTH", "MAX_ENTRY_BYTES", "MAX_SOURCE_BYTES", "logger"]
