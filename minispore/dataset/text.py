"""Character-level text: the Tiny Shakespeare corpus, a character tokenizer, the train/val split.

This is nanoGPT's `data/shakespeare_char/prepare.py` as a library: the vocabulary is every distinct
character of the corpus in sorted order (65 symbols for Tiny Shakespeare), a token id is the
position of a character in that list, and the first 90% of the ids are for training, the rest for
validation (1,003,854 / 111,540 tokens).
"""
from __future__ import annotations

import hashlib
import numbers
from importlib import resources

import numpy as np

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor

TINYSHAKESPEARE_FILE = "tinyshakespeare.txt"
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINYSHAKESPEARE_BYTES = 1_115_394


def load_tinyshakespeare(verify: bool = True) -> str:
    """The Tiny Shakespeare corpus (karpathy/char-rnn's `input.txt`), shipped inside the package.

    Read with `importlib.resources`, so it works from a source checkout, an installed wheel or a
    zip, with no network. `verify` checks the sha256 (a damaged install gives a clear error
    instead of a silently different vocabulary).
    """
    raw = resources.files("minispore").joinpath("data", TINYSHAKESPEARE_FILE).read_bytes()
    if verify and hashlib.sha256(raw).hexdigest() != TINYSHAKESPEARE_SHA256:
        raise OpValueError("load_tinyshakespeare", f"the packaged {TINYSHAKESPEARE_FILE} with sha256 "
                           f"{TINYSHAKESPEARE_SHA256[:16]}... ({TINYSHAKESPEARE_BYTES} bytes)",
                           f"a file of {len(raw)} bytes with sha256 {hashlib.sha256(raw).hexdigest()[:16]}... "
                           "(reinstall minispore)")
    return raw.decode("utf-8")


class CharTokenizer:
    """Map characters to ids and back.

        tok = CharTokenizer.from_text(text)     # vocabulary = sorted(set(text))
        ids = tok.encode("Hello")               # np.ndarray of int64
        tok.decode(ids) == "Hello"
        CharTokenizer.from_dict(tok.to_dict())  # same tokenizer (stored in checkpoint configs)

    `chars` is the exact ordered vocabulary: id i is `chars[i]`.
    """

    def __init__(self, chars):
        if isinstance(chars, str):
            chars = list(chars)
        if not isinstance(chars, (list, tuple)) or not chars:
            raise OpTypeError("CharTokenizer", "a non-empty string or list of single characters", repr(chars)[:80])
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise OpValueError("CharTokenizer", "single characters in the vocabulary", repr(c)[:80])
        if len(set(chars)) != len(chars):
            dups = sorted({c for c in chars if chars.count(c) > 1})
            raise OpValueError("CharTokenizer", "each character once in the vocabulary", f"duplicates {dups}")
        self.chars = "".join(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        # A code-point lookup table makes encoding a whole corpus one vectorized gather.
        codes = np.frombuffer(self.chars.encode("utf-32-le"), dtype="<u4")
        self._table = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
        self._table[codes] = np.arange(len(codes), dtype=np.int64)
        self._chars_array = np.array(list(self.chars))

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """The vocabulary of `text`: its distinct characters, sorted (nanoGPT's rule)."""
        if not isinstance(text, str) or not text:
            raise OpTypeError("CharTokenizer.from_text", "a non-empty str", type(text).__name__)
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def __len__(self):
        return len(self.chars)

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"

    def __eq__(self, other):
        return isinstance(other, CharTokenizer) and other.chars == self.chars

    __hash__ = None

    def encode(self, text: str) -> np.ndarray:
        """Ids of the characters of `text` (int64). An unknown character is an error naming it."""
        if not isinstance(text, str):
            raise OpTypeError("CharTokenizer.encode", "a str", type(text).__name__)
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        ids = np.full(codes.shape, -1, dtype=np.int64)
        known = codes < len(self._table)
        ids[known] = self._table[codes[known]]
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            pos = int(bad[0])
            unknown = sorted({text[i] for i in bad[:1000]})
            raise OpValueError("CharTokenizer.encode", f"characters from the {self.vocab_size}-symbol vocabulary",
                               f"{text[pos]!r} (U+{ord(text[pos]):04X}) at position {pos}"
                               + (f"; unknown characters: {unknown!r}" if len(unknown) > 1 else ""))
        return ids

    def decode(self, ids) -> str:
        """The text for a sequence of ids (list, 1-D ndarray or Tensor of ints)."""
        if isinstance(ids, Tensor):
            ids = ids.asnumpy()
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
            raise OpTypeError("CharTokenizer.decode", "integer ids", f"dtype {arr.dtype}")
        if arr.ndim != 1:
            if arr.ndim == 0:
                arr = arr.reshape(1)
            else:
                raise OpValueError("CharTokenizer.decode", "a 1-D sequence of ids", f"shape {arr.shape}")
        arr = arr.astype(np.int64)
        bad = np.flatnonzero((arr < 0) | (arr >= self.vocab_size))
        if bad.size:
            raise OpValueError("CharTokenizer.decode", f"ids in [0, {self.vocab_size})",
                               f"{int(arr[bad[0]])} at position {int(bad[0])}")
        return "".join(self._chars_array[arr].tolist())

    def to_dict(self) -> dict:
        """JSON-compatible description, stored with checkpoints."""
        return {"type": "char", "chars": self.chars}

    @classmethod
    def from_dict(cls, d: dict) -> "CharTokenizer":
        if not isinstance(d, dict) or d.get("type") != "char" or not isinstance(d.get("chars"), str):
            raise OpValueError("CharTokenizer.from_dict", "{'type': 'char', 'chars': str}", repr(d)[:120])
        return cls(d["chars"])


def train_val_split(ids, train_fraction: float = 0.9):
    """Split a 1-D id array into its first `int(n * train_fraction)` ids and the rest (no shuffling:
    validation text is a contiguous tail, as in nanoGPT)."""
    if isinstance(ids, Tensor):
        ids = ids.asnumpy()
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise OpValueError("train_val_split", "a 1-D array of token ids", f"shape {ids.shape}")
    if not isinstance(train_fraction, numbers.Real) or isinstance(train_fraction, bool) \
            or not 0.0 < train_fraction < 1.0:
        raise OpValueError("train_val_split", "'train_fraction' in (0, 1)", repr(train_fraction))
    n = int(len(ids) * train_fraction)
    return ids[:n], ids[n:]


__all__ = ["CharTokenizer", "load_tinyshakespeare", "train_val_split", "TINYSHAKESPEARE_SHA256"]
