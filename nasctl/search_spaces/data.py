"""Datasets that ship inside installed packages (nothing is downloaded)."""

from __future__ import annotations

import gzip
import importlib.util
import os

import numpy as np


def _package_dir(name: str) -> str:
    # find_spec on a top-level package locates it without importing it
    # (importing sklearn costs ~1.5 s; we only need one of its data files).
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {name} is not installed")
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
