"""mindspore.dataset pipelines, sources and transforms on their documented semantics, with
independent references (NumPy float64 bilinear resize, hand-written file bytes). The comparison with
real MindSpore is tests/fidelity/cases/dataset.py."""
import os
import struct

import numpy as np
import pytest

import minispore as ms
import minispore.dataset as ds
from minispore.common.errors import MinisporeError
from minispore.dataset import config, transforms, vision


def _rows(d, **kw):
    return list(d.create_tuple_iterator(output_numpy=True, **kw))


def _image(h=5, w=7, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, c)).astype(np.uint8)


@pytest.fixture
def dataset_seed():
    yield
    config._settings["seed"] = None          # back to "derive from the global RNG"


# -- pipeline operations -----------------------------------------------------------------------
def test_numpy_slices_columns_and_dtypes():
    d = ds.NumpySlicesDataset({"a": [1.5, 2.5], "b": [[1, 2], [3, 4]]}, shuffle=False)
    assert d.get_col_names() == ["a", "b"]
    rows = _rows(d)
    assert rows[0][0].dtype == np.float64 and rows[1][1].tolist() == [3, 4] and rows[1][1].dtype == np.int64
    assert ds.NumpySlicesDataset([1, 2]).get_col_names() == ["column_0"]


def test_map_column_placement_rules():
    base = {"x": np.arange(3.0), "y": np.arange(3), "z": np.arange(3) * 10}
    same = ds.NumpySlicesDataset(base, shuffle=False).map(lambda y: y + 1, "y", "q")
    assert same.get_col_names() == ["x", "q", "z"] and [int(r[1]) for r in _rows(same)] == [1, 2, 3]
    more = ds.NumpySlicesDataset(base, shuffle=False).map(lambda z: (z, -z), ["z"], ["z", "w"])
    assert more.get_col_names() == ["z", "w", "x", "y"] and _rows(more)[2][1] == -20
    fewer = ds.NumpySlicesDataset(base, shuffle=False).map(lambda x, z: x + z, ["x", "z"], ["s"])
    assert fewer.get_col_names() == ["s", "y"] and [float(r[0]) for r in _rows(fewer)] == [0.0, 11.0, 22.0]


def test_repeat_take_skip_project_rename_sizes():
    def base():
        return ds.NumpySlicesDataset((np.arange(5), np.arange(5) * 2), ["a", "b"], shuffle=False)
    assert [int(r[0]) for r in _rows(base().skip(1).take(3).repeat(2))] == [1, 2, 3, 1, 2, 3]
    assert base().repeat(3).get_dataset_size() == 15 and base().batch(2).repeat(2).get_dataset_size() == 6
    assert base().project("b").get_col_names() == ["b"] and _rows(base().project("b"))[1][0] == 2
    assert base().rename("a", "c").get_col_names() == ["c", "b"]


def test_shuffle_buffer_is_a_seeded_permutation(dataset_seed):
    def order():
        return [int(r[0]) for r in _rows(ds.NumpySlicesDataset(np.arange(20), shuffle=False).shuffle(5))]
    config.set_seed(3)
    first = order()
    assert sorted(first) == list(range(20)) and first != list(range(20))
    assert order() == first                       # each new iterator restarts from the dataset seed
    config.set_seed(4)
    assert order() != first
    assert config.get_seed() == 4


def test_global_seed_fixes_source_shuffling_when_no_dataset_seed():
    d = ds.NumpySlicesDataset(np.arange(30))
    ms.set_seed(11)
    a = [int(r[0]) for r in _rows(d)]
    ms.set_seed(11)
    assert [int(r[0]) for r in _rows(d)] == a != list(range(30))


def test_random_transforms_in_a_pipeline_are_reproducible(dataset_seed):
    imgs = np.stack([_image(seed=i) for i in range(8)])

    def run():
        d = ds.NumpySlicesDataset({"image": imgs}, shuffle=False)
        d = d.map([vision.RandomCrop(3, padding=1), vision.RandomHorizontalFlip()], input_columns="image")
        return np.stack([r[0] for r in _rows(d)])
    config.set_seed(0)
    a = run()
    assert a.shape == (8, 3, 3, 3)
    assert np.array_equal(run(), a)


def test_iterator_epochs_and_dict_rows():
    d = ds.NumpySlicesDataset(np.arange(3), column_names="v", shuffle=False)
    it = d.create_dict_iterator(num_epochs=2)
    assert [[int(r["v"]) for r in it] for _ in range(3)] == [[0, 1, 2], [0, 1, 2], []]
    assert isinstance(next(d.create_dict_iterator())["v"], ms.Tensor)


