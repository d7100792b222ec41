"""`mindspore.train.loss_scale_manager`: the loss-scale managers `Model(..., loss_scale_manager=...)`
takes, under the module path MindSpore scripts import them from
(`from mindspore.train.loss_scale_manager import DynamicLossScaleManager`).

They are defined in minispore.amp (with the rest of loss scaling): amp sits below train in the
layering (ARCHITECTURE.md §2), so train re-exports them rather than amp importing train.
"""
from ..amp import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager

__all__ = ["LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager"]
