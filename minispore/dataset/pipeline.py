"""The dataset pipeline: `Dataset` and the operations that chain onto it (MindSpore's `mindspore.dataset`).

    ds = GeneratorDataset(source, ["image", "label"])        # a source stage (generator_dataset.py, ...)
    ds = ds.map(vision.Rescale(1 / 255, 0), input_columns="image")
    ds = ds.shuffle(buffer_size=64).batch(32, drop_remainder=True).repeat(2)
    for image, label in ds.create_tuple_iterator():         # lists of Tensors, one per column
        ...

Every stage is a `Dataset` whose `_rows(rng)` yields one epoch of rows; a row is a tuple of NumPy
arrays, one per column (`column_names`). A stage pulls rows from its child lazily, so a pipeline
holds one row (or one batch, or one shuffle buffer) at a time. The iterator (`create_tuple_iterator` /
`create_dict_iterator`) runs the epochs and turns arrays into Tensors at the very end, as MindSpore's
C++ pipeline hands NumPy data to Python transforms and Tensors to the network.

Randomness (source shuffling, `shuffle`, random vision transforms) comes from one NumPy Generator per
iterator, made when the first random draw is needed: seeded by `mindspore.dataset.config.set_seed(n)`
if it was called, otherwise drawn from minispore's global RNG (so `ms.set_seed(n)` fixes it too).
The orders are reproducible, but not MindSpore's: its C++ samplers use their own generators.

minispore runs every stage in the calling thread: `num_parallel_workers`, `python_multiprocessing`
and `max_rowsize` are accepted and change nothing.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..common import context
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from ..ops._check import int_attr
from . import config



def _columns_arg(op, name, columns):
    """A column name or list of names, as a list (None stays None)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise OpValueError(op, f"'{name}' as a column name or a non-empty list of names", repr(columns))
    if len(set(columns)) != len(columns):
        raise OpValueError(op, f"distinct names in '{name}'", repr(columns))
    return list(columns)


def _check_known(op, name, columns, known):
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise OpValueError(op, f"'{name}' among the columns {list(known)}", repr(unknown))


def as_array(op, value):
    """One column value as an ndarray (MindSpore's conversion: Python int -> int64, float -> float64)."""
    arr = value.asnumpy() if isinstance(value, Tensor) else np.asarray(value)
    if arr.dtype == object:
        raise OpTypeError(op, "values convertible to numeric arrays", f"{type(value).__name__} {value!r:.60}")
    return arr


class _PipelineRng:
    """The random stream of one iterator, created on first use (a pipeline without random stages
    never touches the global RNG)."""

    def __init__(self):
        self._gen = None

    def __getattr__(self, name):
        if self._gen is None:
            seed = config.get_seed_if_set()
            if seed is None:
                seed = int(context.rng().integers(0, 2 ** 63 - 1))
            self.__dict__["_gen"] = np.random.default_rng(seed)
        return getattr(self._gen, name)


