"""`mindspore.dataset.vision`: image transforms on NumPy arrays, for `Dataset.map` (or eager calls).

Images are HWC (height, width, channels) arrays, usually uint8, as decoded images and MnistDataset /
Cifar10Dataset give them; a 2-D array is a one-channel (H, W) image. A typical pipeline:

    ds = ds.map([vision.Resize((32, 32)), vision.Rescale(1 / 255, 0),
                 vision.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.247, 0.243, 0.261]),
                 vision.HWC2CHW()], input_columns="image")

Results follow MindSpore's: `Rescale`, `Normalize` and `ToTensor` give float32; geometric transforms
keep the dtype; `Resize` is OpenCV's bilinear (see _resize.py; uint8 results are bit-identical to
MindSpore's). Random transforms (`RandomCrop`, `RandomHorizontalFlip`, `RandomVerticalFlip`) draw from
the pipeline's random stream: reproducible under a seed, but not MindSpore's exact draws.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...common.errors import OpTypeError, OpValueError
from ...common.tensor import Tensor
from ..transforms._random import RandomTransform
from . import _resize
from .utils import Border, Inter


def _image(op, img, min_ndim=2):
    if isinstance(img, Tensor):
        img = img.asnumpy()
    img = np.asarray(img)
    if img.dtype == object or img.dtype.kind not in "biuf":
        raise OpTypeError(op, "a numeric image array", f"dtype {img.dtype}")
    if not min_ndim <= img.ndim <= 3:
        raise OpValueError(op, "an image of shape (H, W) or (H, W, C)", f"shape {img.shape}")
    return img


def _size_arg(op, size, name="size"):
    """An int (square, or shorter side for Resize) or a (height, width) pair of positive ints."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        if size < 1:
            raise OpValueError(op, f"'{name}' positive", repr(size))
        return int(size)
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in size):
        return (int(size[0]), int(size[1]))
    raise OpValueError(op, f"'{name}' as a positive int or a (height, width) pair of positive ints", repr(size))


def _prob_arg(op, prob):
    if not isinstance(prob, numbers.Real) or isinstance(prob, bool) or not 0.0 <= prob <= 1.0:
        raise OpValueError(op, "'prob' in [0, 1]", repr(prob))
    return float(prob)


class Rescale:
    """`Rescale(rescale, shift)`: `image * rescale + shift`, in float32."""

    def __init__(self, rescale, shift):
        for name, v in (("rescale", rescale), ("shift", shift)):
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise OpTypeError("Rescale", f"'{name}' to be a float", type(v).__name__)
        self.rescale, self.shift = float(rescale), float(shift)

    def __call__(self, img):
        img = _image("Rescale", img, min_ndim=0)
        return img.astype(np.float32) * np.float32(self.rescale) + np.float32(self.shift)


class Normalize:
    """`Normalize(mean, std, is_hwc=True)`: `(image - mean) / std` per channel, in float32. `mean`
    and `std` have one value per channel (in the image's value range: 0-255 for uint8 images)."""

    def __init__(self, mean, std, is_hwc=True):
        op = "Normalize"
        self.mean = self._values(op, "mean", mean)
        self.std = self._values(op, "std", std)
        if len(self.mean) != len(self.std):
            raise OpValueError(op, "'mean' and 'std' of one length", f"{len(self.mean)} and {len(self.std)}")
        if any(s <= 0 for s in self.std):
            raise OpValueError(op, "'std' values > 0", repr(std))
        if not isinstance(is_hwc, bool):
            raise OpTypeError(op, "'is_hwc' to be a bool", type(is_hwc).__name__)
        self.is_hwc = is_hwc

    @staticmethod
    def _values(op, name, values):
        if isinstance(values, numbers.Real):
            values = [values]
        if not isinstance(values, (list, tuple)) or not values or not all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            raise OpTypeError(op, f"'{name}' as a list of numbers (one per channel)", repr(values))
        return [float(v) for v in values]

    def __call__(self, img):
        op = "Normalize"
        img = _image(op, img)
        if img.ndim == 2:
            shape = ()
            channels = 1
        elif self.is_hwc:
            shape, channels = (1, 1, -1), img.shape[2]
        else:
            shape, channels = (-1, 1, 1), img.shape[0]
        if len(self.mean) != channels and not (len(self.mean) == 1):
            raise OpValueError(op, f"one mean/std value per channel ({channels} channels)",
                               f"{len(self.mean)} values")
        mean = np.asarray(self.mean, np.float32).reshape(shape if len(self.mean) > 1 else ())
        std = np.asarray(self.std, np.float32).reshape(shape if len(self.std) > 1 else ())
        return (img.astype(np.float32) - mean) / std


