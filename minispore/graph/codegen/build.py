"""Compile generated C with cffi into an extension module, cached on disk by a hash of its source.

    mod = build({"k_3f2a...": (c_source, cdef_line), ...})      # a KernelModule
    mod.lib.k_3f2a(...)                                         # call a kernel (cffi, API mode)

* **Key**: sha256 of the module's C source, the compiler flags, the CPU's feature flags
  (`-march=native` code must not run on another CPU), the Python ABI tag and cffi's version. The
  compiler's own version is not in the key: a kernel built by an older gcc is still correct.
* **Cache**: `$MINISPORE_CACHE_DIR/kernels`; else, while the compile cache is on
  (`set_context(enable_compile_cache=True, compile_cache_path=...)`, graph/compile_cache/), its
  `rank_<RANK_ID>/kernel_meta` folder (MindSpore's layout); else `$XDG_CACHE_HOME/minispore/kernels`
  or `~/.cache/minispore/kernels`. Each entry is `<name><EXT_SUFFIX>` (the module), `<name>.c` (its
  source, for readers) and `<name>.json` (the key and the sha256 of the module file). A hit loads
  the module with importlib and runs no compiler (`STATS.compiles` counts compiler runs, tests use
  it). An entry whose file does not match its recorded sha256 (truncated, overwritten, half
  written) is reported and rebuilt, never loaded. An unwritable cache directory is reported once
  and a per-process temporary directory is used instead.
* **Compiler**: `$CC` if set, else the compiler Python was built with (`sysconfig`), looked up on
  PATH. Without one `build` raises `NoCompiler` (the fusion pass then runs unfused and warns once);
  a compile error raises `CompileFailed` with the compiler's message.

Flags: `-O3 -march=native` for speed; `-ffp-contract=off` so `a*b + c` is not contracted into a
fused multiply-add (NumPy rounds the product, so must we); `-fno-math-errno` so sqrt/floor/...
become single instructions; `-fopenmp-simd` enables the `#pragma omp simd` loops (vectorization
only, no threads). Where glibc's vector math library (libmvec) exists, the preamble declares its
functions `omp declare simd`, so loops calling exp/tanh/erf vectorize too (about 50x faster than
scalar libm calls).
"""
from __future__ import annotations

import ctypes.util
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import shlex
import shutil
import sys
import sysconfig
import tempfile
import warnings

from ..cache_settings import kernel_meta_dir
from ...ops.c_expr import VECTOR_MATH

FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fopenmp-simd", "-std=gnu99",
         "-Wno-unused-variable", "-Wno-unused-but-set-variable")
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


class NoCompiler(RuntimeError):
    """No C compiler can be found (generated kernels cannot be built)."""


class CompileFailed(RuntimeError):
    """The compiler rejected a generated module; `message` holds its output."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class BuildStats:
    """Counters for tests and benchmarks: compiler runs, disk-cache hits, rebuilt bad entries."""

    def __init__(self):
        self.compiles = 0
        self.disk_hits = 0
        self.rebuilt = 0

    def __repr__(self):
        return f"BuildStats(compiles={self.compiles}, disk_hits={self.disk_hits}, rebuilt={self.rebuilt})"


STATS = BuildStats()
_loaded: dict = {}             # key -> KernelModule (this process)
_warned: set = set()
_fallback_dir = None


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


# -- environment --------------------------------------------------------------------------------------
def cache_dir() -> str:
    """Where compiled kernels live (see the module docstring); created if missing. Falls back to a
    per-process temporary directory (warning once) when it cannot be written."""
    global _fallback_dir
    root = os.environ.get("MINISPORE_CACHE_DIR")
    if root:
        path = os.path.join(root, "kernels")
    elif kernel_meta_dir() is not None:
        path = kernel_meta_dir()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "minispore", "kernels")
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".probe", delete=True)
        probe.close()
        return path
    except OSError as e:
        if _fallback_dir is None:
            _fallback_dir = tempfile.mkdtemp(prefix="minispore-kernels-")
        _warn_once(("cache", path), f"minispore: the kernel cache directory {path} is not writable ({e}); "
                                   f"compiled kernels go to {_fallback_dir} for this process only")
        return _fallback_dir


def find_compiler():
    """The C compiler's path (`$CC`, else Python's build compiler), or None if there is none."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    try:
        exe = shlex.split(cc)[0]
    except (ValueError, IndexError):
        return None
    return shutil.which(exe)


_mvec = None


def has_libmvec() -> bool:
    """Is glibc's vector math library available to link against?"""
    global _mvec
    if _mvec is None:
        _mvec = sys.platform.startswith("linux") and ctypes.util.find_library("mvec") is not None
    return _mvec


_cpu = None


def _cpu_flags() -> str:
    global _cpu
    if _cpu is None:
        flags = ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith(("flags", "Features")):
                        flags = line
                        break
        except OSError:
            pass
        _cpu = platform.machine() + ":" + hashlib.sha256(flags.encode()).hexdigest()[:16]
    return _cpu


def preamble() -> str:
    lines = ["#include <math.h>", "#include <stdint.h>"]
    if has_libmvec():
        lines.append("/* glibc's libmvec has vector versions of these: let `omp simd` loops call them */")
        for fn, arity in VECTOR_MATH.items():          # (the libm functions fused expressions call)
            sig, dsig = ", ".join(["float"] * arity), ", ".join(["double"] * arity)
            lines.append(f"#pragma omp declare simd notinbranch\nfloat {fn}f({sig});")
            lines.append(f"#pragma omp declare simd notinbranch\ndouble {fn}({dsig});")
    return "\n".join(lines) + "\n\n"


