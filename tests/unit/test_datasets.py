"""The trainer's datasets: shapes, dtypes, classes, the IDX loader and its errors."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from nasctl.errors import DatasetError
from nasctl.search_spaces.data import load_dataset, read_idx


def _check(ds, shape: tuple[int, ...], n_train: int, n_val: int) -> None:  # type: ignore[no-untyped-def]
    assert ds.shape == shape and ds.num_classes == 10
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    assert ds.x_train.shape == (n_train, *shape) and ds.x_val.shape == (n_val, *shape)
    assert set(np.unique(ds.y_train)) == set(range(10)) and set(np.unique(ds.y_val)) == set(range(10))


def test_digits_as_images() -> None:
    ds = load_dataset("digits")
    _check(ds, (1, 8, 8), 1438, 359)
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0


def test_mnist1d_generated_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NASCTL_CACHE_DIR", str(tmp_path))
    ds = load_dataset("mnist1d")
    _check(ds, (1, 40), 4000, 1000)
    cached = list(tmp_path.glob("mnist1d-*.npz"))
    assert len(cached) == 1
    again = load_dataset("mnist1d")  # from the cache: the same arrays
    assert np.array_equal(again.x_val, ds.x_val) and np.array_equal(again.y_train, ds.y_train)


def test_mnist_5k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NASCTL_CACHE_DIR", str(tmp_path))
    ds = load_dataset("mnist")
    _check(ds, (1, 28, 28), 4000, 1000)
    assert ds.x_train.max() == pytest.approx(1.0) and ds.x_train.min() == 0.0


def _idx(path: Path, arr: np.ndarray, gz: bool) -> None:
    data = bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.mark.parametrize("gz", [False, True])
def test_idx_loader(tmp_path: Path, gz: bool) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(50, 5, 6), dtype=np.uint8)
    labels = np.arange(50, dtype=np.uint8) % 3
    sfx = ".gz" if gz else ""
    _idx(tmp_path / f"train-images-idx3-ubyte{sfx}", images, gz)
    _idx(tmp_path / f"train-labels-idx1-ubyte{sfx}", labels, gz)
    ds = load_dataset(f"idx:{tmp_path}")  # no t10k pair: a fixed stratified 80/20 split
    assert ds.shape == (1, 5, 6) and ds.num_classes == 3 and len(ds.y_train) + len(ds.y_val) == 50
    assert np.bincount(ds.y_val).tolist() == [3, 3, 3]  # round(0.2 x 17, 17, 16) per class
    assert read_idx(tmp_path / f"train-images-idx3-ubyte{sfx}").tolist() == images.tolist()
    assert ds.x_train.max() <= 1.0
    _idx(tmp_path / "t10k-images-idx3-ubyte", images[:7], False)  # with a t10k pair: that is validation
    _idx(tmp_path / "t10k-labels-idx1-ubyte", labels[:7], False)
    ds = load_dataset(f"idx:{tmp_path}")
    assert len(ds.y_train) == 50 and ds.y_val.tolist() == labels[:7].tolist()
    assert np.allclose(ds.x_val[:, 0] * 255, images[:7])


def test_idx_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(f"idx:{tmp_path / 'nope'}")
    with pytest.raises(DatasetError, match="has no train-images"):
        load_dataset(f"idx:{tmp_path}")
    images = np.zeros((4, 2, 2), dtype=np.uint8)
    _idx(tmp_path / "train-images-idx3-ubyte", images, False)
    with pytest.raises(DatasetError, match="lacks train-labels-idx1-ubyte"):
        load_dataset(f"idx:{tmp_path}")
    good = tmp_path / "train-labels-idx1-ubyte"
    _idx(good, np.zeros(4, dtype=np.uint8), False)
    assert len(load_dataset(f"idx:{tmp_path}").y_train) == 3
    good.write_bytes(good.read_bytes()[:-1])  # truncated
    with pytest.raises(DatasetError, match="truncated or corrupt") as e:
        load_dataset(f"idx:{tmp_path}")
    assert "\n" not in str(e.value) and "train-labels-idx1-ubyte" in str(e.value)
    good.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DatasetError, match="bad magic number"):
        load_dataset(f"idx:{tmp_path}")
    good.unlink()
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b\x08broken")
    with pytest.raises(DatasetError, match="cannot be read"):
        load_dataset(f"idx:{tmp_path}")
    with pytest.raises(DatasetError, match="not known"):
        load_dataset("cifar10")