class HWC2CHW:
    """`HWC2CHW()`: (H, W, C) -> (C, H, W), the layout Conv2d takes. A 2-D image is returned as is."""

    def __call__(self, img):
        img = _image("HWC2CHW", img)
        return img if img.ndim == 2 else np.ascontiguousarray(img.transpose(2, 0, 1))


class ToTensor:
    """`ToTensor(output_type=np.float32)`: HWC uint8 in [0, 255] -> CHW `output_type` in [0, 1]."""

    def __init__(self, output_type=np.float32):
        from ..transforms.transforms import _numpy_dtype
        self.output_type = _numpy_dtype("ToTensor", output_type)

    def __call__(self, img):
        img = _image("ToTensor", img)
        if img.ndim == 2:
            img = img[:, :, None]
        out = img.astype(np.float32) / np.float32(255.0) if img.dtype == np.uint8 else img.astype(np.float32)
        return np.ascontiguousarray(out.transpose(2, 0, 1)).astype(self.output_type)


class Resize:
    """`Resize(size, interpolation=Inter.LINEAR)`: `size=(h, w)`, or an int for the shorter side
    (the other scaled to keep the aspect ratio, rounded down, as MindSpore does)."""

    def __init__(self, size, interpolation=Inter.LINEAR):
        op = "Resize"
        self.size = _size_arg(op, size)
        try:
            interpolation = Inter(interpolation)
        except ValueError:
            raise OpTypeError(op, "'interpolation' as a vision.Inter", repr(interpolation)) from None
        if interpolation not in (Inter.LINEAR, Inter.NEAREST):
            raise OpValueError(op, "interpolation Inter.LINEAR (BILINEAR) or Inter.NEAREST (others are not "
                               "implemented in minispore)", str(interpolation))
        self.interpolation = interpolation

    def _out_size(self, h, w):
        if isinstance(self.size, tuple):
            return self.size
        s = self.size
        return (s, int(w * s / h)) if h <= w else (int(h * s / w), s)

    def __call__(self, img):
        img = _image("Resize", img)
        out_h, out_w = self._out_size(*img.shape[:2])
        if self.interpolation == Inter.NEAREST:
            return _resize.resize_nearest(img, out_h, out_w)
        return _resize.resize_linear(img, out_h, out_w)


class CenterCrop:
    """`CenterCrop(size)`: the central (h, w) window (offsets rounded as MindSpore: `(H - h) // 2`).
    A crop larger than the image pads it with zeros first."""

    def __init__(self, size):
        self.size = _size_arg("CenterCrop", size)

    def __call__(self, img):
        img = _image("CenterCrop", img)
        h, w = (self.size, self.size) if isinstance(self.size, int) else self.size
        H, W = img.shape[:2]
        if h > H or w > W:
            pad_h, pad_w = max(h - H, 0), max(w - W, 0)
            pads = [(pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2)] + [(0, 0)] * (img.ndim - 2)
            img = np.pad(img, pads)
            H, W = img.shape[:2]
        top, left = (H - h) // 2, (W - w) // 2
        return img[top:top + h, left:left + w].copy()


def _padding_arg(op, padding):
    """MindSpore's padding: an int (all sides), (left/right, top/bottom), or (left, top, right, bottom)."""
    if padding is None:
        return (0, 0, 0, 0)
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        padding = (padding,) * 4
    elif isinstance(padding, (list, tuple)) and len(padding) == 2:
        padding = (padding[0], padding[1], padding[0], padding[1])
    if not (isinstance(padding, (list, tuple)) and len(padding) == 4 and all(
            isinstance(p, numbers.Integral) and not isinstance(p, bool) and p >= 0 for p in padding)):
        raise OpValueError(op, "'padding' as an int or a sequence of 2 or 4 non-negative ints", repr(padding))
    return tuple(int(p) for p in padding)