def _key(source: str) -> str:
    import cffi
    text = "\n".join((source, " ".join(FLAGS), str(has_libmvec()), _cpu_flags(), EXT_SUFFIX, cffi.__version__))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# -- modules ----------------------------------------------------------------------------------------------
class KernelModule:
    """A loaded extension module of kernels: `lib` (the functions), `ffi` (for `from_buffer`)."""

    def __init__(self, module, path, key):
        self.lib = module.lib
        self.ffi = module.ffi
        self.path = path
        self.key = key

    def __repr__(self):
        return f"<KernelModule {os.path.basename(self.path)}>"


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load(name, path, key):
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return KernelModule(module, path, key)


def _valid_entry(path, meta_path, key) -> bool | None:
    """True: a good entry; None: no entry (or one still being written); False: an entry that must
    not be trusted. The record is written before the module is moved into place, so a module
    without its record was never completed."""
    if not os.path.exists(path) or not os.path.exists(meta_path):
        return None
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        return meta.get("key") == key and meta.get("sha256") == _sha256(path)
    except (OSError, ValueError):
        return False


def _compile(name, source, cdefs, directory):
    """Run cffi (setuptools + the C compiler) in a scratch directory; returns the built file."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("\n".join(cdefs))
    libs = ["m"] + (["mvec"] if has_libmvec() else [])
    ffi.set_source(name, source, extra_compile_args=list(FLAGS), libraries=libs)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=directory)
    log = tempfile.TemporaryFile(mode="w+b")
    try:
        STATS.compiles += 1
        # the compiler writes its errors to file descriptor 2: keep them for the message
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            built = ffi.compile(tmpdir=tmp, verbose=False)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        return built, tmp
    except Exception as e:            # noqa: BLE001 - cffi/setuptools raise several error types
        log.seek(0)
        text = log.read().decode(errors="replace").strip()
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompileFailed(f"{type(e).__name__}: {e}\n{text}".strip()) from None
    finally:
        log.close()


def build(kernels: dict) -> KernelModule:
    """Compile (or load from the cache) one module holding `kernels` (symbol -> (C source, cdef))."""
    symbols = sorted(kernels)
    source = preamble() + "\n\n".join(kernels[s][0] for s in symbols) + "\n"
    key = _key(source)
    mod = _loaded.get(key)
    if mod is not None:
        return mod
    name = f"_minispore_kernels_{key}"
    directory = cache_dir()
    path = os.path.join(directory, name + EXT_SUFFIX)
    meta_path = os.path.join(directory, name + ".json")
    state = _valid_entry(path, meta_path, key)
    if state:
        try:
            mod = _load(name, path, key)
            STATS.disk_hits += 1
            _loaded[key] = mod
            return mod
        except (ImportError, OSError) as e:
            state = False
            reason = f"it does not load ({e})"
    else:
        reason = "its checksum does not match (truncated or overwritten)"
    if state is False:
        warnings.warn(f"minispore: the cached kernel module {path} is corrupted: {reason}; rebuilding it",
                      RuntimeWarning, stacklevel=3)
        STATS.rebuilt += 1
        for p in (path, meta_path):
            try:
                os.remove(p)
            except OSError:
                pass
    if find_compiler() is None:
        raise NoCompiler(f"no C compiler found (CC={os.environ.get('CC') or sysconfig.get_config_var('CC')!r})")
    built, tmp = _compile(name, source, [kernels[s][1] for s in symbols], directory)
    try:
        with open(os.path.join(directory, name + ".c"), "w") as f:
            f.write(source)
        # the record first, then the module (atomically): a reader never sees a module without it
        meta = {"key": key, "sha256": _sha256(built), "flags": list(FLAGS), "symbols": symbols,
                "python": sys.version.split()[0]}
        tmp_meta = meta_path + f".{os.getpid()}.tmp"
        with open(tmp_meta, "w") as f:
            json.dump(meta, f, indent=1)
        os.replace(tmp_meta, meta_path)
        os.replace(built, path)                    # atomic: readers see the old file or the new one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mod = _load(name, path, key)
    _loaded[key] = mod
    return mod


def build_each(kernels: dict):
    """Build `kernels` as one module; if that fails, find the kernels that do not compile by
    splitting the set in halves. Returns `({symbol: KernelModule}, {symbol: error message})`."""
    if not kernels:
        return {}, {}
    try:
        mod = build(kernels)
        return {s: mod for s in kernels}, {}
    except CompileFailed as e:
        if len(kernels) == 1:
            return {}, {next(iter(kernels)): e.message}
    items = sorted(kernels.items())
    half = len(items) // 2
    ok1, bad1 = build_each(dict(items[:half]))
    ok2, bad2 = build_each(dict(items[half:]))
    return {**ok1, **ok2}, {**bad1, **bad2}


def clear_memory_cache():
    """Forget the modules loaded by this process (the disk cache stays): the next `build` of the
    same source looks on disk again. For tests."""
    _loaded.clear()


__all__ = ["build", "build_each", "cache_dir", "find_compiler", "has_libmvec", "KernelModule", "NoCompiler",
           "CompileFailed", "STATS", "FLAGS", "clear_memory_cache"]
