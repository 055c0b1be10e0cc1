"""BoTorch's fused qLogNEHVI kernel: built once per installation, never inside an orchestrator.

BoTorch compiles a C++ kernel for qLogNEHVI the first time a process builds
that acquisition function (~30-45 s on 2 cores), with torch's JIT loader,
which holds a lock file while it builds. An orchestrator may be killed at any
instant (kill -9 included); one killed while holding that lock would leave
every later process waiting on it forever. So the build runs in a detached
process of its own (`prebuild_extension`), started by the orchestrator at
once, and the first model-based proposal waits for it (`build_extension`)
and loads the built kernel (`use_prebuilt_extension`). The wait ends on the
builder's `ready` mark, not on the kernel file: the linker writes that file
in place, and an orchestrator that loaded it mid-write failed its proposal
("file too short"); a resume during a first build did exactly that.

BoTorch's loader (`compat.load_fused_kernel`) imports the module
`logei_fused_ext` first and compiles only where that import fails.
`use_prebuilt_extension` loads the built file as that module (Python's
import machinery, by file location: `sys.path` is left as it is), so the
import finds it. Where no kernel could be built (no TORCH_EXTENSIONS_DIR, no
compiler) BoTorch does what it always does.

Imports neither Ax nor BoTorch (the builder process does).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

from nasctl.optimizer.compat import FUSED_KERNEL_MODULE

FUSED_EXTENSION = FUSED_KERNEL_MODULE
"""The kernel's module name: also the name of its build directory and file."""

READY = "ready"
"""Written by the builder (atomically) once the kernel is built and loads."""

_BUILDER = (
    "import os, sys, warnings; warnings.simplefilter('ignore')\n"
    "ext, ready, built = sys.argv[1], os.path.join(sys.argv[1], sys.argv[2]), sys.argv[3]\n"
    "os.makedirs(ext, exist_ok=True)\n"
    "pidfile, lock = os.path.join(ext, 'builder.pid'), os.path.join(ext, 'lock')\n"
    "try:\n"
    "    old = int(open(pidfile).read())\n"
    "    os.kill(old, 0)\n"
    "    sys.exit(0)  # another builder is alive\n"
    "except (OSError, ValueError):\n"
    "    pass\n"
    "if os.path.exists(lock):\n"
    "    os.remove(lock)  # left by a builder that died\n"
    "open(pidfile, 'w').write(str(os.getpid()))\n"
    "if os.path.exists(ready):\n"
    "    os.remove(ready)  # from a build whose file is gone\n"
    "from nasctl.optimizer.compat import load_fused_kernel\n"
    "if load_fused_kernel() and os.path.exists(os.path.join(ext, built)):\n"
    "    open(ready + '.tmp', 'w').write(str(os.getpid()))\n"
    "    os.replace(ready + '.tmp', ready)\n"
)
"""The detached builder (argv: the build directory, `READY`'s name, the kernel's
file name): BoTorch's own loader, which compiles the kernel into
TORCH_EXTENSIONS_DIR, then marks it `ready` (the linker writes the `.so` in
place: the file exists, too short to load, before the build has ended)."""


def extension_dir() -> str | None:
    """Where the kernel is built (`TORCH_EXTENSIONS_DIR/logei_fused_ext`), None without a TORCH_EXTENSIONS_DIR."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    return os.path.join(root, FUSED_EXTENSION) if root else None


def prebuild_extension() -> subprocess.Popen[bytes] | None:
    """Build BoTorch's fused qLogNEHVI kernel in a detached background process.

    The builder is a separate process in its own session, records its pid, and
    removes a lock whose recorded builder is dead before it starts. Returns
    None when the kernel is already built (or there is nowhere to build it).
    """
    ext = extension_dir()
    if ext is None or _built(ext):
        return None
    return subprocess.Popen(
        [sys.executable, "-c", _BUILDER, ext, READY, FUSED_EXTENSION + ".so"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def _built(ext: str) -> bool:
    """Whether the kernel in `ext` is complete: marked ready by the builder; or
    built by someone else (BoTorch's own compile, an older nasctl): a `.so`
    with no builder alive and no build lock held."""
    if not os.path.exists(os.path.join(ext, FUSED_EXTENSION + ".so")):
        return False
    if os.path.exists(os.path.join(ext, READY)):
        return True
    return not _builder_alive(ext) and not os.path.exists(os.path.join(ext, "lock"))


def _builder_alive(ext: str) -> bool:
    """Whether the builder recorded in `ext` (see `prebuild_extension`) still runs."""
    import psutil

    try:
        with open(os.path.join(ext, "builder.pid")) as f:
            proc = psutil.Process(int(f.read()))
        return bool(proc.status() != psutil.STATUS_ZOMBIE)  # one this process started and has not reaped is done
    except (OSError, ValueError, psutil.Error):
        return False


def build_extension(timeout: float = 600.0) -> bool:
    """Build BoTorch's fused kernel now (through `prebuild_extension`'s detached
    builder) and wait until it exists, also when another process is the one
    building it; stop waiting when no builder runs any more (a build that
    failed). Returns whether the kernel exists (False without a
    TORCH_EXTENSIONS_DIR, see
    `nasctl.orchestration.control.prepare_orchestrator_process`)."""
    ext = extension_dir()
    if ext is None:
        return False
    if _built(ext):
        return True
    builder = prebuild_extension()
    if builder is not None:
        builder.wait(timeout=timeout)
    deadline = time.monotonic() + timeout  # a builder started by another process exits this one at once
    while not _built(ext) and time.monotonic() < deadline and _builder_alive(ext):
        time.sleep(1)
    return _built(ext)


def use_prebuilt_extension() -> bool:
    """Let BoTorch load the fused kernel from `prebuild_extension`'s build.

    Waits for the detached builder (a no-op once the kernel exists: the wait
    is paid once per installation, by the first model-based proposal of the
    first run) and imports the built file as the module BoTorch's loader
    imports first (see the module docstring). Call it before BoTorch builds
    its first qLogNEHVI in the process. Returns whether the kernel is loaded
    or can be: False where none could be built or the built file does not
    load (then BoTorch compiles its own, as it always does)."""
    if FUSED_EXTENSION in sys.modules:
        return True
    ext = extension_dir()
    if ext is None or not build_extension():
        return False
    import torch  # noqa: F401 - the kernel links against the libraries torch has loaded

    spec = importlib.util.spec_from_file_location(FUSED_EXTENSION, os.path.join(ext, FUSED_EXTENSION + ".so"))
    if spec is None or spec.loader is None:
        return False
    try:  # an extension module is loaded (dlopen) as it is created
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError):  # a damaged file (a builder killed while linking): BoTorch's own way
        return False
    sys.modules[FUSED_EXTENSION] = module  # a module imported once stays imported, as after `import`
    return True
