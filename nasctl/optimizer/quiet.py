"""Ax and BoTorch kept off the user's terminal while nasctl calls them, and only then.

Ax logs at INFO to a stderr handler of its own (every trial it marks
completed, its storage module while it is imported), and BoTorch, GPyTorch
and linear_operator warn about what Ax handles itself (an optimisation
restarted from new initial conditions, a numerical jitter added). None of it
is for a nasctl user. Logging levels, `logging.disable` and the warning
filters are process-wide, though, and a process that runs nasctl may use
these libraries for its own work (the dashboard, a notebook, an in-process
trial), so nothing here outlives the call it is made for:

- `library_calls()`, around every call into the libraries: their loggers log
  WARNING and above only (those that exist when a block opens: a block opened
  inside another also covers the loggers of modules imported since), and
  their warnings are ignored; the previous levels and warning filters are put
  back when the last such block in the process ends (nested and concurrent
  blocks share one setting, counted under a lock).
- `first_import(module)`, around the first import of an Ax module:
  `logging.disable(INFO)` (Ax logs while its loggers are still being made, so
  no level can be set on them beforehand), put back to the previous value
  right after the import. Later imports of the module change nothing.

Python 3.11's warning filters are one list per process: `warnings.catch_warnings`
saves and puts back that list, so a filter another thread adds while a block
is open is dropped when it ends, as with any use of `catch_warnings`.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

LIBRARIES = ("ax", "botorch", "gpytorch", "linear_operator")
"""Logger and module name prefixes of the libraries kept quiet."""

_P = ParamSpec("_P")
_R = TypeVar("_R")

_lock = threading.Lock()
_depth = 0  # open `library_calls` blocks, in every thread
_levels: dict[str, int] = {}  # logger -> its level before the outermost block
_filters: warnings.catch_warnings | None = None


def _library_loggers() -> list[logging.Logger]:
    return [
        logger
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and name.startswith(LIBRARIES)
    ]


def _set_levels(changes: list[tuple[logging.Logger, int]]) -> None:
    """Set the levels of many loggers, clearing logging's cached levels once.
    `Logger.setLevel` clears the cache of every logger in the process on each call,
    and a block sets and puts back the levels of the library loggers: with the 315
    loggers of a process that has built an optimizer, a block took 2.3-2.6 ms of
    CPU, and 0.13 ms this way (benchmarks/quiet_cost.py). Each
    level is set as `setLevel` sets it, and the last change's `setLevel` clears the
    caches after all of them."""
    if not changes:
        return
    for logger, level in changes[:-1]:
        logger.level = level
    last, level = changes[-1]
    last.setLevel(level)


def _open() -> None:
    global _depth, _filters
    with _lock:
        _depth += 1
        # every block looks again: an import inside an open block makes new loggers
        changes = []
        for logger in _library_loggers():
            if logger.level < logging.WARNING and logger.name not in _levels:
                _levels[logger.name] = logger.level
                changes.append((logger, logging.WARNING))
        _set_levels(changes)
        if _depth > 1:
            return
        _filters = warnings.catch_warnings()
        _filters.__enter__()
        for module in LIBRARIES:
            warnings.filterwarnings("ignore", module=module)


def _close() -> None:
    global _depth, _filters
    with _lock:
        _depth -= 1
        if _depth > 0:
            return
        if _filters is not None:
            _filters.__exit__(None, None, None)
            _filters = None
        _set_levels([(logging.getLogger(name), level) for name, level in _levels.items()])
        _levels.clear()


@contextmanager
def library_calls() -> Iterator[None]:
    """Ax, BoTorch, GPyTorch and linear_operator quiet inside the block (see the module docstring)."""
    _open()
    try:
        yield
    finally:
        _close()


def quietly(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """`method` run inside `library_calls()`."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with library_calls():
            return method(*args, **kwargs)

    return wrapper


@contextmanager
def first_import(module: str) -> Iterator[None]:
    """No logging at INFO or below while `module` is imported for the first time
    (nothing changes when it was imported before); the previous
    `logging.disable` level afterwards."""
    if module in sys.modules:
        yield
        return
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.INFO))
    try:
        yield
    finally:
        logging.disable(previous)
