"""The optimizer leaves the process as it found it: after an optimizer is built and
has proposed (model-based, multi-objective: BoTorch's fused kernel loaded), the
logging switch, the warning filters, `sys.path` and the Ax/BoTorch loggers' levels
are what they were; inside its calls, the libraries are quiet (`optimizer.quiet`)."""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from typing import Any

import pytest

from nasctl.optimizer import quiet
from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.optimizer.diagnostics import loo_cross_validation
from nasctl.spec import parse_spec
from tests.helpers.optimizer import COMPAT_SPEC, compat_outcome

SPEC = COMPAT_SPEC.replace("name: compat", "name: state").replace("seed: 0", "seed: 4")


def _library_levels() -> dict[str, int]:
    return {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and name.startswith(quiet.LIBRARIES)
    }


def _state() -> dict[str, Any]:
    return {
        "disable": logging.root.manager.disable,
        "filters": list(warnings.filters),
        "path": list(sys.path),
    }


@pytest.fixture
def orchestrator_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an orchestrator process sets (TORCH_EXTENSIONS_DIR: the fused kernel is
    built and loaded), put back by monkeypatch afterwards."""
    from nasctl.orchestration.control import prepare_orchestrator_process

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_EXTENSIONS_DIR"):
        monkeypatch.delenv(name, raising=False)
    prepare_orchestrator_process()


def test_building_and_proposing_leave_the_process_as_it_was(orchestrator_env: None) -> None:
    import ax.api  # noqa: F401 - the libraries' loggers exist before, as in a process that used them
    import botorch  # noqa: F401

    logging.getLogger("ax.api.client").setLevel(logging.DEBUG)  # a level the user chose
    try:
        before, levels = _state(), _library_levels()
        opt = AxOptimizer(parse_spec(SPEC))
        assert _state() == before and _library_levels() == levels
        methods = []
        for _ in range(6):
            (c,) = opt.generate(1)
            methods.append(c.method)
            opt.complete(c.index, compat_outcome(c.parameters))
            if c.method == "MBM":
                break
        assert methods[-1] == "MBM", methods
        assert "logei_fused_ext" in sys.modules  # the prebuilt kernel was loaded, without sys.path
        assert _state() == before
        assert {n: v for n, v in _library_levels().items() if n in levels} == levels
        assert logging.getLogger("ax.api.client").level == logging.DEBUG
    finally:
        logging.getLogger("ax.api.client").setLevel(logging.INFO)


def test_diagnostics_leave_the_process_as_it_was() -> None:
    from datetime import datetime

    from nasctl.types import TrialRecord, TrialStatus

    spec = parse_spec(SPEC)
    opt = AxOptimizer(spec)
    trials = []
    for i in range(5):
        (c,) = opt.generate(1)
        trials.append(TrialRecord(id=i, experiment_id=1, index=c.index, parameters=c.parameters,
                                  status=TrialStatus.COMPLETED, generation_method=c.method,
                                  created_at=datetime(2026, 1, 1), values=compat_outcome(c.parameters)))
        opt.complete(c.index, compat_outcome(c.parameters))
    before, levels = _state(), _library_levels()
    result = loo_cross_validation(spec, trials)
    assert result["trials_used"] == 5
    assert _state() == before
    assert {n: v for n, v in _library_levels().items() if n in levels} == levels


def test_library_calls_quiet_the_libraries_and_put_everything_back() -> None:
    made = logging.getLogger("ax.nasctl_test_quiet")
    made.setLevel(logging.INFO)
    child = logging.getLogger("ax.nasctl_test_quiet.child")  # inherits made's level
    assert made.isEnabledFor(logging.INFO) and child.isEnabledFor(logging.INFO)  # now cached
    before = _state()
    with quiet.library_calls():
        assert made.level == logging.WARNING
        # levels are set with one clearing of logging's caches: no cached answer survives
        assert not made.isEnabledFor(logging.INFO) and not child.isEnabledFor(logging.INFO)
        assert any(f[0] == "ignore" and f[3] is not None and f[3].pattern == "botorch" for f in warnings.filters)
        later = logging.getLogger("botorch.nasctl_test_quiet_later")  # made by an import inside the block
        later.setLevel(logging.DEBUG)
        with quiet.library_calls():  # a nested block covers it
            assert later.level == logging.WARNING
        assert made.level == logging.WARNING  # still inside the outer block
    assert made.level == logging.INFO and later.level == logging.DEBUG
    assert made.isEnabledFor(logging.INFO) and child.isEnabledFor(logging.INFO)
    assert _state() == before


def test_concurrent_blocks_restore_once_the_last_one_ends() -> None:
    made = logging.getLogger("gpytorch.nasctl_test_concurrent")
    made.setLevel(logging.INFO)
    before = _state()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with quiet.library_calls():
            inside.set()
            release.wait(10)

    with quiet.library_calls():
        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(10)
    # this thread's block ended first; the other thread's is still open
    assert made.level == logging.WARNING
    release.set()
    t.join(10)
    assert made.level == logging.INFO and _state() == before


def test_first_import_disables_logging_during_the_first_import_only() -> None:
    previous = logging.root.manager.disable
    logging.disable(logging.DEBUG)
    try:
        with quiet.first_import("nasctl_test_never_imported"):
            assert logging.root.manager.disable == logging.INFO
        assert logging.root.manager.disable == logging.DEBUG
        with quiet.first_import("logging"):  # imported already: nothing changes
            assert logging.root.manager.disable == logging.DEBUG
    finally:
        logging.disable(previous)
