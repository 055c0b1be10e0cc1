"""Trial sources: where a trial's code comes from and how it becomes a job.

A spec's `trial:` section names exactly one source by its key: `search_space`
(a built-in model family), `script`, `model` (a user model for the built-in
trainer), `function` or `component` (a TorchX component). How its trials run
is one `TrialSource` subclass (the contract is in `base.py`), registered here
by key as "module:Class" and imported on first use: the orchestration checks
that a spec can run, builds each trial's job and warm-starts it with them.

Adding a source: a module in this package with its class and its line in
`TRIAL_SOURCES`; in nasctl/specfile/trial.py (below this package), its key as a
field of `TrialSpec` and its entry in `SOURCE_KEYS` (what the spec file says:
the value's shape, the options it takes, its paths). The shared suite in
tests/unit/test_source_contract.py runs every registered source and fails
while the two lists differ.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nasctl.sources.base import TrialSource
    from nasctl.spec import TrialSpec

TRIAL_SOURCES: dict[str, str] = {
    "search_space": "nasctl.sources.search_space:SearchSpaceSource",
    "script": "nasctl.sources.script:ScriptSource",
    "model": "nasctl.sources.model:ModelSource",
    "function": "nasctl.sources.function:FunctionSource",
    "component": "nasctl.sources.component:ComponentSource",
}
"""Source key (the `trial.<key>` that selects it) -> "module:Class"; the keys of
`nasctl.spec.SOURCE_KEYS`."""


@functools.cache
def get_source(key: str) -> TrialSource:
    """The source registered under `key` (one shared instance: sources hold no state).

    Raises:
        KeyError: no source has that key (the spec only ever asks for registered keys).
    """
    module, _, name = TRIAL_SOURCES[key].partition(":")
    cls = getattr(importlib.import_module(module), name)
    source: TrialSource = cls()
    return source


def source_of(trial: TrialSpec) -> TrialSource:
    """The source a validated trial section sets."""
    return get_source(trial.source)


__all__ = ["TRIAL_SOURCES", "get_source", "source_of"]
