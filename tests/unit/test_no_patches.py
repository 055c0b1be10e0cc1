"""nasctl changes Ax and BoTorch only through their extension points: after real
optimizer runs (through the model-based phase, every method's acquisition) no
attribute of an ax, botorch, gpytorch or linear_operator module or class
points at nasctl code; and the version guard names what it found and wants."""

from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import nasctl
from nasctl.errors import NasctlError, UnsupportedVersionError
from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.spec import parse_spec

LIBRARIES = ("ax", "botorch", "gpytorch", "linear_operator")
NASCTL_DIR = str(Path(nasctl.__file__).resolve().parent)


def _is_nasctl(value: Any) -> bool:
    """Whether `value` is (or wraps) a function, class or module of nasctl."""
    for inner in (value, getattr(value, "__func__", None), getattr(value, "fget", None),
                  getattr(value, "__wrapped__", None)):
        if inner is None:
            continue
        module = getattr(inner, "__module__", None) if isinstance(inner, (type, types.FunctionType)) else None
        if isinstance(inner, types.ModuleType):
            module = inner.__name__
        if isinstance(module, str) and (module == "nasctl" or module.startswith("nasctl.")):
            return True
        code = getattr(inner, "__code__", None)
        if code is not None and str(Path(code.co_filename).resolve()).startswith(NASCTL_DIR):
            return True
    return False


def _library(name: str) -> bool:
    return name.split(".")[0] in LIBRARIES


def patched_attributes() -> list[str]:
    """`module.attribute` and `module.Class.attribute` of the four libraries that point at nasctl."""
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or not _library(name):
            continue
        for attr, value in list(vars(module).items()):
            if _is_nasctl(value):
                found.append(f"{name}.{attr}")
            if isinstance(value, type) and _library(getattr(value, "__module__", "") or ""):
                for cattr, cvalue in list(vars(value).items()):
                    if _is_nasctl(cvalue):
                        found.append(f"{name}.{value.__name__}.{cattr}")
    return sorted(set(found))


CONTINUOUS = """
name: three
search_space:
  x0: {type: float, low: 0.0, high: 1.0}
  x1: {type: float, low: 0.0, high: 1.0}
  x2: {type: float, low: 0.0, high: 1.0}
objectives:
  f1: {goal: minimize, threshold: 2.0}
  f2: {goal: minimize, threshold: 2.0}
  f3: {goal: minimize, threshold: 2.0}
budget: {max_trials: 12}
trial: {script: /bin/true}
optimizer: {initial_trials: 5, seed: 1}
"""

CATEGORICAL = """
name: cells
search_space:
  a: {type: choice, values: [p, q, r]}
  b: {type: choice, values: [p, q, r]}
  c: {type: choice, values: [p, q, r]}
objectives:
  f1: {goal: minimize, threshold: 3.0}
  f2: {goal: minimize, threshold: 3.0}
budget: {max_trials: 12}
trial: {script: /bin/true}
optimizer: {initial_trials: 5, seed: 1}
"""


def _continuous(p: dict[str, Any]) -> dict[str, float]:
    x0, x1, x2 = (float(p[k]) for k in ("x0", "x1", "x2"))
    return {"f1": x0 + 0.3 * x2, "f2": (1 - x0) ** 2 + x1, "f3": 1e-3 * 10 ** (3 * x1) + 0.2 * x2}


def _categorical(p: dict[str, Any]) -> dict[str, float]:
    code = {"p": 0.0, "q": 1.0, "r": 2.0}
    a, b, c = (code[str(p[k])] for k in ("a", "b", "c"))
    return {"f1": a + 0.5 * b + 0.1 * c, "f2": (2 - a) + 0.3 * (2 - b) + 0.2 * c}


def _run(spec_text: str, evaluate: Any, proposals: int) -> list[str]:
    opt = AxOptimizer(parse_spec(spec_text))
    methods = []
    for _ in range(proposals):
        (c,) = opt.generate(1)
        opt.complete(c.index, evaluate(c.parameters))
        methods.append(c.method)
    return methods


