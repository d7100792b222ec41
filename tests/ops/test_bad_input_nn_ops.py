"""Bad input to the nn ops (norms, losses, dropout, conv2d, pools) raises a minispore error that
names the op and says what was expected — from inference or the argument checks, before any kernel
runs (the one exception: an out-of-range class index is only visible in the data)."""
import numpy as np
import pytest

from minispore import Tensor, ops
from minispore.common import dtype as mstype
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError
from minispore.ops import get_primitive
from minispore.ops.primitive import AbstractTensor

X = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
X64 = Tensor(np.ones((3, 4)))
I = Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
B = Tensor(np.array([True, False]))
S = Tensor(np.array(1.5, dtype=np.float32))
LOGITS = Tensor(np.zeros((4, 5), np.float32))
T = Tensor(np.array([0, 1, 4, 2]))
IMG = Tensor(np.zeros((2, 3, 6, 6), np.float32))
W = Tensor(np.zeros((4, 3, 3, 3), np.float32))

CASES = [
    # (id, call, error class, op named in the message, a fragment of what was expected)
    # ---- layer_norm / rms_norm
    ("layer_norm-int", lambda: ops.layer_norm(I, (3,)), OpTypeError, "layer_norm", "floating"),
    ("layer_norm-shape", lambda: ops.layer_norm(X, (3,)), OpValueError, "layer_norm", "trailing dims equal"),
    ("layer_norm-shape-type", lambda: ops.layer_norm(X, "4"), OpTypeError, "layer_norm", "'normalized_shape'"),
    ("layer_norm-weight", lambda: ops.layer_norm(X, (4,), Tensor(np.ones(3, np.float32))), OpValueError,
     "layer_norm", "'weight' of shape"),
    ("layer_norm-bias-int", lambda: ops.layer_norm(X, (4,), None, Tensor(np.ones(4, np.int64))), OpTypeError,
     "layer_norm", "'bias' to have a floating dtype"),
    ("layer_norm-eps", lambda: ops.layer_norm(X, (4,), eps="1e-5"), OpTypeError, "layer_norm", "'eps'"),
    ("rms_norm-dtype", lambda: ops.rms_norm(X, Tensor(np.ones(4))), OpTypeError, "rms_norm", "dtype of 'x'"),
    ("rms_norm-shape", lambda: ops.rms_norm(X, Tensor(np.ones(3, np.float32))), OpValueError, "rms_norm",
     "trailing dims"),
    ("rms_norm-eps0", lambda: ops.rms_norm(X, Tensor(np.ones(4, np.float32)), 0.0), OpValueError, "rms_norm",
     "(0, 1]"),
    ("rms_norm-eps-big", lambda: ops.rms_norm(X, Tensor(np.ones(4, np.float32)), 2.0), OpValueError, "rms_norm",
     "'epsilon'"),
    # ---- cross_entropy / nll_loss
    ("ce-int-input", lambda: ops.cross_entropy(I, Tensor(np.array([0, 1]))), OpTypeError, "cross_entropy",
     "floating"),
    ("ce-0d-input", lambda: ops.cross_entropy(S, Tensor(np.array(0))), OpValueError, "cross_entropy", "(N, C)"),
    ("ce-target-shape", lambda: ops.cross_entropy(LOGITS, Tensor(np.array([0, 1]))), OpValueError,
     "cross_entropy", "'target' of shape (4,)"),
    ("ce-target-bool", lambda: ops.cross_entropy(LOGITS, Tensor(np.ones(4, bool))), OpTypeError, "cross_entropy",
     "class indices"),
    ("ce-prob-shape", lambda: ops.cross_entropy(LOGITS, Tensor(np.ones((4, 4), np.float32))), OpValueError,
     "cross_entropy", "probability 'target'"),
    ("ce-reduction", lambda: ops.cross_entropy(LOGITS, T, reduction="avg"), OpValueError, "cross_entropy",
     "'reduction' in"),
    ("ce-smoothing", lambda: ops.cross_entropy(LOGITS, T, label_smoothing=1.5), OpValueError, "cross_entropy",
     "'label_smoothing'"),
    ("ce-ignore-float", lambda: ops.cross_entropy(LOGITS, T, ignore_index=1.0), OpTypeError, "cross_entropy",
     "'ignore_index' to be an int"),
    ("ce-weight-shape", lambda: ops.cross_entropy(LOGITS, T, Tensor(np.ones(4, np.float32))), OpValueError,
     "cross_entropy", "'weight' of shape (5,)"),
    ("ce-target-range", lambda: ops.cross_entropy(LOGITS, Tensor(np.array([0, 1, 5, 2]))), OpIndexError,
     "cross_entropy", "target class indices in [0, 5)"),
    ("ce-target-negative", lambda: ops.cross_entropy(LOGITS, Tensor(np.array([0, -1, 1, 2]))), OpIndexError,
     "cross_entropy", "ignore_index=-100"),
    ("ce-no-classes", lambda: ops.cross_entropy(Tensor(np.zeros((3, 0), np.float32)), Tensor(np.zeros(3, np.int64))),
     OpValueError, "cross_entropy", "at least one class"),
    ("nll-float-target", lambda: ops.nll_loss(LOGITS, Tensor(np.ones((4, 5), np.float32))), OpTypeError,
     "nll_loss", "class indices"),
    ("nll-target-range", lambda: ops.nll_loss(LOGITS, Tensor(np.array([9, 0, 0, 0]))), OpIndexError, "nll_loss",
     "[0, 5)"),
    ("nll-target-not-tensor", lambda: ops.nll_loss(LOGITS, [0, 1, 2, 3]), OpTypeError, "nll_loss", "Tensor"),
    # ---- mse_loss / binary_cross_entropy_with_logits
    ("mse-broadcast", lambda: ops.mse_loss(X, Tensor(np.ones(3, np.float32))), OpValueError, "mse_loss", "broadcast"),
    ("mse-reduction", lambda: ops.mse_loss(X, X, "max"), OpValueError, "mse_loss", "'reduction'"),
    ("mse-int", lambda: ops.mse_loss(I, I), OpTypeError, "mse_loss", "floating"),
    ("bce-label-shape", lambda: ops.binary_cross_entropy_with_logits(X, Tensor(np.ones(4, np.float32))),
     OpValueError, "binary_cross_entropy_with_logits", "'label' of the logits' shape"),
    ("bce-pos-weight", lambda: ops.binary_cross_entropy_with_logits(X, X, None, Tensor(np.ones(3, np.float32))),
     OpValueError, "binary_cross_entropy_with_logits", "broadcast"),
    ("bce-weight-grows", lambda: ops.binary_cross_entropy_with_logits(X, X, Tensor(np.ones((2, 3, 4), np.float32))),
     OpValueError, "binary_cross_entropy_with_logits", "'weight' that broadcasts to"),
    # ---- dropout
    ("dropout-p", lambda: ops.dropout(X, 1.5), OpValueError, "dropout", "'p' as a finite float in [0, 1)"),
    ("dropout-p-str", lambda: ops.dropout(X, "0.5"), OpTypeError, "dropout", "'p' to be a float"),
    ("dropout-int", lambda: ops.dropout(I), OpTypeError, "dropout", "floating"),
    ("dropout-seed", lambda: ops.dropout(X, 0.5, True, "seed"), OpValueError, "dropout", "'seed'"),
    ("dropout-training", lambda: ops.dropout(X, 0.5, "yes"), OpTypeError, "dropout", "'training' to be a bool"),
    # ---- conv2d
    ("conv-rank", lambda: ops.conv2d(X, W), OpValueError, "conv2d", "rank 4"),
    ("conv-channels", lambda: ops.conv2d(IMG, Tensor(np.zeros((4, 2, 3, 3), np.float32))), OpValueError,
     "conv2d", "C_in / groups"),
    ("conv-groups", lambda: ops.conv2d(IMG, W, groups=2), OpValueError, "conv2d", "'groups' dividing"),
    ("conv-groups-zero", lambda: ops.conv2d(IMG, W, groups=0), OpValueError, "conv2d", "'groups' >= 1"),
    ("conv-pad-mode", lambda: ops.conv2d(IMG, W, pad_mode="full"), OpValueError, "conv2d", "pad_mode in"),
    ("conv-padding-valid", lambda: ops.conv2d(IMG, W, padding=1), OpValueError, "conv2d",
     "padding=0 unless pad_mode='pad'"),
    ("conv-padding-3", lambda: ops.conv2d(IMG, W, pad_mode="pad", padding=(1, 1, 1)), OpTypeError, "conv2d",
     "tuple of 2 or 4 ints"),
    ("conv-padding-neg", lambda: ops.conv2d(IMG, W, pad_mode="pad", padding=-1), OpValueError, "conv2d",
     "non-negative 'padding'"),
    ("conv-too-small", lambda: ops.conv2d(IMG, Tensor(np.zeros((4, 3, 7, 7), np.float32))), OpValueError,
     "conv2d", "an input of at least 7"),
    ("conv-dtype", lambda: ops.conv2d(IMG, Tensor(np.zeros((4, 3, 3, 3)))), OpTypeError, "conv2d", "same dtype"),
    ("conv-stride0", lambda: ops.conv2d(IMG, W, stride=0), OpValueError, "conv2d", "'stride' values >= 1"),
    ("conv-stride-str", lambda: ops.conv2d(IMG, W, stride="2"), OpTypeError, "conv2d", "'stride'"),
    ("conv-dilation-3", lambda: ops.conv2d(IMG, W, dilation=(1, 2, 3)), OpTypeError, "conv2d", "'dilation'"),
    ("conv-bias", lambda: ops.conv2d(IMG, W, Tensor(np.zeros(3, np.float32))), OpValueError, "conv2d",
     "'bias' of shape (4,)"),
    ("conv-int", lambda: ops.conv2d(Tensor(np.zeros((1, 3, 6, 6), np.int32)), Tensor(np.zeros((4, 3, 3, 3), np.int32))),
     OpTypeError, "conv2d", "floating"),
    # ---- pools
    ("maxpool-rank", lambda: ops.max_pool2d(X, 2), OpValueError, "max_pool2d", "rank 4"),
    ("maxpool-kernel0", lambda: ops.max_pool2d(IMG, 0), OpValueError, "max_pool2d", "'kernel_size' values >= 1"),
    ("maxpool-pad-half", lambda: ops.max_pool2d(IMG, 2, padding=2), OpValueError, "max_pool2d", "at most half"),
    ("maxpool-int", lambda: ops.max_pool2d(Tensor(np.zeros((1, 1, 4, 4), np.int64)), 2), OpTypeError,
     "max_pool2d", "floating"),
    ("maxpool-ceil", lambda: ops.max_pool2d(IMG, 2, ceil_mode="yes"), OpTypeError, "max_pool2d", "bools"),
    ("maxpool-too-big", lambda: ops.max_pool2d(IMG, 7), OpValueError, "max_pool2d", "an input of at least 7"),
    ("avgpool-padding", lambda: ops.avg_pool2d(IMG, 2, 2, (1, 1, 1)), OpTypeError, "avg_pool2d",
     "tuple of 2 or 4 ints"),
    ("avgpool-divisor", lambda: ops.avg_pool2d(IMG, 2, 2, 0, False, True, -1), OpValueError, "avg_pool2d",
     "'divisor_override' >= 0"),
    ("avgpool-divisor-float", lambda: ops.avg_pool2d(IMG, 2, 2, 0, False, True, 1.5), OpTypeError, "avg_pool2d",
     "'divisor_override' to be an int"),
    ("avgpool-stride", lambda: ops.avg_pool2d(IMG, 2, (1, 0)), OpValueError, "avg_pool2d", "'stride' values >= 1"),
    ("avgpool-include-pad", lambda: ops.avg_pool2d(IMG, 2, 2, 0, False, 1), OpTypeError, "avg_pool2d", "bools"),
    ("avgpool-not-tensor", lambda: ops.avg_pool2d(np.zeros((1, 1, 4, 4)), 2), OpTypeError, "avg_pool2d", "Tensor"),
]