# -- transforms -------------------------------------------------------------------------------------
def _bilinear_reference(img, out_h, out_w):
    """Half-pixel bilinear in float64 (x clamped onto the edge, y indices clamped)."""
    src = img.astype(np.float64)
    H, W = src.shape[:2]

    def taps(n_in, n_out):
        f = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        i0 = np.floor(f).astype(int)
        t = f - i0
        return np.clip(i0, 0, n_in - 1), np.clip(i0 + 1, 0, n_in - 1), t
    y0, y1, ty = taps(H, out_h)
    x0, x1, tx = taps(W, out_w)
    tx = np.where((np.floor((np.arange(out_w) + 0.5) * W / out_w - 0.5) < 0), 0.0, tx)
    rows = src[:, x0] * (1 - tx)[:, None] + src[:, x1] * tx[:, None]
    return rows[y0] * (1 - ty)[:, None, None] + rows[y1] * ty[:, None, None]


@pytest.mark.parametrize("size", [(10, 14), (3, 4), (7, 5), (5, 7)])
def test_resize_bilinear_against_float64_reference(size):
    img = _image(seed=2)
    ref = _bilinear_reference(img, *size)
    out = vision.Resize(size)(img)
    assert out.dtype == np.uint8 and out.shape == size + (3,)
    assert np.abs(out.astype(np.float64) - ref).max() <= 1.0       # fixed-point rounding, as OpenCV
    fout = vision.Resize(size)(img.astype(np.float32))
    np.testing.assert_allclose(fout, ref, rtol=1e-5, atol=1e-3)


def test_resize_nearest_and_shorter_side():
    img = _image(4, 6, 1)
    near = vision.Resize((8, 3), vision.Inter.NEAREST)(img)
    np.testing.assert_array_equal(near, img[[0, 0, 1, 1, 2, 2, 3, 3]][:, [0, 2, 4]])
    assert vision.Resize(2)(img).shape == (2, 3, 1) and vision.Resize(6)(_image(9, 6)).shape == (9, 6, 3)


def test_normalize_hwc2chw_totensor_rescale_values():
    img = _image()
    mean, std = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])
    np.testing.assert_allclose(vision.Normalize(mean.tolist(), std.tolist())(img), (img - mean) / std, rtol=1e-6)
    chw = vision.HWC2CHW()(img)
    assert chw.shape == (3, 5, 7) and chw[1, 2, 3] == img[2, 3, 1]
    t = vision.ToTensor()(img)
    assert t.dtype == np.float32 and np.allclose(t, img.transpose(2, 0, 1) / 255.0)
    assert vision.Rescale(0.5, 1.0)(img).dtype == np.float32


def test_crop_flip_pad_geometry():
    img = _image()
    np.testing.assert_array_equal(vision.CenterCrop((3, 3))(img), img[1:4, 2:5])
    np.testing.assert_array_equal(vision.RandomVerticalFlip(1.0)(img), img[::-1])
    padded = vision.Pad((1, 2, 3, 4), fill_value=9)(img)
    assert padded.shape == (5 + 2 + 4, 7 + 1 + 3, 3) and padded[0, 0, 0] == 9
    np.testing.assert_array_equal(padded[2:7, 1:8], img)
    assert vision.RandomCrop(7, pad_if_needed=True)(img).shape == (7, 7, 3)


def test_typecast_onehot_compose_duplicate():
    assert transforms.TypeCast(ms.float16)(np.arange(3)).dtype == np.float16
    np.testing.assert_array_equal(transforms.OneHot(3)(np.array([2, 0])), [[0, 0, 1], [1, 0, 0]])
    smooth = transforms.OneHot(4, smoothing_rate=0.2)(np.array(1))
    np.testing.assert_allclose(smooth, [0.05, 0.85, 0.05, 0.05], rtol=1e-6)
    comp = transforms.Compose([vision.Rescale(2.0, 0.0), vision.HWC2CHW()])(_image())
    np.testing.assert_allclose(comp, _image().transpose(2, 0, 1) * 2.0)
    d = ds.NumpySlicesDataset({"a": np.arange(2)}, shuffle=False).map(transforms.Duplicate(), "a", ["a", "b"])
    assert d.get_col_names() == ["a", "b"] and _rows(d)[1][1] == 1


# -- MNIST / CIFAR-10 files -------------------------------------------------------------------------
def _idx(path, magic_type, arr):
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, magic_type, arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(arr.astype(np.uint8).tobytes())


def _mnist(root, n_train=4, n_test=2):
    rng = np.random.default_rng(1)
    data = {}
    for part, n in (("train", n_train), ("t10k", n_test)):
        images, labels = rng.integers(0, 256, (n, 28, 28)), rng.integers(0, 10, n)
        _idx(os.path.join(root, f"{part}-images-idx3-ubyte"), 8, images)
        _idx(os.path.join(root, f"{part}-labels-idx1-ubyte"), 8, labels)
        data[part] = (images, labels)
    return data


