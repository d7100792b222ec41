"""minispore.nn — MindSpore's `nn`: Cell, containers, layers, losses, optimizers, training wrappers.

Read in this order: cell.py (registration, naming, calling), container.py, layers/, loss.py,
optim/ (optimizer.py first), wrap.py, clip.py.
"""
from .cell import Cell
from .container import CellList, SequentialCell
from .layers import *          # noqa: F401,F403
from .layers import __all__ as _layers_all
from .loss import (CrossEntropyLoss, L1Loss, LossBase, MSELoss, NLLLoss, SoftmaxCrossEntropyWithLogits)
from .optim import *           # noqa: F401,F403
from .optim import __all__ as _optim_all
from .wrap import TrainOneStepCell, WithEvalCell, WithLossCell
from .clip import clip_by_global_norm
from ..common.tensor import Parameter, ParameterTuple

__all__ = (["Cell", "CellList", "SequentialCell", "CrossEntropyLoss", "L1Loss", "LossBase", "MSELoss", "NLLLoss",
            "SoftmaxCrossEntropyWithLogits", "TrainOneStepCell", "WithEvalCell", "WithLossCell",
            "clip_by_global_norm", "Parameter", "ParameterTuple"] + list(_layers_all) + list(_optim_all))
