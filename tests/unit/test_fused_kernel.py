"""The fused-kernel build: a proposal never loads a kernel file the builder is still writing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.optimizer import fused_kernel
from nasctl.optimizer.fused_kernel import FUSED_EXTENSION, READY


@pytest.fixture
def ext(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    folder = tmp_path / FUSED_EXTENSION
    folder.mkdir()
    (folder / f"{FUSED_EXTENSION}.so").write_bytes(b"\x7fELF")  # what the linker has written so far
    return folder


@pytest.fixture
def builder(ext: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A live process recorded as the kernel's builder."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (ext / "builder.pid").write_text(str(proc.pid))
    yield proc
    proc.kill()
    proc.wait()


def test_a_kernel_file_being_written_is_waited_for(ext: Path, builder: subprocess.Popen[bytes]) -> None:
    """While the builder runs, the `.so` that exists is not the kernel yet: the wait
    ends when the builder marks it ready, not when the file appears."""
    assert fused_kernel.build_extension(timeout=1.5) is False
    marked = threading.Timer(1.0, lambda: (ext / READY).write_text("1"))
    marked.start()
    t0 = time.monotonic()
    try:
        assert fused_kernel.build_extension(timeout=30) is True
    finally:
        marked.join()
    assert time.monotonic() - t0 >= 0.9


def test_a_builder_that_ended_without_marking_stops_the_wait(ext: Path, builder: subprocess.Popen[bytes]) -> None:
    (ext / "lock").touch()  # torch's build lock, held by a builder that was killed
    threading.Timer(5.0, builder.kill).start()  # after the builder started below has seen it alive
    t0 = time.monotonic()
    assert fused_kernel.build_extension(timeout=60) is False
    assert time.monotonic() - t0 < 50


def test_a_damaged_kernel_file_is_left_to_botorch(ext: Path) -> None:
    """No builder, no lock, a `.so` that does not load (a builder killed while linking):
    the proposal goes on (BoTorch compiles its own) instead of failing with ImportError."""
    code = (
        "import sys\n"
        "from nasctl.optimizer import fused_kernel\n"
        "assert fused_kernel.build_extension(timeout=5)\n"
        "assert fused_kernel.use_prebuilt_extension() is False\n"
        f"assert {FUSED_EXTENSION!r} not in sys.modules\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TORCH_EXTENSIONS_DIR": str(ext.parent)})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_marked_kernel_is_not_built_again(ext: Path) -> None:
    (ext / READY).write_text("1")
    assert fused_kernel.prebuild_extension() is None
    assert fused_kernel.build_extension(timeout=0.1) is True
