"""Fixtures that several unit test modules share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def funcs(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of an importable module of trial functions: the asking test module's FUNCS
    source, written to tmp_path under a name unique to the test module and the test."""
    stem = request.module.__name__.rsplit(".", 1)[-1]
    mod = f"nasctl_{stem}_funcs_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**6}"
    (tmp_path / f"{mod}.py").write_text(request.module.FUNCS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return mod
