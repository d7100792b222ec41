"""Write small files in the CIFAR-10 binary format (what `Cifar10Dataset` reads).

MindSpore reads a whole file of 10,000 records, so each file has 10,000 (30 MB; written, never
committed). Each record is 1 label byte then 3072 image bytes: the 32x32 red plane, then green, then blue, row
by row. The images are noise around a colour that depends on the label, so a small network can
learn them in a few steps. Deterministic for a given seed.
"""
import os

import numpy as np


def write_cifar10_bin(directory, n_train=10000, n_test=10000, seed=0):
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    palette = rng.uniform(40, 215, size=(10, 3))
    for name, n in (("data_batch_1.bin", n_train), ("test_batch.bin", n_test)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        planes = palette[labels][:, :, None, None] + rng.normal(0, 30, size=(n, 3, 32, 32))
        images = np.clip(planes, 0, 255).astype(np.uint8)
        records = np.concatenate([labels[:, None], images.reshape(n, 3072)], axis=1)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(records.tobytes())
    return directory
