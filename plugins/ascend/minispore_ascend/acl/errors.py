"""ACL / aclnn status codes mapped to minispore errors (acl_api.md §1 "Error codes", §5.2).

Every failed call raises a subclass of `AclError` (itself a `MinisporeRuntimeError`) whose message
names the function, the code, the code's meaning and the runtime's own explanation from
`aclGetRecentErrMsg` (which returns *and clears* the thread's message, so it is read once, here).
"""
from __future__ import annotations

from minispore.common.errors import MinisporeRuntimeError

MEANING = {
    100000: "ACL_ERROR_INVALID_PARAM", 100001: "ACL_ERROR_UNINITIALIZE", 100002: "ACL_ERROR_REPEAT_INITIALIZE",
    100037: "ACL_ERROR_REPEAT_FINALIZE", 100039: "ACL_ERROR_COMPILING_STUB_MODE",
    107000: "ACL_ERROR_RT_PARAM_INVALID", 107001: "ACL_ERROR_RT_INVALID_DEVICEID", 107002: "ACL_ERROR_RT_CONTEXT_NULL",
    107003: "ACL_ERROR_RT_STREAM_CONTEXT", 107006: "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID",
    107017: "ACL_ERROR_RT_INVALID_HANDLE", 207000: "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
    207001: "ACL_ERROR_RT_MEMORY_ALLOCATION", 207002: "ACL_ERROR_RT_MEMORY_FREE", 207018: "ACL_ERROR_RT_DEVICE_OOM",
    500003: "ACL_ERROR_RT_FAILURE", 507015: "ACL_ERROR_RT_AICORE_EXCEPTION", 507035: "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION",
    161001: "ACLNN_ERR_PARAM_NULLPTR", 161002: "ACLNN_ERR_PARAM_INVALID", 361001: "ACLNN_ERR_RUNTIME_ERROR",
    561103: "ACLNN_ERR_INNER_NULLPTR",
}
STUB_MODE = 100039
INVALID_PARAM = 100000        # ACL_ERROR_INVALID_PARAM
RT_PARAM_INVALID = 107000     # ACL_ERROR_RT_PARAM_INVALID
MEMORY_FREE = 207002          # ACL_ERROR_RT_MEMORY_FREE
REPEAT_INITIALIZE = 100002


class AclError(MinisporeRuntimeError):
    """A failed ACL or aclnn call: `.func`, `.code`, `.meaning`, `.recent` (aclGetRecentErrMsg)."""

    def __init__(self, func: str, code: int, recent: str | None = None):
        self.func, self.code, self.recent = func, int(code), recent
        self.meaning = MEANING.get(self.code, "unknown ACL error")
        msg = f"{func} failed with {self.code} ({self.meaning})"
        if recent:
            msg += f": {recent.strip()}"
        super().__init__(msg)


class AclDeviceError(AclError):
    """No such device (107001), or no device selected (107002)."""


class AclOutOfMemoryError(AclError, MemoryError):
    """The device ran out of memory (207001 / 207018), even after the pool released its cache."""


class AclStubLibraryError(AclError):
    """The loaded library is a link stub (every call returns 100039): no real runtime is installed."""


class AclAsyncError(AclError):
    """A fault while the device executed queued work, reported at a synchronize (5070xx)."""


class AclnnError(AclError):
    """An aclnn operator rejected its arguments (161xxx) or failed internally (561xxx)."""


def error_class(code: int):
    if code == STUB_MODE:
        return AclStubLibraryError
    if code in (107001, 107002):
        return AclDeviceError
    if code in (207001, 207018):
        return AclOutOfMemoryError
    if 507000 <= code < 508000:
        return AclAsyncError
    if 161000 <= code < 162000 or 561000 <= code < 562000 or code == 361001:
        return AclnnError
    return AclError


def make_checker(rt):
    """`check(code, func)` raising the mapped error with the runtime's recent message."""
    recent_fn = rt.aclGetRecentErrMsg

    def check(code: int, func: str):
        if code:
            raw = recent_fn()
            raise error_class(code)(func, code, raw.decode(errors="replace") if raw else None)

    return check
