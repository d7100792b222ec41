"""The standard layers, one concept per module."""
from .activation import (ELU, GELU, LeakyReLU, LogSoftmax, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softplus, Tanh,
                         get_activation)
from .basic import Flatten, Identity
from .conv import Conv1d, Conv2d, Conv2dTranspose
from .dense import Dense
from .dropout import Dropout, Dropout2d
from .embedding import Embedding
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm2d, LayerNorm, RMSNorm
from .pooling import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Softmax", "Softplus",
           "Tanh", "get_activation", "Flatten", "Identity", "Conv2d", "Dense", "Dropout", "Embedding", "LayerNorm",
           "RMSNorm", "AvgPool2d", "MaxPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "GroupNorm", "InstanceNorm2d", "Conv1d", "Conv2dTranspose", "Dropout2d", "AvgPool1d", "MaxPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]
__all__ += ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]

# the long tail of activation, padding, shape and math cells
from .activation import (CELU, GLU, HShrink, HSigmoid, HSwish, Hardtanh, LogSigmoid, Mish, PReLU, RReLU, SeLU,
                         SoftShrink, Softmax2d, Softmin, Softsign, Tanhshrink, Threshold)
from .basic import (MatMul, Moments, Norm, OneHot, PixelShuffle, PixelUnshuffle, Range, Roll, Tril, Triu, Unflatten,
                    Upsample)
from .padding import __all__ as _padding_all
from .padding import *          # noqa: F401,F403
__all__ += ["CELU", "GLU", "HShrink", "HSigmoid", "HSwish", "Hardtanh", "LogSigmoid", "Mish", "PReLU", "RReLU",
            "SeLU", "SoftShrink", "Softmax2d", "Softmin", "Softsign", "Tanhshrink", "Threshold",
            "MatMul", "Moments", "Norm", "OneHot", "PixelShuffle", "PixelUnshuffle", "Range", "Roll", "Tril", "Triu",
            "Unflatten", "Upsample"] + list(_padding_all)
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
__all__ += ["MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerEncoderLayer"]
from .moe import MoE, SwiGLUExperts, moe_auxiliary_loss, moe_statistics, set_token_groups
__all__ += ["MoE", "SwiGLUExperts", "moe_auxiliary_loss", "moe_statistics", "set_token_groups"]
