"""`MnistDataset` and `Cifar10Dataset`: the standard binary files read from a local folder.

    ds = MnistDataset("data/mnist", usage="train", shuffle=False)     # columns image, label
    ds.get_col_names()        # ['image', 'label']; image (28, 28, 1) uint8, label uint32 scalar

MNIST: the four idx files `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`,
`t10k-labels-idx1-ubyte` (uncompressed; a big-endian header: magic 2051 for images / 2049 for labels,
the counts and sizes, then one byte per pixel / label).

CIFAR-10 (binary version): `data_batch_1.bin` ... `data_batch_5.bin` (train: every `data_batch*.bin`
present, in sorted order, as MindSpore reads them) and `test_batch.bin` (test); each record is 1 label byte and 3072 pixel bytes, the red, green and blue 32x32 planes. Rows
come out as MindSpore gives them: image (32, 32, 3) uint8 HWC, label uint32.

`usage` is "train", "test" or "all" (None = "all"). With "all", the files are read in the order
MindSpore reads them: MNIST test then train (file names sorted), CIFAR-10 train then test.
`shuffle=None` shuffles (they are random-accessible datasets); `num_samples` keeps the first rows
after shuffling. The files are memory-mapped, so only the rows read are loaded.

Difference: MindSpore's Cifar10Dataset assumes 10000 records per file (smaller files fail to read);
minispore accepts any whole number of records, so tests and tutorials can write small files.
"""
from __future__ import annotations

import os

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from .generator_dataset import GeneratorDataset

_USAGES = ("train", "test", "all")
_CIFAR_RECORD = 1 + 3 * 32 * 32


def _check_dir(op, dataset_dir):
    if not isinstance(dataset_dir, (str, os.PathLike)):
        raise OpTypeError(op, "'dataset_dir' to be a str path", type(dataset_dir).__name__)
    path = os.fspath(dataset_dir)
    if not os.path.isdir(path):
        raise OpValueError(op, "'dataset_dir' to be an existing folder", repr(path))
    return path


def _check_usage(op, usage):
    usage = "all" if usage is None else usage
    if usage not in _USAGES:
        raise OpValueError(op, f"'usage' in {_USAGES} or None", repr(usage))
    return usage


def _read_idx(op, path, magic, ndim):
    """The array of an idx file (memory-mapped): header checked against `magic` and the file size."""
    if not os.path.isfile(path):
        raise OpValueError(op, f"the MNIST file '{os.path.basename(path)}' in the dataset folder",
                           f"no such file: {path}")
    size = os.path.getsize(path)
    header = 4 + 4 * ndim
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(header), dtype=">u4")
    if len(head) != 1 + ndim or head[0] != magic:
        raise OpValueError(op, f"an idx file with magic number {magic}",
                           f"{path} starting with {head[:1].tolist() if len(head) else 'nothing'}")
    shape = tuple(int(v) for v in head[1:])
    if size != header + int(np.prod(shape)):
        raise OpValueError(op, f"{header + int(np.prod(shape))} bytes for shape {shape} in {path}",
                           f"{size} bytes (truncated or damaged file)")
    return np.memmap(path, dtype=np.uint8, mode="r", offset=header, shape=shape)


class _MnistSource:
    FILES = {"test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
             "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")}

    def __init__(self, op, root, usage):
        parts = ("test", "train") if usage == "all" else (usage,)     # MindSpore: sorted file names
        self.images, self.labels = [], []
        for part in parts:
            img_name, lbl_name = self.FILES[part]
            images = _read_idx(op, os.path.join(root, img_name), 2051, 3)
            labels = _read_idx(op, os.path.join(root, lbl_name), 2049, 1)
            if len(images) != len(labels):
                raise OpValueError(op, f"as many labels as images in the {part} files",
                                   f"{len(images)} images, {len(labels)} labels")
            self.images.append(images)
            self.labels.append(labels)
        self.offsets = np.cumsum([0] + [len(x) for x in self.images])

    def __len__(self):
        return int(self.offsets[-1])

    def __getitem__(self, index):
        part = int(np.searchsorted(self.offsets, index, side="right")) - 1
        i = index - int(self.offsets[part])
        return np.array(self.images[part][i])[:, :, None], np.uint32(self.labels[part][i])


class _Cifar10Source:
    def __init__(self, op, root, usage):
        # MindSpore's choice of files: every data_batch*.bin present (sorted) for train, test_batch.bin for test
        files = sorted(os.listdir(root))
        names = []
        if usage in ("train", "all"):
            names += [f for f in files if f.startswith("data_batch") and f.endswith(".bin")]
        if usage in ("test", "all"):
            names += [f for f in files if f == "test_batch.bin"]
        if not names:
            wanted = {"train": "data_batch_*.bin", "test": "test_batch.bin",
                      "all": "data_batch_*.bin or test_batch.bin"}[usage]
            raise OpValueError(op, f"CIFAR-10 binary files ({wanted}) in the dataset folder", f"none in {root}")
        self.records = []
        for name in names:
            path = os.path.join(root, name)
            size = os.path.getsize(path)
            if size == 0 or size % _CIFAR_RECORD:
                raise OpValueError(op, f"a whole number of {_CIFAR_RECORD}-byte records in {name}",
                                   f"{size} bytes")
            self.records.append(np.memmap(path, dtype=np.uint8, mode="r",
                                          shape=(size // _CIFAR_RECORD, _CIFAR_RECORD)))
        self.offsets = np.cumsum([0] + [len(r) for r in self.records])

    def __len__(self):
        return int(self.offsets[-1])

    def __getitem__(self, index):
        part = int(np.searchsorted(self.offsets, index, side="right")) - 1
        record = np.array(self.records[part][index - int(self.offsets[part])])
        image = record[1:].reshape(3, 32, 32).transpose(1, 2, 0)          # CHW planes -> HWC
        return np.ascontiguousarray(image), np.uint32(record[0])


class _FolderDataset(GeneratorDataset):
    """A random-accessible dataset read from files; MindSpore's common arguments."""

    _op = ""
    _source = None

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, num_shards=None, shard_id=None, cache=None):
        op = self._op
        root = _check_dir(op, dataset_dir)
        usage = _check_usage(op, usage)
        if cache is not None:
            raise OpValueError(op, "cache=None (dataset caching is not supported by minispore)", repr(cache)[:60])
        self.dataset_dir, self.usage = root, usage
        super().__init__(type(self)._source(op, root, usage), column_names=["image", "label"],
                         num_samples=num_samples, shuffle=shuffle, sampler=sampler, num_shards=num_shards,
                         shard_id=shard_id)


class MnistDataset(_FolderDataset):
    """MNIST from its idx files (see the module docstring): image (28, 28, 1) uint8, label uint32."""
    _op = "MnistDataset"
    _source = _MnistSource


class Cifar10Dataset(_FolderDataset):
    """CIFAR-10 from its binary files (see the module docstring): image (32, 32, 3) uint8, label uint32."""
    _op = "Cifar10Dataset"
    _source = _Cifar10Source


__all__ = ["MnistDataset", "Cifar10Dataset"]
