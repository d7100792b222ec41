"""The functional ops behind the standard layers (BatchNorm, GroupNorm, Conv1d, Conv2dTranspose,
the 1-d and adaptive pools, Dropout2d), gathered from the modules of the nn family that define them
(`minispore.ops.functional` imports the family by the name `nn_layer_ops`):

* norm_ops     batch_norm, group_norm          (+ fused backward primitives)
* conv_ops     conv1d, conv_transpose2d        (over the conv2d primitives)
* pool_ops     avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool2d
* dropout_ops  dropout2d                       (a channel mask drawn by the dropout primitive)
"""
from .conv_ops import conv1d, conv_transpose2d
from .dropout_ops import dropout2d
from .norm_ops import batch_norm, group_norm
from .pool_ops import adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool1d

__all__ = ["adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool1d", "batch_norm", "conv1d", "conv_transpose2d",
           "dropout2d", "group_norm"]