class Dataset:
    """A pipeline stage. Subclasses set `column_names` and define `_rows(rng)` (one epoch of row
    tuples) and, when they can count without reading, `_num_rows()`."""

    column_names: list

    def _rows(self, rng):
        raise NotImplementedError

    def _num_rows(self) -> int:
        """Rows per epoch. The default reads one epoch (MindSpore does the same for sources without
        `__len__`)."""
        return sum(1 for _ in self._rows(_PipelineRng()))

    # -- operations (each returns a new stage) -------------------------------------------------------
    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, per_batch_map=None,
              input_columns=None, output_columns=None, python_multiprocessing=False, max_rowsize=None, **kwargs):
        """Stack `batch_size` consecutive rows column by column (a new first axis). The last, smaller
        batch is kept unless `drop_remainder=True`. `per_batch_map` (and its input/output columns) is
        not supported."""
        for name, value in (("per_batch_map", per_batch_map), ("input_columns", input_columns),
                            ("output_columns", output_columns)):
            if value is not None:
                raise OpValueError("Dataset.batch", f"'{name}'=None (not supported by minispore)", repr(value)[:60])
        return BatchDataset(self, batch_size, drop_remainder)

    def map(self, operations, input_columns=None, output_columns=None, num_parallel_workers=None,
            python_multiprocessing=False, cache=None, callbacks=None, max_rowsize=16, offload=None, **kwargs):
        """Apply `operations` (a callable or a list applied in order) to `input_columns` (default: the
        first column) of every row; the results become `output_columns` (default: the input names).

        Column order is MindSpore's: as many outputs as inputs replace them in place; otherwise the
        outputs come first, followed by the untouched columns.
        """
        return MapDataset(self, operations, input_columns, output_columns)

    def shuffle(self, buffer_size):
        """Shuffle through a buffer of `buffer_size` rows (MindSpore's algorithm: fill the buffer, then
        repeatedly emit a random buffered row and put the next input row in its place). A buffer at
        least as large as the dataset gives a uniform shuffle."""
        return ShuffleDataset(self, buffer_size)

    def repeat(self, count=None):
        """Repeat the epoch `count` times (None or -1: forever)."""
        return RepeatDataset(self, count)

    def take(self, count=-1):
        """The first `count` rows (-1: all)."""
        return TakeDataset(self, count)

    def skip(self, count):
        """All but the first `count` rows."""
        return SkipDataset(self, count)

    def project(self, columns):
        """Keep only `columns`, in that order."""
        return ProjectDataset(self, columns)

    def rename(self, input_columns, output_columns):
        """Rename columns (`input_columns[i]` becomes `output_columns[i]`)."""
        return RenameDataset(self, input_columns, output_columns)

    # -- information ----------------------------------------------------------------------------
    def get_dataset_size(self) -> int:
        """Rows (batches, after `.batch`) in one epoch."""
        return self._num_rows()

    def get_col_names(self) -> list:
        return list(self.column_names)

    def get_batch_size(self) -> int:
        return 1

    def get_repeat_count(self) -> int:
        return 1

    def output_shapes(self, estimate=False):
        """The shape of each column in the first row (MindSpore reads one row too)."""
        row = next(iter(self._rows(_PipelineRng())), None)
        return [] if row is None else [list(v.shape) for v in row]

    def output_types(self):
        """The NumPy dtype of each column in the first row."""
        row = next(iter(self._rows(_PipelineRng())), None)
        return [] if row is None else [v.dtype for v in row]

    def reset(self):
        """Kept for MindSpore compatibility: every iterator here starts at the first row anyway."""

    # -- iteration ----------------------------------------------------------------------------------
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=False):
        """An iterator over rows, each a list with one Tensor (or ndarray) per column.

        Each `for` loop over the iterator is one epoch; it allows `num_epochs` of them (-1: no limit).
        """
        return DatasetIterator(self, columns, num_epochs, output_numpy, as_dict=False)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=False):
        """Like `create_tuple_iterator`, but each row is a dict {column name: value}."""
        return DatasetIterator(self, None, num_epochs, output_numpy, as_dict=True)

    def __iter__(self):
        return iter(self.create_tuple_iterator())


class DatasetIterator:
    """MindSpore's TupleIterator / DictIterator."""

    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict):
        op = "create_tuple_iterator"
        if not isinstance(num_epochs, numbers.Integral) or isinstance(num_epochs, bool) \
                or (num_epochs < 1 and num_epochs != -1):
            raise OpValueError(op, "'num_epochs' as a positive int or -1", repr(num_epochs))
        names = dataset.column_names
        if columns is None:
            self._index = list(range(len(names)))
        else:
            columns = _columns_arg(op, "columns", columns)
            _check_known(op, "columns", columns, names)
            self._index = [names.index(c) for c in columns]
        self._names = [names[i] for i in self._index]
        self._dataset, self._num_epochs = dataset, int(num_epochs)
        self._output_numpy, self._as_dict = bool(output_numpy), as_dict
        self._epochs_started, self._rows = 0, None
        self._rng = _PipelineRng()

    def __iter__(self):
        return self

    def __next__(self):
        if self._rows is None:                      # start an epoch
            if self._num_epochs != -1 and self._epochs_started >= self._num_epochs:
                raise StopIteration
            self._rows = iter(self._dataset._rows(self._rng))
            self._epochs_started += 1
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None                       # the next `for` starts the next epoch
            raise
        values = [row[i] if self._output_numpy else Tensor(row[i]) for i in self._index]
        return dict(zip(self._names, values)) if self._as_dict else values


