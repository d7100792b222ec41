"""The neural-network op family: normalization, losses, dropout, convolution and pooling.

The family is split by concept into small modules; this one only gathers their public functions
(minispore.ops.functional imports the family by the name `nn_ops`):

* norm_ops     layer_norm, rms_norm                                  (+ fused backward primitives)
* loss_ops     cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits
* dropout_ops  dropout                                               (the mask is an output)
* conv_ops     conv2d                                                (im2col + matmul)
* pool_ops     max_pool2d, avg_pool2d
"""
from . import conv_ops, dropout_ops, loss_ops, norm_ops, pool_ops
from .conv_ops import *        # noqa: F401,F403
from .dropout_ops import *     # noqa: F401,F403
from .loss_ops import *        # noqa: F401,F403
from .norm_ops import *        # noqa: F401,F403
from .pool_ops import *        # noqa: F401,F403

__all__ = sorted(set(conv_ops.__all__ + dropout_ops.__all__ + loss_ops.__all__ + norm_ops.__all__
                     + pool_ops.__all__))
