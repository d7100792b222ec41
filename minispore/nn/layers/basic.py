"""`nn.Flatten` and `nn.Identity`."""
from __future__ import annotations

import numbers

from ...common.errors import OpTypeError, OpValueError
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class Flatten(Cell):
    """Merge the dims `start_dim..end_dim` into one: (N, C, H, W) -> (N, C*H*W) by default."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise OpTypeError("Flatten", f"'{name}' to be an int", repr(v))
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def construct(self, x):
        _checks.tensor_input("Flatten", x)
        shape = tuple(x.shape)
        n = max(len(shape), 1)
        s = self.start_dim + n if self.start_dim < 0 else self.start_dim
        e = self.end_dim + n if self.end_dim < 0 else self.end_dim
        if not (0 <= s < n and 0 <= e < n) or s > e:
            raise OpValueError("Flatten",
                               f"0 <= start_dim <= end_dim < {n} (after wrapping) for a {len(shape)}-d input",
                               f"start_dim={self.start_dim}, end_dim={self.end_dim}")
        if not shape:
            return F.reshape(x, (1,))
        merged = 1
        for d in shape[s:e + 1]:
            merged *= d
        return F.reshape(x, shape[:s] + (merged,) + shape[e + 1:])

    def extend_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Cell):
    """Returns its input unchanged (a placeholder, e.g. the gradient reducer of a single device).
    Like MindSpore's (and PyTorch's), it accepts and ignores any constructor arguments, so it can
    stand in for the layer it replaces."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def construct(self, x):
        return x
