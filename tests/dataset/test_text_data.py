"""Tiny Shakespeare, the character tokenizer and the train/val split: nanoGPT's exact numbers."""
import hashlib

import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpTypeError, OpValueError
from minispore.dataset import CharTokenizer, load_tinyshakespeare, train_val_split

NANOGPT_CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def text():
    return load_tinyshakespeare()


def test_packaged_corpus_is_the_exact_file(text):
    raw = text.encode("utf-8")
    assert len(raw) == 1_115_394 and len(text) == 1_115_394          # all ASCII: chars = bytes
    assert hashlib.sha256(raw).hexdigest() == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")
    assert text.count("\n") == 40_000


def test_vocabulary_is_nanogpts_65_symbols(text):
    tok = CharTokenizer.from_text(text)
    assert tok.vocab_size == len(tok) == 65
    assert tok.chars == NANOGPT_CHARS
    assert tok.encode("\n").tolist() == [0] and tok.encode("z").tolist() == [64]


def test_encode_decode_round_trip_against_a_naive_reference(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (1_115_394,)
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}         # nanoGPT's prepare.py
    sample = text[:5000] + text[-5000:]
    assert tok.encode(sample).tolist() == [stoi[c] for c in sample]
    assert tok.decode(ids) == text
    assert tok.decode(ms.Tensor(ids[:14])) == "First Citizen:"
    assert tok.decode([]) == "" and tok.encode("").shape == (0,)
    assert tok.decode(np.array(46)) == "h"                          # a 0-d id


def test_train_val_split_sizes(text):
    tok = CharTokenizer.from_text(text)
    train, val = train_val_split(tok.encode(text), 0.9)
    assert (len(train), len(val)) == (1_003_854, 111_540)
    assert tok.decode(train[-5:]) + tok.decode(val[:5]) == text[1_003_849:1_003_859]
    a, b = train_val_split(ms.Tensor(np.arange(10)), 0.5)
    assert a.tolist() == [0, 1, 2, 3, 4] and b.tolist() == [5, 6, 7, 8, 9]


def test_unknown_characters_and_bad_ids_are_clear_errors():
    tok = CharTokenizer.from_text("hello world")
    with pytest.raises(OpValueError) as info:
        tok.encode("hello, wörld")
    msg = str(info.value)
    assert "CharTokenizer.encode" in msg and "8-symbol vocabulary" in msg
    assert "',' (U+002C) at position 5" in msg and "'ö'" in msg
    with pytest.raises(OpValueError, match="U\\+1F642"):
        tok.encode("🙂")
    with pytest.raises(OpValueError, match=r"ids in \[0, 8\).*8 at position 1"):
        tok.decode([1, 8])
    with pytest.raises(OpValueError, match="-1 at position 0"):
        tok.decode([-1])
    with pytest.raises(OpTypeError):
        tok.decode([0.5])
    with pytest.raises(OpValueError, match="1-D"):
        tok.decode([[1, 2]])
    with pytest.raises(OpTypeError):
        tok.encode(b"bytes")


def test_to_dict_from_dict_preserves_the_exact_vocabulary():
    tok = CharTokenizer("zyx")                                      # an unsorted vocabulary stays as given
    assert tok.encode("xyz").tolist() == [2, 1, 0]
    d = tok.to_dict()
    assert d == {"type": "char", "chars": "zyx"}
    back = CharTokenizer.from_dict(d)
    assert back == tok and back.encode("xyz").tolist() == [2, 1, 0]
    for bad in ({"type": "bpe", "chars": "ab"}, {"chars": "ab"}, {"type": "char", "chars": 3}, "ab"):
        with pytest.raises(OpValueError):
            CharTokenizer.from_dict(bad)
    with pytest.raises(OpValueError, match="duplicates"):
        CharTokenizer("abca")
    with pytest.raises(OpValueError):
        CharTokenizer(["ab", "c"])
    with pytest.raises(OpTypeError):
        CharTokenizer("")
    with pytest.raises(OpTypeError):
        CharTokenizer.from_text("")


def test_split_bad_input():
    with pytest.raises(OpValueError):
        train_val_split(np.arange(10), 1.0)
    with pytest.raises(OpValueError):
        train_val_split(np.arange(10), True)
    with pytest.raises(OpValueError, match="1-D"):
        train_val_split(np.zeros((2, 2)), 0.5)