def test_real_runs_leave_ax_and_botorch_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    from nasctl.optimizer.acquisition import HypervolumeImprovement

    built: list[str] = []
    init = HypervolumeImprovement.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:  # nasctl's own class: may be wrapped
        built.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(HypervolumeImprovement, "__init__", counting)
    methods = _run(CONTINUOUS, _continuous, 9) + _run(CATEGORICAL, _categorical, 8)
    assert methods.count("MBM") >= 6, methods
    # the runs went through nasctl's subclass (so the check below covers a real run's path) ...
    assert len(built) >= 6 and issubclass(HypervolumeImprovement, qLogNoisyExpectedHypervolumeImprovement)
    # ... and left nothing of nasctl in the four libraries
    assert patched_attributes() == []


def test_the_check_finds_a_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk above can fail: a module function and a class method pointed at
    nasctl code are both reported."""
    from botorch.acquisition.multi_objective import utils
    from botorch.acquisition.multi_objective.logei import qLogExpectedHypervolumeImprovement

    from nasctl.optimizer import nondominated, singleq

    monkeypatch.setattr(utils, "is_non_dominated", nondominated.is_non_dominated)
    monkeypatch.setattr(qLogExpectedHypervolumeImprovement, "_compute_log_qehvi", singleq.compute_log_qehvi)
    found = patched_attributes()
    assert "botorch.acquisition.multi_objective.utils.is_non_dominated" in found
    assert ("botorch.acquisition.multi_objective.logei.qLogExpectedHypervolumeImprovement._compute_log_qehvi"
            in found)


def test_no_assignment_to_library_attributes_in_the_source() -> None:
    """No `setattr` or `module.attribute = ...` on an imported library object
    anywhere in the package (the run above covers what ran; this what did not)."""
    pattern = re.compile(r"^\s*(?:setattr\((?:ax|botorch|gpytorch|linear_operator|logei|utils)\b"
                         r"|(?:logei|utils|module|cls|Acquisition|TorchAdapter)\.\w+\s*=[^=])")
    offenders = []
    for path in Path(NASCTL_DIR).rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(NASCTL_DIR)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_version_guard_names_found_and_wanted() -> None:
    from nasctl.optimizer import SUPPORTED, check_versions

    check_versions(dict(SUPPORTED))  # the supported versions pass
    with pytest.raises(UnsupportedVersionError) as info:
        check_versions({"ax-platform": "1.4.0", "botorch": SUPPORTED["botorch"]})
    message = str(info.value)
    assert isinstance(info.value, NasctlError) and "\n" not in message
    assert "ax-platform 1.4.0" in message and f"ax-platform=={SUPPORTED['ax-platform']}" in message
    assert "botorch" not in info.value.message  # only what is wrong
    with pytest.raises(UnsupportedVersionError, match="botorch not installed"):
        check_versions({"ax-platform": SUPPORTED["ax-platform"], "botorch": None})


def test_the_guard_and_the_pins_agree() -> None:
    """pyproject.toml pins the same Ax and BoTorch releases as `SUPPORTED`."""
    from nasctl.optimizer import SUPPORTED

    pyproject = (Path(NASCTL_DIR).parent / "pyproject.toml").read_text()
    for dist, version in SUPPORTED.items():
        assert f'"{dist}=={version}"' in pyproject


def test_an_unsupported_version_stops_the_import() -> None:
    """Importing nasctl.optimizer with another BoTorch release fails with the one-line error."""
    import subprocess

    code = (
        "import importlib.metadata as md\n"
        "real = md.version\n"
        "md.version = lambda d: '0.99.0' if d == 'botorch' else real(d)\n"
        "import nasctl.optimizer\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(Path(NASCTL_DIR).parent))
    assert proc.returncode != 0
    assert "UnsupportedVersionError: nasctl's optimizer supports botorch==" in proc.stderr
    assert "found botorch 0.99.0" in proc.stderr


def test_module_docs_name_no_install_hooks() -> None:
    """The speed-up modules expose functions and classes, no `install()`."""
    from nasctl.optimizer import boxdecomp, jointpost, logscale, nondominated, singleq

    for module in (boxdecomp, jointpost, logscale, nondominated, singleq):
        assert not hasattr(module, "install") and not hasattr(module, "uninstall"), module.__name__
        assert inspect.getdoc(module)
