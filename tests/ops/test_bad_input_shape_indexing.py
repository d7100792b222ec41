"""Bad input to the shape_extra and indexing ops raises a minispore error that names the op
(never a raw NumPy traceback), and a rejected write leaves the tensor untouched."""
import numpy as np
import pytest

from minispore import OpTypeError, OpValueError, Tensor, ops
from minispore.common.errors import OpIndexError

x34 = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
x1 = Tensor(np.ones((1, 3, 1), np.float32))
idx = Tensor(np.array([0, 2]))

CASES = [
    # shape_extra ------------------------------------------------------------------------------
    ("squeeze", OpValueError, lambda: ops.squeeze(x1, 1)),                     # size 3, not 1
    ("squeeze", OpIndexError, lambda: ops.squeeze(x1, 5)),
    ("squeeze", OpTypeError, lambda: ops.squeeze(np.ones((1, 2)))),
    ("expand_dims", OpIndexError, lambda: ops.expand_dims(x34, 3)),
    ("expand_dims", OpTypeError, lambda: ops.expand_dims(x34, 1.0)),
    ("expand_dims", OpIndexError, lambda: ops.unsqueeze(x34, -4)),
    ("flatten", OpValueError, lambda: ops.flatten(x34, "X")),
    ("flatten", OpTypeError, lambda: ops.flatten(x34, 3)),
    ("flatten", OpValueError, lambda: ops.flatten(x34, start_dim=1, end_dim=0)),
    ("flatten", OpValueError, lambda: ops.flatten(x34, start_dim=2)),
    ("flatten", OpTypeError, lambda: ops.flatten(x34, start_dim=0.5)),
    ("concat", OpValueError, lambda: ops.concat([x34, Tensor(np.ones((3, 5), np.float32))], 0)),
    ("concat", OpValueError, lambda: ops.concat([])),
    ("concat", OpTypeError, lambda: ops.concat(x34)),
    ("concat", OpTypeError, lambda: ops.concat([x34, np.ones((3, 4))])),
    ("concat", OpIndexError, lambda: ops.concat([x34, x34], 2)),
    ("concat", OpValueError, lambda: ops.concat([Tensor(1.0), Tensor(2.0)])),
    ("stack", OpValueError, lambda: ops.stack([x34, Tensor(np.ones((4, 3), np.float32))])),
    ("stack", OpIndexError, lambda: ops.stack([x34, x34], 3)),
    ("split", OpValueError, lambda: ops.split(x34, (1, 1), 0)),             # sections sum to 2, not 3
    ("split", OpValueError, lambda: ops.split(x34, 0)),
    ("split", OpTypeError, lambda: ops.split(x34, 1.5)),
    ("split", OpIndexError, lambda: ops.split(x34, 1, 2)),
    ("chunk", OpValueError, lambda: ops.chunk(x34, 0)),
    ("chunk", OpTypeError, lambda: ops.chunk(x34, 2.0)),
    ("tile", OpValueError, lambda: ops.tile(x34, (2, -1))),
    ("tile", OpTypeError, lambda: ops.tile(x34, 2)),
    ("repeat_interleave", OpValueError, lambda: ops.repeat_interleave(x34, [1, 2], 1)),
    ("repeat_interleave", OpValueError, lambda: ops.repeat_interleave(x34, -1, 0)),
    ("repeat_interleave", OpTypeError, lambda: ops.repeat_interleave(x34, 1.5, 0)),
    ("flip", OpValueError, lambda: ops.flip(x34, (0, 0))),
    ("flip", OpIndexError, lambda: ops.flip(x34, (2,))),
    ("tril", OpValueError, lambda: ops.tril(Tensor(np.ones(3, np.float32)))),
    ("triu", OpTypeError, lambda: ops.triu(x34, 0.5)),
    ("pad", OpValueError, lambda: ops.pad(x34, (1, 2, 3))),
    ("pad", OpValueError, lambda: ops.pad(x34, (1, 1), mode="mirror")),
    ("pad", OpValueError, lambda: ops.pad(x34, (4, 0), mode="reflect")),      # pad >= dim size
    ("pad", OpValueError, lambda: ops.pad(x34, (-1, 0), mode="replicate")),
    ("pad", OpValueError, lambda: ops.pad(x34, (-3, -2))),                    # crops more than 4
    ("pad", OpValueError, lambda: ops.pad(x34, (1, 1), mode="reflect", value=2.0)),
    ("pad", OpTypeError, lambda: ops.pad(x34, (1.0, 1))),
    # getitem ---------------------------------------------------------------------------------
    ("getitem", OpIndexError, lambda: x34[3]),
    ("getitem", OpIndexError, lambda: x34[0, -5]),
    ("getitem", OpIndexError, lambda: x34[Tensor(np.array([0, 3]))]),          # value out of range
    ("getitem", OpIndexError, lambda: x34[:, [4]]),
    ("getitem", OpIndexError, lambda: x34[0, 0, 0]),                          # too many indices
    ("getitem", OpIndexError, lambda: x34[Tensor(np.array([0.0, 1.0]))]),     # float index
    ("getitem", OpIndexError, lambda: x34[Tensor(np.ones((2, 4), bool))]),    # mask shape
    ("getitem", OpIndexError, lambda: x34[..., ...]),
    ("getitem", OpValueError, lambda: x34[::0]),
    ("getitem", OpIndexError, lambda: x34[[0, 1], [0, 1, 2]]),                # shapes do not broadcast
    ("getitem", OpIndexError, lambda: x34["a"]),
    ("getitem", OpTypeError, lambda: x34[1.5:]),
    ("getitem", OpIndexError, lambda: x34[False]),
    # gather family ---------------------------------------------------------------------------
    ("gather", OpTypeError, lambda: ops.gather(x34, Tensor(np.array([0.5])), 0)),
    ("gather", OpIndexError, lambda: ops.gather(x34, Tensor(np.array([0, 3])), 0)),
    ("gather", OpIndexError, lambda: ops.gather(x34, Tensor(np.array([-1])), 0)),
    ("gather", OpIndexError, lambda: ops.gather(x34, idx, 2)),
    ("gather", OpValueError, lambda: ops.gather(x34, Tensor(np.zeros((4, 1), np.int64)), 1, batch_dims=1)),
    ("gather", OpValueError, lambda: ops.gather(Tensor(1.0), idx, 0)),
    ("index_select", OpValueError, lambda: ops.index_select(x34, 0, Tensor(np.zeros((1, 1), np.int64)))),
    ("index_select", OpTypeError, lambda: ops.index_select(x34, 0, Tensor(np.zeros(2, np.float32)))),
    ("gather_elements", OpValueError, lambda: ops.gather_elements(x34, 0, idx)),          # rank
    ("gather_elements", OpValueError, lambda: ops.gather_elements(x34, 0, Tensor(np.zeros((2, 5), np.int64)))),
    ("gather_elements", OpIndexError, lambda: ops.gather_elements(x34, 1, Tensor(np.full((3, 4), 4)))),
    ("scatter", OpValueError, lambda: ops.scatter(x34, 0, Tensor(np.zeros((2, 4), np.int64)),
                                                  Tensor(np.ones((2, 3), np.float32)))),
    ("scatter", OpIndexError, lambda: ops.scatter(x34, 0, Tensor(np.full((1, 4), 3)),
                                                  Tensor(np.ones((1, 4), np.float32)))),
    ("masked_fill", OpTypeError, lambda: ops.masked_fill(x34, Tensor(np.ones((3, 4), np.float32)), 0.0)),
    ("masked_fill", OpValueError, lambda: ops.masked_fill(x34, Tensor(np.ones((2, 4), bool)), 0.0)),
    ("masked_fill", OpValueError, lambda: ops.masked_fill(x34, Tensor(np.ones(4, bool)), Tensor(np.ones(2)))),
    ("masked_fill", OpTypeError, lambda: ops.masked_fill(x34, Tensor(np.ones(4, bool)), "1")),
    ("one_hot", OpTypeError, lambda: ops.one_hot(Tensor(np.array([0.0, 1.0])), 3)),
    ("one_hot", OpValueError, lambda: ops.one_hot(idx, -1)),
    ("one_hot", OpValueError, lambda: ops.one_hot(idx, 3, axis=2)),
    ("one_hot", OpTypeError, lambda: ops.one_hot(idx, 3, on_value="1")),
    ("embedding", OpIndexError, lambda: ops.embedding(Tensor(np.array([0, 5])), Tensor(np.ones((5, 2))))),
    ("embedding", OpValueError, lambda: ops.embedding(idx, Tensor(np.ones(5)))),
    ("embedding", OpTypeError, lambda: ops.embedding(Tensor(np.array([0.0])), Tensor(np.ones((5, 2))))),
    ("embedding", OpValueError, lambda: ops.embedding(idx, Tensor(np.ones((5, 2))), padding_idx=5)),
]


