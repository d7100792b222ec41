"""The neural-network op family: normalization, losses, dropout, convolution and pooling.

The family is split by concept into small modules; this one only gathers their public functions
(`minispore.ops.functional` imports the family by the name `nn_ops`):

* norm_ops     layer_norm, rms_norm                        (+ fused backward primitives)
* loss_ops     cross_entropy, nll_loss, binary_cross_entropy  (+ fused backward primitives)
* composite_losses  mse_loss, l1_loss, kl_div, the margin losses, ...  (composed from existing ops)
* dropout_ops  dropout                                     (the random mask is an output)
* conv_ops     conv2d                                      (im2col + matmul; two backward primitives)
* pool_ops     max_pool2d, avg_pool2d                      (+ backward primitives)

Shared pieces: `_windows` (sliding-window geometry for conv and pools) and `_nn_common`.
"""
from .conv_ops import conv2d
from .dropout_ops import dropout
from . import composite_losses as _composite_losses
from . import loss_ops as _loss_ops
from .composite_losses import *  # noqa: F401,F403  (every loss: the two modules' __all__)
from .loss_ops import *  # noqa: F401,F403
from .norm_ops import layer_norm, rms_norm
from .pool_ops import avg_pool2d, max_pool2d

__all__ = ["avg_pool2d", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "layer_norm",
           "max_pool2d", "mse_loss", "nll_loss", "rms_norm"]
__all__ += [n for n in _composite_losses.__all__ + _loss_ops.__all__ if n not in __all__]
