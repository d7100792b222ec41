"""mindspore.dataset: sources (NumpySlicesDataset, GeneratorDataset, MnistDataset, Cifar10Dataset),
pipeline operations (map, batch, repeat, take, skip, project, rename), iterators, and the
transforms / vision operations' outputs. Shuffling is off (shuffle=False) wherever order matters:
minispore's shuffle orders are reproducible but not MindSpore's."""
import os
import struct
import tempfile

import numpy as np

from msdiff import case, rand, sub


def _ds(ms):
    return sub(ms, "dataset")


def _vision(ms):
    return sub(ms, "dataset.vision")


def _transforms(ms):
    return sub(ms, "dataset.transforms")


def _rows(dataset, **kw):
    return list(dataset.create_tuple_iterator(output_numpy=True, **kw))


def _image(h=4, w=6, c=3, seed=0, dtype=np.uint8):
    img = np.random.default_rng(seed).integers(0, 256, (h, w, c) if c else (h, w))
    return img.astype(dtype)


def _xyz(ms):
    return _ds(ms).NumpySlicesDataset({"x": np.arange(6, dtype=np.float32).reshape(3, 2), "y": np.arange(3),
                                       "z": np.arange(3) * 10}, shuffle=False)


# -- sources -----------------------------------------------------------------------------------------
@case("dataset/numpy_slices_list_is_one_column")
def _(ms):
    d = _ds(ms).NumpySlicesDataset([1, 2, 3, 4, 5], shuffle=False)
    first = next(iter(d))
    return d.get_col_names(), d.get_dataset_size(), type(first).__name__, first[0], [int(r[0]) for r in _rows(d)]


@case("dataset/numpy_slices_python_float_and_nested_list")
def _(ms):
    floats = next(iter(_ds(ms).NumpySlicesDataset([1.5, 2.5], shuffle=False)))
    nested = next(iter(_ds(ms).NumpySlicesDataset([[1, 2], [3, 4]], shuffle=False)))
    return floats[0], nested[0]


@case("dataset/numpy_slices_tuple_with_names_batched")
def _(ms):
    x, y = rand(5, 3, seed=1), np.arange(5, dtype=np.int32)
    d = _ds(ms).NumpySlicesDataset((x, y), column_names=["data", "label"], shuffle=False).batch(2)
    return d.get_dataset_size(), d.get_batch_size(), list(d.create_tuple_iterator())


@case("dataset/numpy_slices_dict_iterator")
def _(ms):
    d = _xyz(ms)
    return d.get_col_names(), list(d.create_dict_iterator(output_numpy=True))


@case("dataset/dict_iterator_gives_tensors")
def _(ms):
    row = next(_xyz(ms).create_dict_iterator())
    return sorted(row), row["x"], row["y"]


@case("dataset/batch_drop_remainder")
def _(ms):
    out = []
    for drop in (False, True):
        d = _ds(ms).NumpySlicesDataset(np.arange(7), column_names=["q"], shuffle=False).batch(3, drop_remainder=drop)
        out.append((d.get_dataset_size(), [r[0] for r in _rows(d)]))
    return out


@case("dataset/batch_of_scalars_and_images")
def _(ms):
    imgs = np.stack([_image(seed=i) for i in range(3)])
    d = _ds(ms).NumpySlicesDataset((imgs, np.array([1, 2, 3], np.int32)), ["image", "label"], shuffle=False).batch(2)
    return list(d.create_tuple_iterator())


@case("dataset/generator_random_access_source")
def _(ms):
    class Source:
        def __getitem__(self, i):
            return np.full((2,), i, np.float32), np.int32(i * 10)

        def __len__(self):
            return 5

    d = _ds(ms).GeneratorDataset(Source(), column_names=["data", "label"], shuffle=False).batch(2)
    return d.get_dataset_size(), d.get_col_names(), list(d.create_tuple_iterator())


@case("dataset/generator_function_and_python_values")
def _(ms):
    def gen():
        for i in range(3):
            yield (np.array([i, i + 1], np.int32), float(i) / 2, True)

    d = _ds(ms).GeneratorDataset(gen, column_names=["a", "b", "c"])
    return d.get_dataset_size(), list(d.create_tuple_iterator())