# ---------------------------------------------------------------------------------------------
# Operation stages
class _Stage(Dataset):
    def __init__(self, child: Dataset):
        self.child = child
        self.column_names = list(child.column_names)

    def get_batch_size(self) -> int:
        return self.child.get_batch_size()

    def get_repeat_count(self) -> int:
        return self.child.get_repeat_count()


class BatchDataset(_Stage):
    """Rows of `child` grouped `batch_size` at a time (made by `Dataset.batch`)."""

    def __init__(self, child: Dataset, batch_size, drop_remainder=False):
        op = "Dataset.batch"
        super().__init__(child)
        self.batch_size = int_attr(op, "batch_size", batch_size, 1)
        if not isinstance(drop_remainder, bool):
            raise OpTypeError(op, "'drop_remainder' to be a bool", type(drop_remainder).__name__)
        self.drop_remainder = drop_remainder

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

    def _rows(self, rng):
        pending = []
        for row in self.child._rows(rng):
            pending.append(row)
            if len(pending) == self.batch_size:
                yield self._stack(pending)
                pending = []
        if pending and not self.drop_remainder:
            yield self._stack(pending)

    def _num_rows(self) -> int:
        n = self.child._num_rows()
        return n // self.batch_size if self.drop_remainder else math.ceil(n / self.batch_size)


def _operation_list(op, operations):
    ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
    if not ops or not all(callable(f) for f in ops):
        raise OpTypeError(op, "'operations' as a callable (a transform or function) or a list of them",
                          repr(operations)[:80])
    return ops


class MapDataset(_Stage):
    """`child` with `operations` applied to some columns of every row (made by `Dataset.map`)."""

    def __init__(self, child, operations, input_columns=None, output_columns=None):
        op = "Dataset.map"
        super().__init__(child)
        self.operations = _operation_list(op, operations)
        names = child.column_names
        inputs = _columns_arg(op, "input_columns", input_columns) or [names[0]]
        _check_known(op, "input_columns", inputs, names)
        outputs = _columns_arg(op, "output_columns", output_columns) or list(inputs)
        self.input_columns, self.output_columns = inputs, outputs
        self._in_index = [names.index(c) for c in inputs]
        if len(outputs) == len(inputs):                 # replaced in place
            self.column_names = list(names)
            for slot, name in zip(self._in_index, outputs):
                self.column_names[slot] = name
            self._rest = None
        else:                                           # outputs first, then the untouched columns
            self._rest = [i for i in range(len(names)) if i not in self._in_index]
            self.column_names = outputs + [names[i] for i in self._rest]
        if len(set(self.column_names)) != len(self.column_names):
            raise OpValueError(op, "distinct column names after the map", repr(self.column_names))

    def _apply(self, values, rng):
        for f in self.operations:
            if getattr(f, "_is_random", False):
                values = f._call_with_rng(rng, *values)
            else:
                values = f(*values)
            if not isinstance(values, tuple):
                values = (values,)
        return values

    def _rows(self, rng):
        op = "Dataset.map"
        n_out = len(self.output_columns)
        for row in self.child._rows(rng):
            out = self._apply(tuple(row[i] for i in self._in_index), rng)
            if len(out) != n_out:
                raise OpValueError(op, f"the operations to return {n_out} value(s) (output_columns "
                                   f"{self.output_columns})", f"{len(out)} values")
            out = [as_array(op, v) for v in out]
            if self._rest is None:
                new = list(row)
                for slot, value in zip(self._in_index, out):
                    new[slot] = value
                yield tuple(new)
            else:
                yield tuple(out) + tuple(row[i] for i in self._rest)

    def _num_rows(self) -> int:
        return self.child._num_rows()


