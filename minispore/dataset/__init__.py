"""`mindspore.dataset`: data pipelines, plus minispore's text-data helpers.

* Pipelines (MindSpore's API): sources `GeneratorDataset`, `NumpySlicesDataset` (generator_dataset.py),
  `MnistDataset`, `Cifar10Dataset` (vision_datasets.py); operations `map`, `batch`, `shuffle`,
  `repeat`, `take`, `skip`, `project`, `rename` and the iterators (pipeline.py); `config.set_seed`;
  transforms in `dataset.transforms` and `dataset.vision`.
* nanoGPT's data prep: `load_tinyshakespeare()`, `CharTokenizer`, `train_val_split` (text.py) and
  `BatchSampler` (random (x, y) windows with a resumable random stream, sampler.py).
"""
from . import config
from .text import CharTokenizer, load_tinyshakespeare, train_val_split, TINYSHAKESPEARE_SHA256
from .sampler import BatchSampler
from .pipeline import (BatchDataset, Dataset, DatasetIterator, MapDataset, ProjectDataset, RenameDataset,
                       RepeatDataset, ShuffleDataset, SkipDataset, TakeDataset)
from .generator_dataset import GeneratorDataset, NumpySlicesDataset
from .vision_datasets import Cifar10Dataset, MnistDataset
from . import transforms, vision

__all__ = ["CharTokenizer", "load_tinyshakespeare", "train_val_split", "TINYSHAKESPEARE_SHA256",
           "BatchSampler", "GeneratorDataset", "NumpySlicesDataset", "BatchDataset", "Dataset", "DatasetIterator",
           "MapDataset", "ProjectDataset", "RenameDataset", "RepeatDataset", "ShuffleDataset", "SkipDataset",
           "TakeDataset", "MnistDataset", "Cifar10Dataset", "config", "transforms", "vision"]
