"""Where is the user's code? The source line a node, an error or a warning is attributed to.

Frames in the framework's own layers are skipped; code written *with* minispore (the LLaMA model
in minispore/llm, training loops, the user's scripts) counts as user code, so a dump of the model
points at model.py's lines. Every capture mode and the compile cache ask the same question, so it
is answered once, here, below all of them.
"""
from __future__ import annotations

import os
import sys
import warnings

from ...common.errors import _PKG_DIR

_FRAMEWORK = tuple(os.path.join(_PKG_DIR, d) + os.sep for d in
                   ("common", "ops", "backend", "autograd", "graph", "nn", "testing")) + \
    (os.path.join(_PKG_DIR, "jit.py"),)
_internal_code: dict = {}


def _is_internal(code) -> bool:
    r = _internal_code.get(code)
    if r is None:
        r = os.path.abspath(code.co_filename).startswith(_FRAMEWORK)
        _internal_code[code] = r
    return r


def user_source(depth: int = 2):
    """`(filename, lineno, function)` of the innermost frame outside minispore's framework layers."""
    f = sys._getframe(depth)
    while f is not None:
        if not _is_internal(f.f_code):
            return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None


def warn_user(message, category=RuntimeWarning):
    """warnings.warn, attributed to the innermost frame of the user's code (not minispore's)."""
    src = user_source(2)
    if src is None:
        warnings.warn(message, category, stacklevel=2)
    else:
        warnings.warn_explicit(message, category, src[0], src[1], module=src[2])


__all__ = ["user_source", "warn_user"]