@case("dataset/iterator_columns_subset_and_epochs")
def _(ms):
    d = _xyz(ms)
    it = d.create_tuple_iterator(columns=["z", "x"], output_numpy=True)
    epochs = [[r[0].tolist() for r in it] for _ in range(2)]
    return epochs, [len(list(d)) for _ in range(2)]


# -- operations ----------------------------------------------------------------------------------
@case("dataset/map_one_column_in_place")
def _(ms):
    d = _xyz(ms).map(lambda x: x * 2, input_columns="x")
    return d.get_col_names(), _rows(d)


@case("dataset/map_more_outputs_come_first")
def _(ms):
    d = _xyz(ms).map(lambda z: (z, z + 1), input_columns=["z"], output_columns=["z", "w"])
    return d.get_col_names(), _rows(d)


@case("dataset/map_two_inputs_one_output")
def _(ms):
    d = _xyz(ms).map(lambda y, z: y + z, input_columns=["y", "z"], output_columns=["s"])
    return d.get_col_names(), _rows(d)


@case("dataset/map_renames_in_place")
def _(ms):
    d = _xyz(ms).map(lambda y: y * 3, input_columns=["y"], output_columns=["q"])
    return d.get_col_names(), _rows(d)


@case("dataset/map_list_of_operations_default_column")
def _(ms):
    d = _xyz(ms).map([lambda x: x + 1, lambda x: x * 2])
    return d.get_col_names(), _rows(d)


@case("dataset/map_swapped_inputs_keep_positions")
def _(ms):
    d = _xyz(ms).map(lambda z, y: (z + 1, y + 2), input_columns=["z", "y"])
    return d.get_col_names(), _rows(d)


@case("dataset/repeat_and_batch_order")
def _(ms):
    a = _ds(ms).NumpySlicesDataset(np.arange(3), shuffle=False).repeat(2).batch(2)
    b = _ds(ms).NumpySlicesDataset(np.arange(3), shuffle=False).batch(2).repeat(2)
    return ((a.get_dataset_size(), [r[0] for r in _rows(a)]),
            (b.get_dataset_size(), b.get_repeat_count(), [r[0] for r in _rows(b)]))


@case("dataset/take_and_skip")
def _(ms):
    def base():
        return _ds(ms).NumpySlicesDataset(np.arange(6), shuffle=False)
    t, s = base().take(4), base().skip(4)
    return (t.get_dataset_size(), [int(r[0]) for r in _rows(t)], s.get_dataset_size(), [int(r[0]) for r in _rows(s)],
            base().take(10).get_dataset_size(), base().skip(10).get_dataset_size())


@case("dataset/project_and_rename")
def _(ms):
    p = _xyz(ms).project(["z", "x"])
    r = _xyz(ms).rename(["x"], ["xx"])
    return p.get_col_names(), _rows(p)[0], r.get_col_names()


@case("dataset/output_shapes_and_types")
def _(ms):
    d = _xyz(ms).batch(2)
    return d.output_shapes(), [str(t) for t in d.output_types()]


@case("dataset/shuffle_keeps_rows_and_size")
def _(ms):
    d = _ds(ms).NumpySlicesDataset(np.arange(10), shuffle=False).shuffle(4)
    return d.get_dataset_size(), sorted(int(r[0]) for r in _rows(d))


@case("dataset/default_shuffle_is_a_permutation")
def _(ms):
    d = _ds(ms).NumpySlicesDataset(list(range(12)))          # shuffle=None: shuffled
    order = [int(r[0]) for r in _rows(d)]
    return sorted(order), len(order)


# -- transforms ---------------------------------------------------------------------------------------
@case("dataset/typecast")
def _(ms):
    t = _transforms(ms)
    img = _image()
    return t.TypeCast(ms.int32)(img), t.TypeCast(np.float32)(img), t.TypeCast(ms.float16)(np.array([0.5, 1.5]))


@case("dataset/onehot")
def _(ms):
    t = _transforms(ms)
    return (t.OneHot(5)(np.array(3)), t.OneHot(5)(np.array([1, 3])), t.OneHot(4)(np.array(2, np.int32)))