@pytest.mark.parametrize("op,err,call", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_raises_minispore_error_naming_op(op, err, call):
    with pytest.raises(err) as info:
        call()
    assert f"For '{op}'" in str(info.value)


SETITEM_CASES = [
    (OpIndexError, lambda t: t.__setitem__(3, 1.0)),
    (OpIndexError, lambda t: t.__setitem__(Tensor(np.array([1, 7])), 1.0)),        # data out of range
    (OpIndexError, lambda t: t.__setitem__((0, [4]), 1.0)),
    (OpValueError, lambda t: t.__setitem__(0, Tensor(np.ones(3, np.float32)))),    # value (3,) vs row (4,)
    (OpValueError, lambda t: t.__setitem__(slice(None), Tensor(np.ones((2, 3, 4), np.float32)))),
    (OpTypeError, lambda t: t.__setitem__(0, "x")),
    (OpIndexError, lambda t: t.__setitem__(Tensor(np.ones((3, 3), bool)), 0.0)),
]


@pytest.mark.parametrize("err,call", SETITEM_CASES)
def test_bad_setitem_raises_and_leaves_the_tensor_unchanged(err, call):
    t = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    before, version = t.asnumpy().copy(), t._version
    with pytest.raises(err) as info:
        call(t)
    assert "For 'setitem'" in str(info.value)
    np.testing.assert_array_equal(t.asnumpy(), before)
    assert t._version == version


def test_setitem_into_a_read_only_broadcast_view_is_refused():
    b = ops.broadcast_to(Tensor(np.ones(3, np.float32)), (2, 3))
    with pytest.raises(OpValueError, match="For 'setitem'"):
        b[0, 0] = 5.0


def test_error_points_at_the_callers_line():
    with pytest.raises(OpIndexError) as info:
        x34[7]
    assert "test_bad_input_shape_indexing.py" in str(info.value)
