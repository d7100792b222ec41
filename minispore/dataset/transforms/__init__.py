"""`mindspore.dataset.transforms` (general transforms; the image ones are in `dataset.vision`)."""
from . import transforms
from .transforms import Compose, Duplicate, Fill, OneHot, RandomApply, RandomChoice, TypeCast

__all__ = ["Compose", "Duplicate", "Fill", "OneHot", "RandomApply", "RandomChoice", "TypeCast"]
