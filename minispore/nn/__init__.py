"""minispore.nn — MindSpore's `nn`: Cell, containers, layers, losses, optimizers, training wrappers.

Read in this order: cell.py (registration, naming, calling), container.py, layers/, loss.py,
optim/ (optimizer.py first), wrap.py (loss and one-step training cells), wrap_loss_scale.py (the
same with loss scaling), clip.py.
"""
from .cell import Cell
from .container import CellDict, CellList, SequentialCell
from .layers import *          # noqa: F401,F403
from .layers import __all__ as _layers_all
from .loss import (CrossEntropyLoss, L1Loss, LossBase, MSELoss, NLLLoss, SoftmaxCrossEntropyWithLogits)
from .loss import *          # noqa: F401,F403  (every loss cell)
from .loss import __all__ as _loss_all
from .optim import *           # noqa: F401,F403
from .optim import __all__ as _optim_all
from .wrap import ForwardValueAndGrad, TrainOneStepCell, WithEvalCell, WithGradCell, WithLossCell
from .wrap_loss_scale import DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell, TrainOneStepWithLossScaleCell
from .wrap_grad_reducer import DistributedGradReducer
from .wrap_interleave import MicroBatchInterleaved
from .pipeline import PipelineCell, PipelineGradReducer
from .clip import clip_by_global_norm
from ..common.tensor import Parameter, ParameterTuple

__all__ = (["Cell", "CellDict", "CellList", "SequentialCell", "CrossEntropyLoss", "L1Loss", "LossBase", "MSELoss", "NLLLoss",
            "SoftmaxCrossEntropyWithLogits", "TrainOneStepCell", "WithEvalCell", "WithLossCell",
            "TrainOneStepWithLossScaleCell", "DynamicLossScaleUpdateCell", "FixedLossScaleUpdateCell", "WithGradCell",
            "ForwardValueAndGrad", "DistributedGradReducer", "MicroBatchInterleaved", "PipelineCell", "PipelineGradReducer",
            "clip_by_global_norm", "Parameter", "ParameterTuple"] + list(_layers_all) + list(_optim_all)
           + [n for n in _loss_all if n not in ("CrossEntropyLoss", "L1Loss", "LossBase", "MSELoss", "NLLLoss",
                                               "SoftmaxCrossEntropyWithLogits")])

# MindSpore also exposes the metrics under nn (`nn.Accuracy`, ...). They live in minispore.train.metrics
# and are looked up on first use (train sits above nn in the layering, so no import at load time).
_METRICS = ("names", "get_metric_fn", "Metric", "rearrange_inputs", "Accuracy", "MAE", "MSE", "Loss", "Precision",
            "Recall", "Fbeta", "F1", "TopKCategoricalAccuracy", "Top1CategoricalAccuracy", "Top5CategoricalAccuracy")


def __getattr__(name):
    if name in _METRICS:
        from ..train import metrics
        return getattr(metrics, name)
    raise AttributeError(f"module 'minispore.nn' has no attribute '{name}'")
