"""`mindspore.dataset.vision`: image transforms (transforms.py), `Inter` / `Border` (utils.py)."""
from . import transforms, utils
from .transforms import (CenterCrop, HorizontalFlip, HWC2CHW, Normalize, Pad, RandomCrop, RandomHorizontalFlip,
                         RandomVerticalFlip, Rescale, Resize, ToTensor, VerticalFlip)
from .utils import Border, Inter

__all__ = ["CenterCrop", "HorizontalFlip", "HWC2CHW", "Normalize", "Pad", "RandomCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "Rescale", "Resize", "ToTensor", "VerticalFlip", "Border", "Inter"]
