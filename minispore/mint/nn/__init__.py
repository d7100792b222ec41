"""`mint.nn`: PyTorch-style layers and losses (`mint.nn.Linear`, `mint.nn.CrossEntropyLoss`, ...)
and `mint.nn.functional`. Cells, so they compose with `minispore.nn` and train the same way."""
from . import functional
from .layers import *          # noqa: F401,F403
from .layers import __all__ as _layers_all
from ...nn.cell import Cell

F = functional
__all__ = ["Cell", "functional", "F"] + list(_layers_all)