@case("dataset/compose_rescale_hwc2chw")
def _(ms):
    t, v = _transforms(ms), _vision(ms)
    return t.Compose([v.Rescale(1.0 / 255, 0.0), v.HWC2CHW()])(_image())


@case("dataset/typecast_in_map_then_train_dtype")
def _(ms):
    t = _transforms(ms)
    d = _ds(ms).NumpySlicesDataset((rand(4, 2, seed=2), np.arange(4)), ["data", "label"], shuffle=False)
    d = d.map(t.TypeCast(ms.int32), input_columns="label").batch(4)
    data, label = next(d.create_tuple_iterator())
    return data.dtype, label.dtype, label


# -- vision -----------------------------------------------------------------------------------------
@case("dataset/vision_normalize_hwc_chw_gray")
def _(ms):
    v = _vision(ms)
    img = _image()
    mean, std = [121.0, 115.0, 100.0], [70.0, 68.0, 71.0]
    return (v.Normalize(mean, std)(img), v.Normalize(mean, std, is_hwc=False)(img.transpose(2, 0, 1).copy()),
            v.Normalize([121.0], [70.0])(img[:, :, :1].copy()), v.Normalize([121.0], [70.0])(img[:, :, 0].copy()))


@case("dataset/vision_hwc2chw")
def _(ms):
    v = _vision(ms)
    return v.HWC2CHW()(_image()), v.HWC2CHW()(_image(c=0))


@case("dataset/vision_rescale_and_totensor")
def _(ms):
    v = _vision(ms)
    img = _image()
    return v.Rescale(1.0 / 255, -0.5)(img), v.Rescale(2.0, 1.0)(img.astype(np.float32)), v.ToTensor()(img)


@case("dataset/vision_resize_upsample_uint8")
def _(ms):
    v = _vision(ms)
    return v.Resize((8, 12))(_image()), v.Resize((9, 7))(_image(seed=1))


@case("dataset/vision_resize_downsample_uint8")
def _(ms):
    v = _vision(ms)
    img = _image(17, 23, 3, seed=2)
    return v.Resize((2, 3))(_image()), v.Resize((11, 8))(img), v.Resize((8, 11))(img)


@case("dataset/vision_resize_int_keeps_aspect")
def _(ms):
    v = _vision(ms)
    return v.Resize(8)(_image()), v.Resize(5)(_image(12, 7, 3, seed=3))


@case("dataset/vision_resize_gray_and_one_channel")
def _(ms):
    v = _vision(ms)
    return v.Resize((8, 12))(_image(c=0)), v.Resize((5, 9))(_image(c=1, seed=4))


@case("dataset/vision_resize_float32", rtol=1e-5, atol=1e-4)
def _(ms):
    v = _vision(ms)
    return v.Resize((8, 12))(_image().astype(np.float32)), v.Resize((3, 5))(rand(7, 9, 3, seed=5))


@case("dataset/vision_resize_nearest")
def _(ms):
    v = _vision(ms)
    return (v.Resize((8, 12), v.Inter.NEAREST)(_image()), v.Resize((3, 4), v.Inter.NEAREST)(_image(7, 9, 3, seed=6)))


@case("dataset/vision_flips_with_prob_one")
def _(ms):
    v = _vision(ms)
    img = _image()
    return v.RandomHorizontalFlip(1.0)(img), v.RandomVerticalFlip(1.0)(img), v.RandomHorizontalFlip(0.0)(img)


@case("dataset/vision_crops")
def _(ms):
    v = _vision(ms)
    img = _image()
    return (v.RandomCrop((4, 6))(img), v.RandomCrop((4, 6), padding=2)(img).shape, v.RandomCrop(3)(img).shape,
            v.CenterCrop((2, 4))(img), v.CenterCrop(3)(img))


@case("dataset/vision_pad")
def _(ms):
    v = _vision(ms)
    img = _image(3, 4, 3)
    return v.Pad(1)(img), v.Pad((1, 2), padding_mode=v.Border.EDGE)(img), v.Pad((0, 1, 2, 0), fill_value=7)(img)