class ShuffleDataset(_Stage):
    def __init__(self, child, buffer_size):
        super().__init__(child)
        self.buffer_size = int_attr("Dataset.shuffle", "buffer_size", buffer_size, 2)

    def _rows(self, rng):
        buffer = []
        for row in self.child._rows(rng):
            if len(buffer) < self.buffer_size:
                buffer.append(row)
                continue
            i = int(rng.integers(len(buffer)))
            yield buffer[i]
            buffer[i] = row
        while buffer:                                  # drain in random order
            yield buffer.pop(int(rng.integers(len(buffer))))

    def _num_rows(self) -> int:
        return self.child._num_rows()


class RepeatDataset(_Stage):
    def __init__(self, child, count=None):
        super().__init__(child)
        if count is None:
            count = -1
        count = int_attr("Dataset.repeat", "count", count, -1)
        if count == 0:
            raise OpValueError("Dataset.repeat", "'count' as a positive int, or -1/None (forever)", "0")
        self.count = count

    def get_repeat_count(self) -> int:
        return self.count

    def _rows(self, rng):
        done = 0
        while self.count == -1 or done < self.count:
            yield from self.child._rows(rng)
            done += 1

    def _num_rows(self) -> int:
        # (MindSpore reports the child's size for an endless repeat as well)
        n = self.child._num_rows()
        return n if self.count == -1 else n * self.count


class TakeDataset(_Stage):
    def __init__(self, child, count=-1):
        super().__init__(child)
        count = int_attr("Dataset.take", "count", count, -1)
        if count == 0:
            raise OpValueError("Dataset.take", "'count' as a positive int or -1 (all)", "0")
        self.count = count

    def _rows(self, rng):
        for i, row in enumerate(self.child._rows(rng)):
            if self.count != -1 and i >= self.count:
                return
            yield row

    def _num_rows(self) -> int:
        n = self.child._num_rows()
        return n if self.count == -1 else min(n, self.count)


class SkipDataset(_Stage):
    def __init__(self, child, count):
        super().__init__(child)
        self.count = int_attr("Dataset.skip", "count", count, 0)

    def _rows(self, rng):
        for i, row in enumerate(self.child._rows(rng)):
            if i >= self.count:
                yield row

    def _num_rows(self) -> int:
        return max(0, self.child._num_rows() - self.count)


class ProjectDataset(_Stage):
    def __init__(self, child, columns):
        op = "Dataset.project"
        super().__init__(child)
        columns = _columns_arg(op, "columns", columns)
        if columns is None:
            raise OpValueError(op, "'columns' as a column name or a list of names", "None")
        _check_known(op, "columns", columns, child.column_names)
        self._index = [child.column_names.index(c) for c in columns]
        self.column_names = columns

    def _rows(self, rng):
        for row in self.child._rows(rng):
            yield tuple(row[i] for i in self._index)

    def _num_rows(self) -> int:
        return self.child._num_rows()


class RenameDataset(_Stage):
    def __init__(self, child, input_columns, output_columns):
        op = "Dataset.rename"
        super().__init__(child)
        inputs = _columns_arg(op, "input_columns", input_columns)
        outputs = _columns_arg(op, "output_columns", output_columns)
        if inputs is None or outputs is None or len(inputs) != len(outputs):
            raise OpValueError(op, "'input_columns' and 'output_columns' of one length",
                               f"{input_columns!r} and {output_columns!r}")
        _check_known(op, "input_columns", inputs, child.column_names)
        mapping = dict(zip(inputs, outputs))
        self.column_names = [mapping.get(c, c) for c in child.column_names]
        if len(set(self.column_names)) != len(self.column_names):
            raise OpValueError(op, "distinct column names after renaming", repr(self.column_names))

    def _rows(self, rng):
        return self.child._rows(rng)

    def _num_rows(self) -> int:
        return self.child._num_rows()


__all__ = ["Dataset", "DatasetIterator", "BatchDataset", "MapDataset", "ShuffleDataset", "RepeatDataset",
           "TakeDataset", "SkipDataset", "ProjectDataset", "RenameDataset"]
