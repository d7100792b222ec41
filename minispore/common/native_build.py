"""Compile C source with cffi into an extension module, cached on disk by a hash of its source.

The one C builder of minispore, at the bottom layer so that every user can reach it: the O1/O2
fusion pass (graph/codegen/build.py adds the generated kernels' preamble), the fused optimizer
rules (nn/optim/_native.py) and the hand-written PyNative kernels (ops/prims/_native_kernels.py).

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
  PATH. Without one `build` raises `NoCompiler` (each user then runs its NumPy code and warns
  once, `warn_once`); a compile error raises `CompileFailed` with the compiler's message.
* **Switch**: `MINISPORE_NATIVE_KERNELS=0` turns off the hand-written native kernels (the PyNative
  ops' and the optimizers'; `native_kernels_enabled`). The O1/O2 fusion pass is not affected: its
  generated C is what jit_level O1 means (`MINISPORE_FUSION=0` or jit_level O0 turn it off).

Why the compile cache's folder settings are read here and not in graph/cache_settings.py: the
kernel cache needs `kernel_meta` while graph/ sits above ops/, which builds kernels too. So the
two settings (is the compile cache on; its per-rank root) live here, read from common.context
and MindSpore's environment variables, and graph/cache_settings.py derives the graph cache's own
folder (`graph_cache`) from the same root, keeping its API.

Flags: `-O3 -march=native` for speed; `-ffp-contract=off` so `a*b + c` is not contracted into a
fused multiply-add (NumPy rounds the product, so must we); `-fno-math-errno` so sqrt/floor/...
become single instructions; `-fopenmp-simd` enables the `#pragma omp simd` loops (vectorization
only, no threads). Where glibc's vector math library (libmvec) exists, `build(..., vector_math=)`
declares the named libm functions `omp declare simd` in the preamble, so loops calling exp/tanh/erf
vectorize too (about 50x faster than scalar libm calls).
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

from . import context

# -fno-trapping-math: lets gcc turn float `?:` selects into vector blends (with the default
# -ftrapping-math such loops stay scalar branches); it changes no value, only whether a select may
# raise a floating-point exception flag nobody reads
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd",
         "-std=gnu99", "-Wno-unused-variable", "-Wno-unused-but-set-variable")
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


class NoCompiler(RuntimeError):
    """No C compiler can be found (native kernels cannot be built)."""


class CompileFailed(RuntimeError):
    """The compiler rejected a module; `message` holds its output."""

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


def warn_once(key, msg, stacklevel=4):
    """A RuntimeWarning the first time `key` is seen in this process (a missing compiler is worth
    saying once, not at every call that falls back to NumPy)."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel)


def native_kernels_enabled() -> bool:
    """False when `MINISPORE_NATIVE_KERNELS=0`: the ops' and optimizers' C kernels are not used."""
    return os.environ.get("MINISPORE_NATIVE_KERNELS", "1") != "0"


# -- where compiled things live ----------------------------------------------------------------------
def compile_cache_enabled() -> bool:
    """Is the on-disk compile cache on (`set_context(enable_compile_cache=True)` or MindSpore's
    MS_COMPILER_CACHE_ENABLE=1)?"""
    if context.get_context("enable_compile_cache"):
        return True
    return os.environ.get("MS_COMPILER_CACHE_ENABLE", "0") == "1"


def compile_cache_rank_dir() -> str:
    """`<compile_cache_path>/rank_<RANK_ID>`: the folder holding graph_cache/ and kernel_meta/."""
    path = context.get_context("compile_cache_path") or os.environ.get("MS_COMPILER_CACHE_PATH", "") or "cache.ms"
    rank = os.environ.get("RANK_ID", "0")
    return os.path.join(os.fspath(path), f"rank_{rank}")


def kernel_meta_dir():
    """`<compile_cache_path>/rank_<RANK_ID>/kernel_meta` while the compile cache is on, else None."""
    if not compile_cache_enabled():
        return None
    return os.path.join(compile_cache_rank_dir(), "kernel_meta")


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
        warn_once(("cache", path), f"minispore: the kernel cache directory {path} is not writable ({e}); "
                                  f"compiled kernels go to {_fallback_dir} for this process only")
        return _fallback_dir


# -- the toolchain ---------------------------------------------------------------------------------------
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


def preamble(vector_math=None) -> str:
    """The includes, and (with libmvec) `omp declare simd` declarations of the libm functions named
    in `vector_math` ({name: number of arguments}), float and double versions."""
    lines = ["#include <math.h>", "#include <stdint.h>"]
    if vector_math and has_libmvec():
        lines.append("/* glibc's libmvec has vector versions of these: let `omp simd` loops call them */")
        for fn, arity in vector_math.items():
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


def build(kernels: dict, vector_math=None) -> KernelModule:
    """Compile (or load from the cache) one module holding `kernels` (symbol -> (C source, cdef)),
    after `preamble(vector_math)`."""
    symbols = sorted(kernels)
    source = preamble(vector_math) + "\n\n".join(kernels[s][0] for s in symbols) + "\n"
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


def build_each(kernels: dict, vector_math=None):
    """Build `kernels` as one module; if that fails, find the kernels that do not compile by
    splitting the set in halves. Returns `({symbol: KernelModule}, {symbol: error message})`."""
    if not kernels:
        return {}, {}
    try:
        mod = build(kernels, vector_math)
        return {s: mod for s in kernels}, {}
    except CompileFailed as e:
        if len(kernels) == 1:
            return {}, {next(iter(kernels)): e.message}
    items = sorted(kernels.items())
    half = len(items) // 2
    ok1, bad1 = build_each(dict(items[:half]), vector_math)
    ok2, bad2 = build_each(dict(items[half:]), vector_math)
    return {**ok1, **ok2}, {**bad1, **bad2}


def clear_memory_cache():
    """Forget the modules loaded by this process (the disk cache stays): the next `build` of the
    same source looks on disk again. For tests."""
    _loaded.clear()


class NativeLibrary:
    """One hand-written module of C kernels, built on first use: `get()` returns the KernelModule,
    or None - switched off (`MINISPORE_NATIVE_KERNELS=0`, or the user's own `enabled()` check), no
    compiler, or a compile error - after saying why once (a RuntimeWarning). The caller then runs
    its NumPy code, which computes the same function."""

    def __init__(self, what, source, cdefs, *, vector_math=None, enabled=native_kernels_enabled):
        self.what = what                    # for the warning: "optimizers", "PyNative kernels" ...
        self.source, self.cdefs, self.vector_math, self.enabled = source, cdefs, vector_math, enabled
        self.tried = False
        self.mod = None

    def get(self):
        if not self.tried:
            self.tried = True
            if self.enabled():
                try:
                    # one cffi module; the cdef lines are passed with its one "symbol"
                    self.mod = build({f"ms_{self.what}": (self.source, "\n".join(self.cdefs))}, self.vector_math)
                except (NoCompiler, CompileFailed) as e:
                    warn_once(("native", self.what), f"minispore: the {self.what} run their NumPy kernels (the C "
                                                     f"ones do not build: {str(e).splitlines()[0]})")
        return self.mod


__all__ = ["build", "build_each", "cache_dir", "find_compiler", "has_libmvec", "preamble", "KernelModule",
           "NoCompiler", "CompileFailed", "STATS", "FLAGS", "EXT_SUFFIX", "clear_memory_cache", "warn_once",
           "native_kernels_enabled", "compile_cache_enabled", "compile_cache_rank_dir", "kernel_meta_dir",
           "NativeLibrary"]
