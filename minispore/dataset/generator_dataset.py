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
for compatibility and do not start workers. Shuffling draws from the iterator's random stream
(pipeline.py), so `ms.set_seed` or `mindspore.dataset.config.set_seed` fixes the order; each epoch is
reshuffled.

`NumpySlicesDataset(data, column_names=None, shuffle=None)` is a GeneratorDataset over in-memory
data sliced along the first axis (a list, an ndarray, a tuple of them, or a dict of columns).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from .pipeline import BatchDataset, Dataset, as_array      # noqa: F401  (BatchDataset: re-exported)


def _to_row(op, row, n_columns):
    if not isinstance(row, (tuple, list)):
        if n_columns != 1:
            raise OpValueError(op, f"rows as tuples of {n_columns} values (one per column)",
                               f"a single {type(row).__name__}")
        row = (row,)
    if len(row) != n_columns:
        raise OpValueError(op, f"rows of {n_columns} values (one per column)", f"a row of {len(row)} values")
    return tuple(as_array(op, value) for value in row)


def _check_shards(op, num_shards, shard_id, kind):
    """MindSpore's rules: both or neither, num_shards >= 1, shard_id in [0, num_shards), and a
    random-accessible source (the rows are split by index)."""
    if num_shards is None and shard_id is None:
        return None, None
    if num_shards is None or shard_id is None:
        raise OpValueError(op, "'num_shards' and 'shard_id' given together",
                           f"num_shards={num_shards!r}, shard_id={shard_id!r}")
    for name, v in (("num_shards", num_shards), ("shard_id", shard_id)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise OpTypeError(op, f"'{name}' to be an int", type(v).__name__)
    if num_shards < 1:
        raise OpValueError(op, "'num_shards' >= 1", repr(num_shards))
    if not 0 <= shard_id < num_shards:
        raise OpValueError(op, f"'shard_id' in [0, {num_shards})", repr(shard_id))
    if kind != "random_access":
        raise OpValueError(op, "a random-accessible source (__getitem__ and __len__) for num_shards/shard_id",
                           f"a source of kind '{kind}'")
    return int(num_shards), int(shard_id)


def _shard_rows(order, num_shards, shard_id):
    """MindSpore's DistributedSampler (even_dist): shard r takes rows r, r+n, r+2n, ... of the
    (shuffled) order, ceil(N/n) of them, wrapping around to the start so every shard has as many.
    With equal local batches b, batch k of all shards together is rows [k*n*b, (k+1)*n*b) of the
    order: exactly the single-process global batch k of size n*b (data parallelism's contract).
    Every rank must shuffle with the same seed (`ms.set_seed`) to agree on the order."""
    n = len(order)
    if n == 0:
        return order
    per_shard = -(-n // num_shards)
    return order[(np.arange(per_shard) * num_shards + shard_id) % n]


class GeneratorDataset(Dataset):
    """A dataset whose rows come from Python (see the module docstring for the kinds of `source`).

    Args follow MindSpore: `column_names` (required here: a str or list of str), `shuffle` (None:
    shuffle random-accessible sources, keep order for iterables; True for an iterable is an error),
    `num_samples` (use only the first rows, after shuffling and sharding), `num_shards` / `shard_id`
    (this rank's slice for data parallelism, see `_shard_rows`). `column_types`, `schema`,
    `sampler` are not supported; `num_parallel_workers`, `python_multiprocessing` and
    `max_rowsize` are accepted and ignored.
    """

    def __init__(self, source, column_names=None, column_types=None, schema=None, num_samples=None,
                 num_parallel_workers=1, shuffle=None, sampler=None, num_shards=None, shard_id=None,
                 python_multiprocessing=True, max_rowsize=None):
        op = "GeneratorDataset"
        for name, value in (("column_types", column_types), ("schema", schema), ("sampler", sampler)):
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
        self.num_shards, self.shard_id = _check_shards(op, num_shards, shard_id, self._kind)
        self.source = source
        self.column_names = list(column_names)
        self.num_samples = None if num_samples is None else int(num_samples)
        self.shuffled = self._kind == "random_access" if shuffle is None else shuffle

    def _rows(self, rng):
        op = "GeneratorDataset"
        n_cols = len(self.column_names)
        if self._kind == "random_access":
            order = np.arange(len(self.source))
            if self.shuffled:
                order = rng.permutation(order)
            if self.num_shards is not None:
                order = _shard_rows(order, self.num_shards, self.shard_id)
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

    def is_shuffled(self) -> bool:
        return bool(self.shuffled)

    def _num_rows(self) -> int:
        if self._kind == "random_access":
            n = len(self.source)
            if self.num_shards is not None:
                n = -(-n // self.num_shards) if n else 0
            return n if self.num_samples is None else min(n, self.num_samples)
        return super()._num_rows()


class _Slices:
    """MindSpore's `_NumpySlicesDataset`: columns of equal length, read row by row."""

    def __init__(self, data, column_names):
        op = "NumpySlicesDataset"
        names = None
        if isinstance(data, dict):
            if not data:
                raise OpValueError(op, "a non-empty dict of columns", "{}")
            names = [str(k) for k in data]
            # (a pandas DataFrame column has `.values`; MindSpore reads columns as lists of rows)
            data = tuple(list(getattr(v, "values", v)) for v in data.values())
        columns = data if isinstance(data, tuple) else (data,)
        for col in columns:
            if not hasattr(col, "__len__") or not hasattr(col, "__getitem__"):
                raise OpTypeError(op, "'data' as a list, ndarray, tuple of them or dict of columns",
                                  f"a column of type {type(col).__name__}")
        lengths = [len(c) for c in columns]
        if len(set(lengths)) > 1:
            raise OpValueError(op, "columns of equal length", f"lengths {lengths}")
        self.columns = columns
        if column_names is None:
            column_names = names or [f"column_{i}" for i in range(len(columns))]
        if isinstance(column_names, str):
            column_names = [column_names]
        if not isinstance(column_names, (list, tuple)) or len(column_names) != len(columns):
            raise OpValueError(op, f"{len(columns)} column name(s) (one per column of 'data')", repr(column_names))
        self.column_names = list(column_names)

    def __getitem__(self, index):
        return tuple(col[index] for col in self.columns)

    def __len__(self):
        return len(self.columns[0])


class NumpySlicesDataset(GeneratorDataset):
    """Rows sliced from in-memory data (MindSpore's arguments).

    * a list or ndarray is one column: `NumpySlicesDataset([1, 2, 3])` gives rows `1`, `2`, `3` in
      column "column_0"; a list of lists gives 1-d rows;
    * a tuple is several columns: `NumpySlicesDataset((x, y), ["x", "y"])`;
    * a dict maps column names to columns.

    Python ints become int64 and floats float64 (NumPy's conversion; cast with
    `transforms.TypeCast` in a `map` or build float32 arrays first). `shuffle=None` shuffles, as for
    any random-accessible source.
    """

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=1, shuffle=None,
                 sampler=None, num_shards=None, shard_id=None):
        source = _Slices(data, column_names)
        super().__init__(source, column_names=source.column_names, num_samples=num_samples,
                         num_parallel_workers=num_parallel_workers, shuffle=shuffle, sampler=sampler,
                         num_shards=num_shards, shard_id=shard_id)


__all__ = ["GeneratorDataset", "NumpySlicesDataset", "BatchDataset", "Dataset"]