def _pad(img, left, top, right, bottom, mode, fill_value):
    pads = [(top, bottom), (left, right)] + [(0, 0)] * (img.ndim - 2)
    if mode == Border.CONSTANT:
        if isinstance(fill_value, tuple) and img.ndim == 3:
            out = np.stack([np.pad(img[:, :, c], pads[:2], constant_values=fill_value[c])
                            for c in range(img.shape[2])], axis=2)
            return out
        return np.pad(img, pads, constant_values=fill_value)
    return np.pad(img, pads, mode=mode.value)


def _fill_arg(op, fill_value):
    if isinstance(fill_value, numbers.Integral) and not isinstance(fill_value, bool) and 0 <= fill_value <= 255:
        return int(fill_value)
    if isinstance(fill_value, (list, tuple)) and len(fill_value) == 3 and all(
            isinstance(v, numbers.Integral) and 0 <= v <= 255 for v in fill_value):
        return tuple(int(v) for v in fill_value)
    raise OpValueError(op, "'fill_value' as an int in [0, 255] or a 3-tuple of them", repr(fill_value))


class Pad:
    """`Pad(padding, fill_value=0, padding_mode=Border.CONSTANT)`."""

    def __init__(self, padding, fill_value=0, padding_mode=Border.CONSTANT):
        op = "Pad"
        self.padding = _padding_arg(op, padding)
        self.fill_value = _fill_arg(op, fill_value)
        self.padding_mode = Border(padding_mode)

    def __call__(self, img):
        img = _image("Pad", img)
        return _pad(img, *self.padding, self.padding_mode, self.fill_value)


class RandomCrop(RandomTransform):
    """`RandomCrop(size, padding=None, pad_if_needed=False, fill_value=0, padding_mode=Border.CONSTANT)`:
    pad (if asked), then cut a (h, w) window at a uniformly random position."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0, padding_mode=Border.CONSTANT):
        op = "RandomCrop"
        self.size = _size_arg(op, size)
        self.padding = _padding_arg(op, padding)
        if not isinstance(pad_if_needed, bool):
            raise OpTypeError(op, "'pad_if_needed' to be a bool", type(pad_if_needed).__name__)
        self.pad_if_needed = pad_if_needed
        self.fill_value = _fill_arg(op, fill_value)
        self.padding_mode = Border(padding_mode)

    def _call_with_rng(self, rng, img):
        op = "RandomCrop"
        img = _image(op, img)
        h, w = (self.size, self.size) if isinstance(self.size, int) else self.size
        if any(self.padding):
            img = _pad(img, *self.padding, self.padding_mode, self.fill_value)
        H, W = img.shape[:2]
        if self.pad_if_needed and (H < h or W < w):
            ph, pw = max(h - H, 0), max(w - W, 0)
            img = _pad(img, pw, ph, pw, ph, self.padding_mode, self.fill_value)
            H, W = img.shape[:2]
        if H < h or W < w:
            raise OpValueError(op, f"an image at least as large as the crop ({h}, {w}) (or pad_if_needed=True)",
                               f"an image of {H}x{W}")
        top = int(rng.integers(H - h + 1))
        left = int(rng.integers(W - w + 1))
        return img[top:top + h, left:left + w].copy()


class _RandomFlip(RandomTransform):
    _axis = 1

    def __init__(self, prob=0.5):
        self.prob = _prob_arg(type(self).__name__, prob)

    def _call_with_rng(self, rng, img):
        img = _image(type(self).__name__, img)
        if rng.random() < self.prob:
            return np.ascontiguousarray(np.flip(img, axis=self._axis))
        return img


class RandomHorizontalFlip(_RandomFlip):
    """`RandomHorizontalFlip(prob=0.5)`: mirror left-right with probability `prob`."""
    _axis = 1


class RandomVerticalFlip(_RandomFlip):
    """`RandomVerticalFlip(prob=0.5)`: mirror top-bottom with probability `prob`."""
    _axis = 0


class HorizontalFlip:
    """`HorizontalFlip()`: mirror left-right."""

    def __call__(self, img):
        return np.ascontiguousarray(np.flip(_image("HorizontalFlip", img), axis=1))


class VerticalFlip:
    """`VerticalFlip()`: mirror top-bottom."""

    def __call__(self, img):
        return np.ascontiguousarray(np.flip(_image("VerticalFlip", img), axis=0))


__all__ = ["Rescale", "Normalize", "HWC2CHW", "ToTensor", "Resize", "CenterCrop", "Pad", "RandomCrop",
           "RandomHorizontalFlip", "RandomVerticalFlip", "HorizontalFlip", "VerticalFlip"]
