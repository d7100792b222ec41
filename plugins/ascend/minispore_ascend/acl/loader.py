"""Finding and loading the ACL libraries, with an explicit C prototype for every bound function.

Two sources, tried in this order:

1. **A real CANN install**: `$ASCEND_HOME_PATH/lib64` (set by CANN's `set_env.sh`) holding the
   runtime (`libacl_rt.so` in CANN 9, `libascendcl.so` before), `libnnopbase.so` (aclCreateTensor...)
   and `libopapi.so` (the aclnn operators). They are loaded with RTLD_GLOBAL, as torch_npu does.
2. **The emulator** (plugins/ascend/emulator/acl_emu.c): compiled with gcc on first use into a
   cache directory keyed by the source's hash, then loaded as all three libraries at once (it
   exports the same symbols).

`MINISPORE_ASCEND_LIB_DIR=<dir>` forces a directory holding `libascendcl.so` (tests use it to load
a stub library). Every function is bound with `restype` and `argtypes` from `PROTOTYPES` - ctypes'
default `int` restype would truncate the pointers returned by aclCreateTensor.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from ctypes import POINTER, c_bool, c_char_p, c_double, c_float, c_int8, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from pathlib import Path

from minispore.backend.base import BackendUnavailableError

p = c_void_p
i32 = c_int32
WS = [POINTER(c_uint64), POINTER(c_void_p)]           # the two trailing phase-1 outputs
PHASE2 = (i32, [p, c_uint64, p, p])                   # aclnnXxx(workspace, size, executor, stream)

# -- the runtime (libascendcl / libacl_rt) ----------------------------------------------------------
RUNTIME = {
    "aclInit": (i32, [c_char_p]),
    "aclFinalize": (i32, []),
    "aclGetRecentErrMsg": (c_char_p, []),
    "aclrtGetVersion": (i32, [POINTER(c_int32), POINTER(c_int32), POINTER(c_int32)]),
    "aclrtGetSocName": (c_char_p, []),
    "aclrtGetDeviceCount": (i32, [POINTER(c_uint32)]),
    "aclrtSetDevice": (i32, [c_int32]),
    "aclrtResetDevice": (i32, [c_int32]),
    "aclrtGetDevice": (i32, [POINTER(c_int32)]),
    "aclrtSynchronizeDevice": (i32, []),
    "aclrtCreateContext": (i32, [POINTER(c_void_p), c_int32]),
    "aclrtDestroyContext": (i32, [p]),
    "aclrtSetCurrentContext": (i32, [p]),
    "aclrtGetCurrentContext": (i32, [POINTER(c_void_p)]),
    "aclrtCreateStream": (i32, [POINTER(c_void_p)]),
    "aclrtDestroyStream": (i32, [p]),
    "aclrtSynchronizeStream": (i32, [p]),
    "aclrtStreamQuery": (i32, [p, POINTER(c_int32)]),
    "aclrtStreamWaitEvent": (i32, [p, p]),
    "aclrtCreateEvent": (i32, [POINTER(c_void_p)]),
    "aclrtCreateEventWithFlag": (i32, [POINTER(c_void_p), c_uint32]),
    "aclrtDestroyEvent": (i32, [p]),
    "aclrtRecordEvent": (i32, [p, p]),
    "aclrtSynchronizeEvent": (i32, [p]),
    "aclrtQueryEventStatus": (i32, [p, POINTER(c_int32)]),
    "aclrtEventElapsedTime": (i32, [POINTER(c_float), p, p]),
    "aclrtMalloc": (i32, [POINTER(c_void_p), c_size_t, c_int32]),
    "aclrtFree": (i32, [p]),
    "aclrtMallocHost": (i32, [POINTER(c_void_p), c_size_t]),
    "aclrtFreeHost": (i32, [p]),
    "aclrtMemcpy": (i32, [p, c_size_t, p, c_size_t, c_int32]),
    "aclrtMemcpyAsync": (i32, [p, c_size_t, p, c_size_t, c_int32, p]),
    "aclrtMemset": (i32, [p, c_size_t, c_int32, c_size_t]),
    "aclrtMemsetAsync": (i32, [p, c_size_t, c_int32, c_size_t, p]),
    "aclrtGetMemInfo": (i32, [c_int32, POINTER(c_size_t), POINTER(c_size_t)]),
}

# -- aclnn meta objects (libnnopbase) ----------------------------------------------------------------
NNOPBASE = {
    "aclCreateTensor": (p, [POINTER(c_int64), c_uint64, c_int32, POINTER(c_int64), c_int64, c_int32,
                            POINTER(c_int64), c_uint64, p]),
    "aclDestroyTensor": (i32, [p]),
    "aclCreateScalar": (p, [p, c_int32]),
    "aclDestroyScalar": (i32, [p]),
    "aclCreateIntArray": (p, [POINTER(c_int64), c_uint64]),
    "aclDestroyIntArray": (i32, [p]),
    "aclCreateTensorList": (p, [POINTER(c_void_p), c_uint64]),
    "aclDestroyTensorList": (i32, [p]),
}

# -- aclnn operators (libopapi): phase 1 prototypes; phase 2 is always PHASE2 -------------------------
OPAPI = {
    "aclnnAdd": [p, p, p, p],                 # self, other, alpha (aclScalar), out
    "aclnnSub": [p, p, p, p],
    "aclnnMul": [p, p, p],                    # self, other, out
    "aclnnDiv": [p, p, p],
    "aclnnExp": [p, p],
    "aclnnNeg": [p, p],
    "aclnnSilu": [p, p],
    "aclnnGelu": [p, p],
    "aclnnGeluV2": [p, c_int64, p],           # self, approximate (0 none, 1 tanh), out
    "aclnnCast": [p, c_int32, p],             # self, dtype, out
    "aclnnInplaceCopy": [p, p],               # selfRef, src
    "aclnnMatmul": [p, p, p, c_int8],         # self, mat2, out, cubeMathType
    "aclnnSoftmax": [p, c_int64, p],          # self, dim, out
    "aclnnReduceSum": [p, p, c_bool, c_int32, p],   # self, dims (aclIntArray), keepDims, dtype, out
    "aclnnPermute": [p, p, p],                # self, dims, out
    "aclnnCat": [p, c_int64, p],              # tensors (aclTensorList), dim, out
    "aclnnEmbedding": [p, p, p],              # weight, indices, out
    "aclnnRmsNorm": [p, p, c_double, p, p],   # x, gamma, epsilon, yOut, rstdOut
    "aclnnFlashAttentionScore": [p, p, p, p, p, p, p, p, c_double, c_double, c_int64, c_int64, c_int64,
                                 c_char_p, c_int64, c_int64, p, p, p, p],
    "aclnnFlashAttentionScoreGrad": [p, p, p, p, p, p, p, p, p, p, p, p, p, c_double, c_double, c_int64,
                                     c_int64, c_int64, c_char_p, c_int64, c_int64, p, p, p, p],
}

EMULATOR_EXTRAS = {
    "aclemuSetLaunchDelayUs": (None, [ctypes.c_long]),
    "aclemuGetPeakMemory": (c_size_t, [c_int32]),
    "aclemuResetPeakMemory": (None, [c_int32]),
}

EMULATOR_SOURCE = Path(os.environ.get("MINISPORE_ASCEND_EMULATOR_SRC",
                                      Path(__file__).resolve().parents[2] / "emulator" / "acl_emu.c"))
_RUNTIME_NAMES = ("libacl_rt.so", "libascendcl.so")


class AclLibraries:
    """The three loaded libraries (one object three times for the emulator) and where they came from."""

    def __init__(self, rt, nnopbase, opapi, kind: str, where: str):
        self.rt, self.nnopbase, self.opapi = rt, nnopbase, opapi
        self.kind = kind                  # "emulator" | "cann" | "custom"
        self.where = where
        self.missing: list[str] = []      # aclnn operators the library does not export
        self.emulator_extras = None

    @property
    def description(self) -> str:
        return "emulator" if self.kind == "emulator" else f"CANN at {self.where}"


def _bind(lib, name, restype, argtypes):
    fn = getattr(lib, name)               # AttributeError if the symbol is absent
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def bind_all(libs: AclLibraries):
    """Set restype/argtypes on every function; record absent aclnn operators instead of failing."""
    for name, (res, args) in RUNTIME.items():
        try:
            _bind(libs.rt, name, res, args)
        except AttributeError as e:
            raise BackendUnavailableError("Ascend", f"{libs.where} does not export {name}",
                                          hint="check that ASCEND_HOME_PATH points to a complete CANN toolkit") from e
    for name, (res, args) in NNOPBASE.items():
        try:
            _bind(libs.nnopbase, name, res, args)
        except AttributeError as e:
            raise BackendUnavailableError("Ascend", f"libnnopbase does not export {name}") from e
    for name, args in OPAPI.items():
        try:
            _bind(libs.opapi, name + "GetWorkspaceSize", i32, args + WS)
            _bind(libs.opapi, name, *PHASE2)
        except AttributeError:
            libs.missing.append(name)      # that kernel then falls back to the CPU, counted
    if hasattr(libs.rt, "aclemuSetLaunchDelayUs"):
        for name, (res, args) in EMULATOR_EXTRAS.items():
            _bind(libs.rt, name, res, args)
        libs.emulator_extras = libs.rt
    return libs


def _cache_dir() -> Path:
    base = os.environ.get("MINISPORE_ASCEND_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "minispore_ascend")
    return Path(base)


def build_emulator(source: Path = EMULATOR_SOURCE, extra_flags=()) -> Path:
    """Compile the emulator once per source hash (and flags) and return the .so path."""
    if not source.exists():
        raise BackendUnavailableError("Ascend", f"the emulator source {source} is missing",
                                      hint="reinstall minispore-ascend from the source tree (pip install -e plugins/ascend)")
    code = source.read_bytes()
    tag = hashlib.sha256(code + " ".join(extra_flags).encode()).hexdigest()[:16]
    out = _cache_dir() / tag / "libascendcl_emu.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "gcc")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        tmp_out = Path(tmp) / out.name
        cmd = [cc, "-O2", "-std=gnu11", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
               *extra_flags, "-o", str(tmp_out), str(source), "-lm"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except FileNotFoundError as e:
            raise BackendUnavailableError("Ascend", f"no C compiler ('{cc}') to build the ACL emulator",
                                          hint="install gcc, or point ASCEND_HOME_PATH to a CANN install") from e
        if r.returncode != 0:
            raise BackendUnavailableError("Ascend", f"building the ACL emulator failed:\n{r.stderr[-2000:]}")
        os.replace(tmp_out, out)            # atomic: concurrent test workers never see half a file
    return out


def _load(path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def _load_dir(d: Path, kind: str) -> AclLibraries:
    rt_path = next((d / n for n in _RUNTIME_NAMES if (d / n).exists()), None)
    if rt_path is None:
        raise BackendUnavailableError("Ascend", f"neither {' nor '.join(_RUNTIME_NAMES)} is in {d}")
    rt = _load(rt_path)
    nn = _load(d / "libnnopbase.so") if (d / "libnnopbase.so").exists() else rt
    op = _load(d / "libopapi.so") if (d / "libopapi.so").exists() else nn
    return AclLibraries(rt, nn, op, kind, str(d.parent if kind == "cann" else d))


def load_libraries() -> AclLibraries:
    """Load the real CANN runtime if ASCEND_HOME_PATH points to one, else the emulator."""
    forced = os.environ.get("MINISPORE_ASCEND_LIB_DIR")
    if forced:
        return bind_all(_load_dir(Path(forced), "custom"))
    home = os.environ.get("ASCEND_HOME_PATH")
    if home and any((Path(home) / "lib64" / n).exists() for n in _RUNTIME_NAMES):
        try:
            return bind_all(_load_dir(Path(home) / "lib64", "cann"))
        except OSError as e:
            raise BackendUnavailableError("Ascend", f"loading CANN from {home}/lib64 failed: {e}",
                                          hint="source <cann>/set_env.sh so LD_LIBRARY_PATH has the driver libraries") from e
    lib = _load(build_emulator())
    return bind_all(AclLibraries(lib, lib, lib, "emulator", str(EMULATOR_SOURCE.parent)))


def generate_stub_source(path: Path) -> Path:
    """Write a C file exporting every bound function as CANN's link stubs do: each aclError
    function returns ACL_ERROR_COMPILING_STUB_MODE (100039), pointer functions NULL. (HRT
    stub/gen_stubapi.py does the same from the headers.) Used by tests of the stub error path."""
    lines = ["#include <stddef.h>", "#define E __attribute__((visibility(\"default\")))"]
    for name, (res, _) in {**RUNTIME, **NNOPBASE}.items():
        ret = "NULL" if res in (p, c_char_p) else "100039"
        ctype = "void *" if res in (p, c_char_p) else "int"
        lines.append(f"E {ctype} {name}() {{ return {ret}; }}")
    for name in OPAPI:
        lines.append(f"E int {name}GetWorkspaceSize() {{ return 100039; }}")
        lines.append(f"E int {name}() {{ return 100039; }}")
    path.write_text("\n".join(lines) + "\n")
    return path
