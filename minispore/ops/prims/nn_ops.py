"""The neural-network op family: normalization, losses, dropout, convolution and pooling.

The family is split by concept into small modules; this one only gathers their public functions
(`minispore.ops.functional` imports the family by the name `nn_ops`):

* norm_ops     layer_norm, rms_norm                        (+ fused backward primitives)
* loss_ops     cross_entropy, nll_loss                     (+ fused backward primitives)
* composite_losses  mse_loss, binary_cross_entropy_with_logits  (composed from elementwise ops)
* dropout_ops  dropout                                     (the random mask is an output)
* conv_ops     conv2d                                      (im2col + matmul; two backward primitives)
* pool_ops     max_pool2d, avg_pool2d                      (+ backward primitives)

Shared pieces: `_windows` (sliding-window geometry for conv and pools) and `_nn_common`.
"""
from .conv_ops import conv2d
from .dropout_ops import dropout
from .composite_losses import binary_cross_entropy_with_logits, mse_loss
from .loss_ops import cross_entropy, nll_loss
from .norm_ops import layer_norm, rms_norm
from .pool_ops import avg_pool2d, max_pool2d

__all__ = ["avg_pool2d", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "layer_norm",
           "max_pool2d", "mse_loss", "nll_loss", "rms_norm"]
