"""`mindspore.dataset.GeneratorDataset` and `.batch()`: a Python data source as a dataset pipeline.

    ds = GeneratorDataset(source, column_names=["x", "y"], shuffle=True)
    ds = ds.batch(4, drop_remainder=False)
    for x, y in ds.create_tuple_iterator():      # lists of Tensors, one per column
        ...
    ds.get_dataset_size()                        # batches per epoch: 8 rows / batch 4 -> 2

`source` can be (MindSpore's three kinds):

* *random-accessible*: has `__getitem__` and `__len__` (a list, or a class). Rows are read by index,
  so they can be shuffled (the default) and counted without reading them;
* *iterable*: has `__iter__` (e.g. a generator object, iterated once, or a reusable iterable);
* a *generator function*: a callable returning an iterator; called once per epoch.

Each row is a tuple with one value per column (a bare value is accepted when there is one column);
values become NumPy arrays (`np.asarray`) and, unless `output_numpy=True`, Tensors. minispore
produces rows in the calling thread: `num_parallel_workers` and `python_multiprocessing` are accepted
for compatibility and do not start workers. Shuffling draws from minispore's global RNG, so
`ms.set_seed` fixes the order; each epoch is reshuffled.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..common import context
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor


class Dataset:
    """The pipeline stage interface: `_rows()` yields one epoch of rows (tuples of ndarrays)."""

    column_names: list

    def _rows(self):
        raise NotImplementedError

    def _num_rows(self) -> int:
        """Rows per epoch; the default counts them by running an epoch (MindSpore does the same for
        sources without `__len__`)."""
        return sum(1 for _ in self._rows())

    # -- the public pipeline API --------------------------------------------------------------------
    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, per_batch_map=None,
              input_columns=None, output_columns=None, python_multiprocessing=False, max_rowsize=None):
        """Group `batch_size` consecutive rows, stacking each column along a new first axis.

        The last, smaller batch is kept unless `drop_remainder=True`. `per_batch_map`,
        `input_columns` and `output_columns` are not supported.
        """
        for name, value in (("per_batch_map", per_batch_map), ("input_columns", input_columns),
                            ("output_columns", output_columns)):
            if value is not None:
                raise OpValueError("Dataset.batch", f"'{name}'=None (not supported by minispore)", repr(value))
        return BatchDataset(self, batch_size, drop_remainder)

    def get_dataset_size(self) -> int:
        """Number of rows (batches, after `.batch`) in one epoch."""
        return self._num_rows()

    def get_col_names(self) -> list:
        return list(self.column_names)

    def get_batch_size(self) -> int:
        return 1

    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=False):
        """An iterator over rows, each a list with one Tensor (or ndarray) per column.

        Each pass of a `for` loop over the iterator is one epoch; it allows `num_epochs` passes
        (-1: unlimited).
        """
        return _DatasetIterator(self, columns, num_epochs, output_numpy, as_dict=False)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=False):
        """Like `create_tuple_iterator`, but each row is a dict {column name: value}."""
        return _DatasetIterator(self, None, num_epochs, output_numpy, as_dict=True)

    def __iter__(self):
        return iter(self.create_tuple_iterator())


class _DatasetIterator:
    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict):
        op = "create_tuple_iterator"
        if not isinstance(num_epochs, numbers.Integral) or isinstance(num_epochs, bool) \
                or (num_epochs < 1 and num_epochs != -1):
            raise OpValueError(op, "'num_epochs' as a positive int or -1", repr(num_epochs))
        names = dataset.column_names
        if columns is None:
            self._index = list(range(len(names)))
        else:
            columns = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise OpValueError(op, f"'columns' among {names}", repr(unknown))
            self._index = [names.index(c) for c in columns]
        self._names = [names[i] for i in self._index]
        self._dataset, self._num_epochs = dataset, int(num_epochs)
        self._output_numpy, self._as_dict = bool(output_numpy), as_dict
        self._epochs_started, self._rows = 0, None

    def __iter__(self):
        return self

    def __next__(self):
        if self._rows is None:                      # start an epoch
            if self._num_epochs != -1 and self._epochs_started >= self._num_epochs:
                raise StopIteration
            self._rows = iter(self._dataset._rows())
            self._epochs_started += 1
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None                       # the next `for` starts the next epoch
            raise
        values = [row[i] if self._output_numpy else Tensor(row[i]) for i in self._index]
        return dict(zip(self._names, values)) if self._as_dict else values


def _to_row(op, row, n_columns):
    if not isinstance(row, (tuple, list)):
        if n_columns != 1:
            raise OpValueError(op, f"rows as tuples of {n_columns} values (one per column)",
                               f"a single {type(row).__name__}")
        row = (row,)
    if len(row) != n_columns:
        raise OpValueError(op, f"rows of {n_columns} values (one per column)", f"a row of {len(row)} values")
    out = []
    for value in row:
        arr = value.asnumpy() if isinstance(value, Tensor) else np.asarray(value)
        if arr.dtype == object:
            raise OpTypeError(op, "row values convertible to numeric arrays", f"{type(value).__name__} {value!r:.60}")
        out.append(arr)
    return tuple(out)


class GeneratorDataset(Dataset):
    """A dataset whose rows come from Python (see the module docstring for the kinds of `source`).

    Args follow MindSpore: `column_names` (required here: a str or list of str), `shuffle` (None:
    shuffle random-accessible sources, keep order for iterables; True for an iterable is an error),
    `num_samples` (use only the first rows, after shuffling). `column_types`, `schema`, `sampler`,
    `num_shards`, `shard_id` are not supported; `num_parallel_workers`, `python_multiprocessing` and
    `max_rowsize` are accepted and ignored.
    """

    def __init__(self, source, column_names=None, column_types=None, schema=None, num_samples=None,
                 num_parallel_workers=1, shuffle=None, sampler=None, num_shards=None, shard_id=None,
                 python_multiprocessing=True, max_rowsize=None):
        op = "GeneratorDataset"
        for name, value in (("column_types", column_types), ("schema", schema), ("sampler", sampler),
                            ("num_shards", num_shards), ("shard_id", shard_id)):
            if value is not None:
                raise OpValueError(op, f"'{name}'=None (not supported by minispore)", repr(value)[:60])
        if isinstance(column_names, str):
            column_names = [column_names]
        if not isinstance(column_names, (list, tuple)) or not column_names \
                or not all(isinstance(c, str) and c for c in column_names):
            raise OpValueError(op, "'column_names' as a str or a non-empty list of str", repr(column_names))
        if len(set(column_names)) != len(column_names):
            raise OpValueError(op, "distinct 'column_names'", repr(column_names))
        if num_samples is not None and (not isinstance(num_samples, numbers.Integral)
                                        or isinstance(num_samples, bool) or num_samples < 1):
            raise OpValueError(op, "'num_samples' as a positive int or None", repr(num_samples))
        if shuffle is not None and not isinstance(shuffle, bool):
            raise OpTypeError(op, "'shuffle' to be a bool or None", type(shuffle).__name__)

        if hasattr(source, "__getitem__") and hasattr(source, "__len__"):
            self._kind = "random_access"
        elif hasattr(source, "__iter__"):
            self._kind = "iterable"
        elif callable(source):
            self._kind = "generator_function"
        else:
            raise OpTypeError(op, "'source' to be random-accessible (__getitem__ and __len__), iterable, "
                              "or a callable returning an iterator", type(source).__name__)
        if shuffle and self._kind != "random_access":
            raise OpValueError(op, "shuffle=None or False for a source without __getitem__ and __len__",
                               "shuffle=True")
        self.source = source
        self.column_names = list(column_names)
        self.num_samples = None if num_samples is None else int(num_samples)
        self.shuffle = self._kind == "random_access" if shuffle is None else shuffle

    def _rows(self):
        op = "GeneratorDataset"
        n_cols = len(self.column_names)
        if self._kind == "random_access":
            order = np.arange(len(self.source))
            if self.shuffle:
                order = context.rng().permutation(order)
            if self.num_samples is not None:
                order = order[:self.num_samples]
            for i in order:
                yield _to_row(op, self.source[int(i)], n_cols)
            return
        it = self.source() if self._kind == "generator_function" else self.source
        for count, row in enumerate(it):
            if self.num_samples is not None and count >= self.num_samples:
                return
            yield _to_row(op, row, n_cols)

    def _num_rows(self) -> int:
        if self._kind == "random_access":
            n = len(self.source)
            return n if self.num_samples is None else min(n, self.num_samples)
        return super()._num_rows()


class BatchDataset(Dataset):
    """Rows of `child` grouped `batch_size` at a time (made by `Dataset.batch`)."""

    def __init__(self, child: Dataset, batch_size, drop_remainder=False):
        op = "Dataset.batch"
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size < 1:
            raise OpValueError(op, "'batch_size' as a positive int", repr(batch_size))
        if not isinstance(drop_remainder, bool):
            raise OpTypeError(op, "'drop_remainder' to be a bool", type(drop_remainder).__name__)
        self.child, self.batch_size, self.drop_remainder = child, int(batch_size), drop_remainder
        self.column_names = list(child.column_names)

    def get_batch_size(self) -> int:
        return self.batch_size

    def _stack(self, rows):
        out = []
        for c, name in enumerate(self.column_names):
            shapes = {r[c].shape for r in rows}
            if len(shapes) > 1:
                raise OpValueError("Dataset.batch", f"rows of one shape in column '{name}' to batch them",
                                   f"shapes {sorted(shapes)}")
            out.append(np.stack([r[c] for r in rows]))
        return tuple(out)

    def _rows(self):
        pending = []
        for row in self.child._rows():
            pending.append(row)
            if len(pending) == self.batch_size:
                yield self._stack(pending)
                pending = []
        if pending and not self.drop_remainder:
            yield self._stack(pending)

    def _num_rows(self) -> int:
        n = self.child._num_rows()
        return n // self.batch_size if self.drop_remainder else math.ceil(n / self.batch_size)


__all__ = ["GeneratorDataset", "BatchDataset", "Dataset"]
