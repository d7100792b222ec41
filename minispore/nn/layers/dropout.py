"""`nn.Dropout(keep_prob=0.5, p=None)` with MindSpore 2.3 semantics, and `nn.Dropout2d(p=0.5)`.

In training mode each element is zeroed with probability p and the survivors are scaled by
1/(1-p), so the expected output equals the input; in eval mode (the default until
`set_train()`), Dropout is the identity. `p` (the drop rate) takes precedence over the deprecated
`keep_prob` (the keep rate).
"""
from __future__ import annotations

from ...common.errors import OpTypeError
from ...ops import functional as F
from .. import _checks
from ..cell import Cell


class Dropout(Cell):
    def __init__(self, keep_prob=0.5, p=None):
        super().__init__()
        if p is None:
            keep_prob = _checks.real("Dropout", "keep_prob", keep_prob, lo=0.0, hi=1.0, lo_open=True)
            self.p = None
            self.keep_prob = keep_prob
            self._drop = 1.0 - keep_prob
        else:
            p = _checks.real("Dropout", "p", p, lo=0.0, hi=1.0, hi_open=True)
            self.p = p
            self.keep_prob = 1.0 - p
            self._drop = p

    def construct(self, x):
        if not self.training or self._drop == 0.0:
            return x
        return F.dropout(x, self._drop, True)

    def extend_repr(self):
        return f"p={self.p}" if self.p is not None else f"keep_prob={self.keep_prob}"


class Dropout2d(Cell):
    """`nn.Dropout2d(p=0.5)`: in training, each channel plane of an (N, C, H, W) input is zeroed
    with probability p (a Python float in [0, 1]) and the kept ones scaled by 1 / (1 - p); the
    identity in eval mode. Dropping whole feature maps suits convolutions, whose neighbouring
    pixels are strongly correlated (element-wise dropout would barely regularize them)."""

    def __init__(self, p=0.5):
        super().__init__()
        if not isinstance(p, float):
            raise OpTypeError("Dropout2d", "'p' to be a float", f"{type(p).__name__} {p!r}")
        self.p = _checks.real("Dropout2d", "p", p, lo=0.0, hi=1.0)

    def construct(self, x):
        if not self.training:
            return x
        return F.dropout2d(x, self.p, True)

    def extend_repr(self):
        return f"p={self.p}"