@case("dataset/vision_pipeline_resize_normalize_batch", rtol=1e-5, atol=1e-5)
def _(ms):
    v = _vision(ms)
    imgs = np.stack([_image(6, 6, 3, seed=i) for i in range(4)])
    d = _ds(ms).NumpySlicesDataset((imgs, np.arange(4, dtype=np.int32)), ["image", "label"], shuffle=False)
    d = d.map([v.Resize((4, 4)), v.Rescale(1.0 / 255, 0.0), v.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
               v.HWC2CHW()], input_columns="image").batch(2)
    return list(d.create_tuple_iterator())


# -- MNIST / CIFAR-10 files ---------------------------------------------------------------------------
def _write_idx(path, arr):
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, arr.ndim))
        f.write(struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(arr.astype(np.uint8).tobytes())


def _mnist_dir(root):
    rng = np.random.default_rng(0)
    _write_idx(os.path.join(root, "train-images-idx3-ubyte"), rng.integers(0, 256, (5, 28, 28)))
    _write_idx(os.path.join(root, "train-labels-idx1-ubyte"), np.array([3, 1, 4, 1, 5]))
    _write_idx(os.path.join(root, "t10k-images-idx3-ubyte"), rng.integers(0, 256, (3, 28, 28)))
    _write_idx(os.path.join(root, "t10k-labels-idx1-ubyte"), np.array([9, 2, 6]))


@case("dataset/mnist_columns_usages_and_rows")
def _(ms):
    with tempfile.TemporaryDirectory() as root:
        _mnist_dir(root)
        out = []
        for usage in ("train", "test", "all", None):
            d = _ds(ms).MnistDataset(root, usage=usage, shuffle=False)
            out.append((d.get_dataset_size(), [int(r[1]) for r in _rows(d)]))
        d = _ds(ms).MnistDataset(root, usage="train", shuffle=False)
        image, label = next(d.create_tuple_iterator())
        return d.get_col_names(), out, image, label


@case("dataset/mnist_num_samples_and_batch")
def _(ms):
    with tempfile.TemporaryDirectory() as root:
        _mnist_dir(root)
        d = _ds(ms).MnistDataset(root, usage="train", num_samples=4, shuffle=False).batch(3)
        return d.get_dataset_size(), [(r[0].shape, r[0].dtype.name, r[1]) for r in _rows(d)]


@case("dataset/cifar10_test_file_rows")
def _(ms):
    # MindSpore reads 10000 records per CIFAR-10 file, so the file is full size
    rng = np.random.default_rng(0)
    n = 10000
    labels = rng.integers(0, 10, n).astype(np.uint8)
    planes = np.zeros((n, 3072), np.uint8)
    planes[:4] = rng.integers(0, 256, (4, 3072))
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "test_batch.bin"), "wb") as f:
            f.write(np.concatenate([labels[:, None], planes], axis=1).tobytes())
        full = _ds(ms).Cifar10Dataset(root, usage="test", shuffle=False)
        d = _ds(ms).Cifar10Dataset(root, usage="test", num_samples=3, shuffle=False)
        return full.get_col_names(), full.get_dataset_size(), d.get_dataset_size(), list(d.create_tuple_iterator())


# -- bad input ----------------------------------------------------------------------------------------
@case("dataset/batch_size_zero", raises=True)
def _(ms):
    _xyz(ms).batch(0)


@case("dataset/map_unknown_column", raises=True)
def _(ms):
    list(_xyz(ms).map(lambda q: q, input_columns="q"))


@case("dataset/numpy_slices_unequal_columns", raises=True)
def _(ms):
    _ds(ms).NumpySlicesDataset((np.arange(3), np.arange(4)), ["a", "b"])


@case("dataset/normalize_mean_std_lengths", raises=True)
def _(ms):
    _vision(ms).Normalize([1.0, 2.0, 3.0], [1.0, 2.0])


@case("dataset/resize_bad_size", raises=True)
def _(ms):
    _vision(ms).Resize((0, 4))


@case("dataset/mnist_missing_folder", raises=True)
def _(ms):
    _ds(ms).MnistDataset("/nonexistent/minispore/mnist")


@case("dataset/generator_without_column_names", raises=True)
def _(ms):
    list(_ds(ms).GeneratorDataset([(1,), (2,)]))
