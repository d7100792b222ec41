"""How transforms draw random numbers.

Inside a pipeline (`Dataset.map`), a random transform draws from the iterator's random stream
(pipeline.py), so `dataset.config.set_seed` / `ms.set_seed` make the augmentation reproducible.
Called directly (`RandomHorizontalFlip(0.5)(image)`, MindSpore's eager mode), it draws from
minispore's global RNG. A transform marks itself random with `_is_random = True` and implements
`_call_with_rng(rng, *columns)`.
"""
from __future__ import annotations

from ...common import context


class RandomTransform:
    _is_random = True

    def __call__(self, *columns):
        return self._call_with_rng(context.rng(), *columns)

    def _call_with_rng(self, rng, *columns):
        raise NotImplementedError
