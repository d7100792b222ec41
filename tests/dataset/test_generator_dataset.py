"""mindspore.dataset.GeneratorDataset + batch + iterators, on MindSpore's documented behaviour."""
import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpTypeError, OpValueError
from minispore.dataset import GeneratorDataset


class RandomAccess:
    """MindSpore's random-accessible source: __getitem__ and __len__."""

    def __init__(self, n=8):
        self.n = n

    def __getitem__(self, i):
        return np.full((2,), i, np.float32), np.int32(i)

    def __len__(self):
        return self.n


def _rows(ds, **kw):
    return [[v.tolist() for v in row] for row in ds.create_tuple_iterator(output_numpy=True, **kw)]


def test_eight_rows_batch_four_gives_two_batches():
    ds = GeneratorDataset(RandomAccess(8), column_names=["data", "label"], shuffle=False).batch(4)
    assert ds.get_dataset_size() == 2 and ds.get_batch_size() == 4
    batches = list(ds.create_tuple_iterator())
    assert len(batches) == 2
    data, label = batches[0]
    assert isinstance(data, ms.Tensor) and data.shape == (4, 2) and data.dtype == ms.float32
    assert label.dtype == ms.int32 and label.asnumpy().tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(batches[1][0].asnumpy()[:, 0], [4, 5, 6, 7])


@pytest.mark.parametrize("n,drop,expected", [(10, False, [4, 4, 2]), (10, True, [4, 4]), (3, True, [])])
def test_remainder(n, drop, expected):
    ds = GeneratorDataset(RandomAccess(n), ["data", "label"], shuffle=False).batch(4, drop_remainder=drop)
    sizes = [len(b[1]) for b in ds.create_tuple_iterator(output_numpy=True)]
    assert sizes == expected and ds.get_dataset_size() == len(expected)


def test_random_access_shuffles_by_default_reproducibly_and_per_epoch():
    ds = GeneratorDataset(RandomAccess(50), ["data", "label"])          # shuffle=None -> shuffled
    ms.set_seed(0)
    it = ds.create_tuple_iterator(output_numpy=True, num_epochs=2)
    epoch1 = [int(r[1]) for r in it]
    epoch2 = [int(r[1]) for r in it]
    assert sorted(epoch1) == sorted(epoch2) == list(range(50))
    assert epoch1 != list(range(50)) and epoch1 != epoch2
    assert list(it) == []                                                # num_epochs=2 used up
    ms.set_seed(0)
    assert [int(r[1]) for r in ds.create_tuple_iterator(output_numpy=True)] == epoch1


def test_generator_function_iterable_and_num_samples():
    def gen():
        for i in range(6):
            yield (np.array([i, i * i]),)

    ds = GeneratorDataset(gen, column_names="sq")
    assert _rows(ds) == [[[i, i * i]] for i in range(6)]
    assert _rows(ds) == _rows(ds)                    # called again for each epoch
    assert ds.get_dataset_size() == 6
    assert GeneratorDataset(gen, ["sq"], num_samples=4).get_dataset_size() == 4
    once = GeneratorDataset(iter([(1,), (2,)]), ["x"])                   # an iterator: one pass only
    assert _rows(once) == [[1], [2]] and _rows(once) == []
    reusable = GeneratorDataset([[1, 2], [3, 4], [5, 6]], ["a", "b"], num_samples=2, shuffle=False)
    assert _rows(reusable) == [[1, 2], [3, 4]]
    scalars = GeneratorDataset(lambda: iter([1.5, 2.5]), "x")           # bare values for one column
    assert [r[0].dtype for r in scalars.create_tuple_iterator()] == [ms.float64, ms.float64]


def test_column_selection_and_dict_iterator():
    ds = GeneratorDataset(RandomAccess(4), ["data", "label"], shuffle=False)
    assert ds.get_col_names() == ["data", "label"]
    assert _rows(ds, columns="label") == [[0], [1], [2], [3]]
    assert _rows(ds, columns=["label", "data"])[1] == [1, [1.0, 1.0]]
    rows = list(ds.batch(2).create_dict_iterator())
    assert list(rows[0]) == ["data", "label"] and rows[1]["label"].asnumpy().tolist() == [2, 3]
    assert [int(r[1].asnumpy()) for r in ds] == [0, 1, 2, 3]              # iterating the dataset itself


def test_errors_are_clear():
    def gen():
        yield (np.zeros(2), np.zeros(3))

    cases = [
        (lambda: GeneratorDataset(gen), "column_names"),
        (lambda: GeneratorDataset(gen, ["a", "a"]), "distinct"),
        (lambda: GeneratorDataset(gen, ["a"], shuffle=True), "shuffle"),
        (lambda: GeneratorDataset(42, ["a"]), "random-accessible"),
        (lambda: GeneratorDataset(gen, ["a"], num_shards=2, shard_id=0), "num_shards"),
        (lambda: GeneratorDataset(gen, ["a"], num_samples=0), "num_samples"),
        (lambda: list(GeneratorDataset(gen, ["a"])), "rows of 1 values"),
        (lambda: list(GeneratorDataset(lambda: iter([np.ones(1), np.ones(2)]), ["a"]).batch(2)), "one shape"),
        (lambda: GeneratorDataset(gen, ["a", "b"]).batch(0), "batch_size"),
        (lambda: GeneratorDataset(gen, ["a", "b"]).batch(2, per_batch_map=len), "per_batch_map"),
        (lambda: GeneratorDataset(gen, ["a", "b"]).create_tuple_iterator(columns=["c"]), "columns"),
        (lambda: GeneratorDataset(gen, ["a", "b"]).create_tuple_iterator(num_epochs=0), "num_epochs"),
        (lambda: list(GeneratorDataset(lambda: iter([(object(),)]), ["a"])), "numeric"),
    ]
    for call, phrase in cases:
        with pytest.raises((OpValueError, OpTypeError)) as info:
            call()
        assert phrase in str(info.value), str(info.value)