@pytest.mark.parametrize("call,err,op,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_minispore_error(call, err, op, expected):
    with pytest.raises(err) as info:
        call()
    msg = str(info.value)
    assert f"For '{op}'" in msg, msg
    assert expected in msg, msg
    assert "test_bad_input_nn_ops.py" in msg, msg          # points at the caller's line


def test_inference_alone_rejects_bad_shapes():
    """The inference rules (all that DryRun and graph capture run) reject what the kernels would
    choke on, and give output shapes for what they accept."""
    f32 = mstype.float32
    conv = get_primitive("conv2d")
    attrs = dict(stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    with pytest.raises(OpValueError):
        conv.infer(AbstractTensor((1, 3, 2, 2), f32), AbstractTensor((4, 3, 3, 3), f32), **attrs)
    assert conv.infer(AbstractTensor((1, 3, 5, 5), f32), AbstractTensor((4, 3, 3, 3), f32), **attrs).shape == (1, 4, 3, 3)
    ce = get_primitive("cross_entropy")
    ce_attrs = dict(ignore_index=-100, reduction="none", label_smoothing=0.0)
    with pytest.raises(OpValueError):
        ce.infer(AbstractTensor((4, 5, 2), f32), AbstractTensor((4,), mstype.int64), None, **ce_attrs)
    assert ce.infer(AbstractTensor((4, 5, 2), f32), AbstractTensor((4, 2), mstype.int64), None, **ce_attrs).shape == (4, 2)
    pool = get_primitive("max_pool2d")
    y, idx = pool.infer(AbstractTensor((1, 1, 5, 5), f32), kernel=(2, 2), stride=(2, 2), pads=(0, 0, 0, 0),
                        dilation=(1, 1), ceil_mode=True)
    assert y.shape == (1, 1, 3, 3) and idx.dtype is mstype.int64
