"""Two-phase aclnn calls (acl_api.md §5.2) on DeviceTensors.

Every aclnn operator is called the same way:

    phase 1   aclnnXxxGetWorkspaceSize(<aclTensor*/aclScalar*/... args>, &workspaceSize, &executor)
              host only: validates, returns the workspace size and a single-use executor
    (alloc)   a workspace of that size from the pool, if nonzero
    phase 2   aclnnXxx(workspace, workspaceSize, executor, stream)
              enqueues the kernel and consumes the executor; returns before the kernel runs

`AclnnCall` is the `with` block that owns the descriptors (aclTensor, aclScalar, aclIntArray,
aclTensorList) a call creates: they are destroyed right after phase 2 - allowed, because phase 1
snapshotted them - while the device buffers must live until the stream has run the work. The
workspace goes back to the pool *deferred* (reusable only after that stream is synchronized).
"""
from __future__ import annotations

import ctypes
from ctypes import byref, c_double, c_int64, c_uint64, c_void_p

import numpy as np

from minispore.common import dtype as mstype

ACL_FORMAT_ND = 2
# minispore dtype -> aclDataType (acl_api.md §3)
ACL_DTYPE = {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "int64": 9,
             "float64": 11, "bool": 12, "bfloat16": 27}


def acl_dtype(dt) -> int:
    name = dt.np.name if hasattr(dt, "np") else np.dtype(dt).name
    code = ACL_DTYPE.get(name)
    if code is None:
        from minispore.common.errors import OpTypeError
        raise OpTypeError("Ascend", f"a dtype among {sorted(ACL_DTYPE)}", name)
    return code


def _i64(values):
    values = [int(v) for v in values]
    return (c_int64 * max(len(values), 1))(*values)


class AclnnCall:
    """One aclnn call: descriptor factory + phase 1 + workspace + phase 2. See the module docstring."""

    def __init__(self, backend, name: str):
        self.b = backend
        self.name = name
        self.nn = backend.libs.nnopbase
        self._destroy = []

    # -- descriptors -------------------------------------------------------------------------------
    def tensor(self, t, shape=None, strides=None, extra_offset_elems: int = 0):
        """An aclTensor over DeviceTensor `t`; `shape`/`strides` (elements) describe another view of
        the same contiguous bytes (a reshape, a transpose) without copying."""
        if t is None:
            return None
        shape = t.shape if shape is None else tuple(shape)
        es = t.dtype.np.itemsize
        if t.offset % es:
            raise ValueError(f"tensor offset {t.offset} is not a multiple of its itemsize {es}")
        offset = t.offset // es + extra_offset_elems
        storage = [t.buffer.nbytes // es]
        h = self.nn.aclCreateTensor(_i64(shape), len(shape), acl_dtype(t.dtype),
                                    None if strides is None else _i64(strides), offset, ACL_FORMAT_ND,
                                    _i64(storage), 1, c_void_p(t.buffer.ptr))
        if not h:
            self.b.rt.check(161002, f"aclCreateTensor (for {self.name})")
        self._destroy.append((self.nn.aclDestroyTensor, h))
        return h

    def scalar(self, value, dt):
        if dt.np.kind == "f" or dt.np.name == "bfloat16":
            v, code = c_double(float(value)), ACL_DTYPE["float64"]
        else:
            v, code = c_int64(int(value)), ACL_DTYPE["int64"]
        h = self.nn.aclCreateScalar(ctypes.cast(byref(v), c_void_p), code)
        if not h:
            self.b.rt.check(161002, f"aclCreateScalar (for {self.name})")
        self._destroy.append((self.nn.aclDestroyScalar, h))
        return h

    def int_array(self, values):
        h = self.nn.aclCreateIntArray(_i64(values), len(values))
        if not h:
            self.b.rt.check(161002, f"aclCreateIntArray (for {self.name})")
        self._destroy.append((self.nn.aclDestroyIntArray, h))
        return h

    def tensor_list(self, handles):
        arr = (c_void_p * len(handles))(*handles)
        h = self.nn.aclCreateTensorList(arr, len(handles))
        if not h:
            self.b.rt.check(161002, f"aclCreateTensorList (for {self.name})")
        # destroying a list does not destroy its tensors in the emulator; on CANN it does, so the
        # tensors put in a list are taken off our own destroy list
        ids = set(handles)
        self._destroy = [(f, x) for f, x in self._destroy if x not in ids]
        self._destroy.append((self.nn.aclDestroyTensorList, h))
        return h

    # -- the two phases ------------------------------------------------------------------------------
    def launch(self, stream, *args):
        op = self.b.libs.opapi
        phase1 = getattr(op, self.name + "GetWorkspaceSize")
        ws_size, executor = c_uint64(), c_void_p()
        self.b.runtime.bind_thread()
        self.b.rt.check(phase1(*args, byref(ws_size), byref(executor)), self.name + "GetWorkspaceSize")
        ws = None
        if ws_size.value:
            ws = self.b.runtime.pool.alloc(ws_size.value)
        try:
            self.b.rt.check(getattr(op, self.name)(ws, ws_size.value, executor, stream), self.name)
        finally:
            if ws is not None:
                self.b.runtime.pool.free(ws, stream, deferred=True)
        self.b.launches += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for destroy, h in reversed(self._destroy):
            destroy(h)
        self._destroy.clear()
        return False
