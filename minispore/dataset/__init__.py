"""Data for training: text corpora, tokenizers, samplers, and MindSpore's `GeneratorDataset`.

* `load_tinyshakespeare()`, `CharTokenizer`, `train_val_split`: nanoGPT's character-level data prep.
* `BatchSampler`: random (x, y) windows with a resumable random stream.
* `GeneratorDataset(...).batch(...).create_tuple_iterator()`: `mindspore.dataset`'s Python-source
  pipeline, minimal but faithful.
"""
from .text import CharTokenizer, load_tinyshakespeare, train_val_split, TINYSHAKESPEARE_SHA256
from .sampler import BatchSampler
from .generator_dataset import BatchDataset, Dataset, GeneratorDataset

__all__ = ["CharTokenizer", "load_tinyshakespeare", "train_val_split", "TINYSHAKESPEARE_SHA256",
           "BatchSampler", "GeneratorDataset", "BatchDataset", "Dataset"]
