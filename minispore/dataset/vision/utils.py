"""Enums of `mindspore.dataset.vision`: interpolation modes and border (padding) modes."""
from enum import Enum


class Inter(str, Enum):
    """Interpolation for `Resize`. minispore implements NEAREST and LINEAR (= BILINEAR)."""
    NEAREST = "nearest"
    ANTIALIAS = "antialias"
    LINEAR = "linear"
    BILINEAR = "linear"
    CUBIC = "cubic"
    BICUBIC = "cubic"
    AREA = "area"
    PILCUBIC = "pilcubic"


class Border(str, Enum):
    """Padding modes (`RandomCrop`, `Pad`), as `np.pad` modes."""
    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


__all__ = ["Inter", "Border"]