def test_mnist_reads_idx_files(tmp_path):
    data = _mnist(str(tmp_path))
    d = ds.MnistDataset(str(tmp_path), usage="train", shuffle=False)
    rows = _rows(d)
    assert d.get_col_names() == ["image", "label"] and d.get_dataset_size() == 4
    assert rows[2][0].shape == (28, 28, 1) and rows[2][0].dtype == np.uint8 and rows[2][1].dtype == np.uint32
    np.testing.assert_array_equal(rows[2][0][:, :, 0], data["train"][0][2])
    all_labels = [int(r[1]) for r in _rows(ds.MnistDataset(str(tmp_path), shuffle=False))]
    assert all_labels == data["t10k"][1].tolist() + data["train"][1].tolist()      # test first, as MindSpore
    assert ds.MnistDataset(str(tmp_path), "train", num_samples=3).get_dataset_size() == 3


def test_mnist_rejects_damaged_files(tmp_path):
    _mnist(str(tmp_path))
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(MinisporeError, match="truncated"):
        ds.MnistDataset(str(tmp_path), usage="train")
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x03" + b"\x00" * 8)
    with pytest.raises(MinisporeError, match="magic"):
        ds.MnistDataset(str(tmp_path), usage="test")


def test_cifar10_reads_binary_records(tmp_path):
    rng = np.random.default_rng(2)
    expected = []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        images = rng.integers(0, 256, (2, 32, 32, 3)).astype(np.uint8)
        labels = rng.integers(0, 10, 2).astype(np.uint8)
        records = np.concatenate([labels[:, None], images.transpose(0, 3, 1, 2).reshape(2, -1)], axis=1)
        (tmp_path / name).write_bytes(records.tobytes())
        expected += list(zip(images, labels))
    d = ds.Cifar10Dataset(str(tmp_path), usage="all", shuffle=False)
    rows = _rows(d)
    assert d.get_dataset_size() == 12 and d.get_col_names() == ["image", "label"]
    for (img, lbl), (want_img, want_lbl) in zip(rows, expected):          # train files, then test
        np.testing.assert_array_equal(img, want_img)
        assert lbl == want_lbl and lbl.dtype == np.uint32
    assert ds.Cifar10Dataset(str(tmp_path), usage="test").get_dataset_size() == 2
    (tmp_path / "test_batch.bin").write_bytes(b"\x01" * 100)
    with pytest.raises(MinisporeError, match="3073-byte records"):
        ds.Cifar10Dataset(str(tmp_path), usage="test")


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, words", [
    (lambda: ds.NumpySlicesDataset([1, 2]).map(lambda v: v, input_columns="nope"), "input_columns"),
    (lambda: ds.NumpySlicesDataset([1, 2]).map("not callable"), "operations"),
    (lambda: list(ds.NumpySlicesDataset([1, 2]).map(lambda v: (v, v))), "return 1 value"),
    (lambda: ds.NumpySlicesDataset([1, 2]).shuffle(1), "buffer_size"),
    (lambda: ds.NumpySlicesDataset([1, 2]).repeat(0), "count"),
    (lambda: ds.NumpySlicesDataset([1, 2]).take(0), "count"),
    (lambda: ds.NumpySlicesDataset([1, 2]).skip(-1), "count"),
    (lambda: ds.NumpySlicesDataset([1, 2]).rename(["column_0"], ["a", "b"]), "one length"),
    (lambda: ds.NumpySlicesDataset((np.arange(2), np.arange(3))), "equal length"),
    (lambda: ds.NumpySlicesDataset([1, 2], column_names=["a", "b"]), "column name"),
    (lambda: vision.Resize((2, 2), vision.Inter.CUBIC), "interpolation"),
    (lambda: vision.Normalize([1.0], [0.0]), "std"),
    (lambda: vision.Normalize([1.0, 2.0], [1.0, 1.0])(_image()), "per channel"),
    (lambda: vision.RandomCrop(9)(_image()), "at least as large"),
    (lambda: vision.RandomHorizontalFlip(1.5), "prob"),
    (lambda: vision.HWC2CHW()(np.zeros((2, 2, 2, 2))), "shape"),
    (lambda: transforms.TypeCast("not a dtype"), "data_type"),
    (lambda: transforms.OneHot(3)(np.array([3])), "class ids"),
    (lambda: ds.MnistDataset("/nonexistent"), "dataset_dir"),
    (lambda: ds.Cifar10Dataset(".", usage="valid"), "usage"),
    (lambda: config.set_seed(-1), "set_seed"),
])
def test_bad_input_raises_minispore_errors(make, words):
    with pytest.raises(MinisporeError) as err:
        make()
    assert words in str(err.value)


def test_cifar10_train_reads_the_data_batch_files_present(tmp_path):
    record = np.zeros((3, 3073), np.uint8)
    record[:, 0] = [1, 2, 3]
    (tmp_path / "data_batch_1.bin").write_bytes(record.tobytes())
    (tmp_path / "data_batch_x.bin").write_bytes(record[:1].tobytes())
    assert [int(r[1]) for r in _rows(ds.Cifar10Dataset(str(tmp_path), "train", shuffle=False))] == [1, 2, 3, 1]
    with pytest.raises(MinisporeError, match="test_batch.bin"):
        ds.Cifar10Dataset(str(tmp_path), usage="test")
