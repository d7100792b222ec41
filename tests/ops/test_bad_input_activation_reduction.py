"""Bad input to the activation, reduction_extra and sorting ops raises a minispore error that names
the op and says what was expected — raised by inference, before any kernel runs."""
import numpy as np
import pytest

from minispore import Tensor, ops
from minispore.common.errors import OpIndexError, OpTypeError, OpValueError

X = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
V = Tensor(np.arange(5, dtype=np.float32))
I = Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
B = Tensor(np.array([True, False]))
S = Tensor(np.array(1.5, dtype=np.float32))
EMPTY = Tensor(np.zeros((2, 0), dtype=np.float32))

CASES = [
    # (id, call, error class, op named in the message, a fragment of what was expected)
    # ---- activations
    ("relu-bool", lambda: ops.relu(B), OpTypeError, "relu", "numeric dtype"),
    ("relu-list", lambda: ops.relu([1.0, -1.0]), OpTypeError, "relu", "Tensor"),
    ("gelu-approximate", lambda: ops.gelu(X, approximate="fast"), OpValueError, "gelu", "'none' or 'tanh'"),
    ("gelu-int", lambda: ops.gelu(I), OpTypeError, "gelu", "floating"),
    ("sigmoid-int", lambda: ops.sigmoid(I), OpTypeError, "sigmoid", "floating"),
    ("tanh-none", lambda: ops.tanh(None), OpTypeError, "tanh", "Tensor"),
    ("silu-bool", lambda: ops.silu(B), OpTypeError, "silu", "floating"),
    ("softplus-beta0", lambda: ops.softplus(X, beta=0), OpValueError, "softplus", "non-zero 'beta'"),
    ("softplus-beta-str", lambda: ops.softplus(X, beta="1"), OpTypeError, "softplus", "'beta'"),
    ("softmax-axis-range", lambda: ops.softmax(X, axis=2), OpIndexError, "softmax", "'axis' in [-2, 2)"),
    ("softmax-axis-float", lambda: ops.softmax(X, axis=1.0), OpTypeError, "softmax", "'axis' to be an int"),
    ("softmax-int", lambda: ops.softmax(I), OpTypeError, "softmax", "floating"),
    ("log_softmax-two-axes", lambda: ops.log_softmax(X, (0, 1)), OpValueError, "log_softmax", "one axis"),
    ("leaky_relu-alpha", lambda: ops.leaky_relu(X, alpha="0.1"), OpTypeError, "leaky_relu", "'alpha'"),
    ("elu-alpha-bool", lambda: ops.elu(X, alpha=True), OpTypeError, "elu", "'alpha'"),
    ("hardtanh-bounds", lambda: ops.hardtanh(X, 1.0, -1.0), OpValueError, "hardtanh", "'min_val' <= 'max_val'"),
    ("clamp-no-bounds", lambda: ops.clamp(X), OpValueError, "clamp", "at least one of 'min' and 'max'"),
    ("clamp-bound-str", lambda: ops.clamp(X, "0"), OpTypeError, "clamp", "'min' to be a Tensor"),
    ("clamp-broadcast", lambda: ops.clamp(X, Tensor(np.zeros(3, np.float32))), OpValueError, "clamp", "broadcast"),
    ("clamp-bool", lambda: ops.clip(B, 0, 1), OpTypeError, "clamp", "numeric dtype"),
    # ---- reductions
    ("amax-axis-range", lambda: ops.amax(X, 2), OpIndexError, "amax", "'axis' in [-2, 2)"),
    ("amax-dup-axes", lambda: ops.amax(X, (1, -1)), OpValueError, "amax", "distinct axes"),
    ("amax-keepdims", lambda: ops.amax(X, 0, "yes"), OpTypeError, "amax", "'keepdims' to be a bool"),
    ("amax-empty", lambda: ops.amax(EMPTY, 1), OpValueError, "amax", "'initial'"),
    ("amin-where-no-initial", lambda: ops.amin(X, where=Tensor(np.ones((3, 4), bool))), OpValueError, "amin",
     "'initial' when 'where'"),
    ("max-tuple-axis", lambda: ops.max(X, (0, 1)), OpTypeError, "max", "'axis' to be an int or None"),
    ("max-empty", lambda: ops.max(EMPTY, 1), OpValueError, "max", "non-empty axis"),
    ("max-bool", lambda: ops.max(B), OpTypeError, "max", "numeric dtype"),
    ("max-initial-str", lambda: ops.max(X, 0, initial="0"), OpTypeError, "max", "'initial'"),
    ("min-not-tensor", lambda: ops.min([1.0, 2.0]), OpTypeError, "min", "Tensor"),
    ("argmax-dim", lambda: ops.argmax(X, 5), OpIndexError, "argmax", "'axis' in [-2, 2)"),
    ("argmax-keepdim", lambda: ops.argmax(X, 0, 1), OpTypeError, "argmax", "'keepdim' to be a bool"),
    ("argmin-empty", lambda: ops.argmin(EMPTY), OpValueError, "argmin", "non-empty"),
    ("prod-keep_dims", lambda: ops.prod(X, 0, "no"), OpTypeError, "prod", "'keep_dims' to be a bool"),
    ("var-ddof-negative", lambda: ops.var(X, 0, ddof=-1), OpValueError, "var", "'ddof' >= 0"),
    ("var-ddof-float", lambda: ops.var(X, 0, ddof=0.5), OpTypeError, "var", "'ddof' to be an int"),
    ("std-bool", lambda: ops.std(B), OpTypeError, "std", "numeric dtype"),
    ("logsumexp-axis", lambda: ops.logsumexp(X, 9), OpIndexError, "logsumexp", "'axis' in [-2, 2)"),
    ("cumsum-0d", lambda: ops.cumsum(S, 0), OpValueError, "cumsum", "at least 1 dimension"),
    ("cumsum-axis", lambda: ops.cumsum(X, 2), OpIndexError, "cumsum", "'axis' in [-2, 2)"),
    ("cumprod-axis-str", lambda: ops.cumprod(X, "1"), OpTypeError, "cumprod", "'axis' to be an int"),
    ("all-axis-str", lambda: ops.all(X, "0"), OpTypeError, "all", "'axis' to be an int"),
    ("any-keep_dims", lambda: ops.any(X, 0, None), OpTypeError, "any", "'keep_dims' to be a bool"),
    ("norm-nuc", lambda: ops.norm(X, "nuc"), OpValueError, "norm", "SVD"),
    ("norm-str-vector", lambda: ops.norm(X, "fro", 1), OpValueError, "norm", "numeric 'ord'"),
    ("norm-int", lambda: ops.norm(I), OpTypeError, "norm", "floating"),
    ("norm-3d-ord", lambda: ops.norm(Tensor(np.ones((2, 2, 2))), 1), OpValueError, "norm", "1-D or 2-D"),
    ("norm-same-axes", lambda: ops.norm(X, 1, (0, 0)), OpValueError, "norm", "two different matrix axes"),
    ("norm-matrix-ord", lambda: ops.norm(X, 3, (0, 1)), OpValueError, "norm", "matrix 'ord'"),
    ("norm-three-axes", lambda: ops.norm(X, None, (0, 1, 1)), OpValueError, "norm", "'dim'"),
    # ---- sorting
    ("sort-0d", lambda: ops.sort(S), OpValueError, "sort", "at least 1 dimension"),
    ("sort-axis", lambda: ops.sort(X, 3), OpIndexError, "sort", "'axis' in [-2, 2)"),
    ("sort-descending", lambda: ops.sort(X, -1, "yes"), OpTypeError, "sort", "'descending' to be a bool"),
    ("argsort-list", lambda: ops.argsort([3, 1, 2]), OpTypeError, "sort", "Tensor"),
    ("topk-k-too-big", lambda: ops.topk(V, 6), OpValueError, "topk", "'k' <= the size of dim 0 (5)"),
    ("topk-k-negative", lambda: ops.topk(V, -1), OpValueError, "topk", "'k' >= 0"),
    ("topk-k-float", lambda: ops.topk(V, 1.5), OpTypeError, "topk", "'k' to be an int"),
    ("topk-dim", lambda: ops.topk(X, 1, dim=2), OpIndexError, "topk", "'axis' in [-2, 2)"),
    ("topk-largest", lambda: ops.topk(X, 1, largest=None), OpTypeError, "topk", "'largest' to be a bool"),
]


@pytest.mark.parametrize("call,err,op,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_minispore_error(call, err, op, expected):
    with pytest.raises(err) as info:
        call()
    msg = str(info.value)
    assert f"For '{op}'" in msg, msg
    assert expected in msg, msg
    assert "test_bad_input_activation_reduction.py" in msg, msg      # points at the caller's line


def test_inference_rejects_before_the_kernel_runs():
    """A rejected call leaves no half-made result behind: inference alone decides (so DryRun and
    graph capture, which run inference only, reject the same calls)."""
    from minispore.ops import get_primitive
    from minispore.ops.primitive import AbstractTensor
    from minispore.common import dtype as mstype
    topk = get_primitive("topk")
    with pytest.raises(OpValueError):
        topk.infer(AbstractTensor((3, 4), mstype.float32), k=5, axis=-1, largest=True, sorted=True)
    vals, idx = topk.infer(AbstractTensor((3, 4), mstype.float32), k=2, axis=0, largest=True, sorted=True)
    assert vals.shape == (2, 4) and idx.dtype is mstype.int32
