"""Trial sources: where a trial's code comes from and how it becomes a job.

A spec's `trial:` section names exactly one source by its key: `search_space`
(a built-in model family), `script`, `model` (a user model for the built-in
trainer), `function` or `component` (a TorchX component). Each is one
`TrialSource` subclass (the contract is in `base.py`), registered here by key
as "module:Class" and imported on first use. The spec checks a trial section
with these classes; the orchestration checks that a spec can run and builds
each trial's job with them.

Adding a source: a module in this package with its class, its line in
`TRIAL_SOURCES`, and its key as a field of `nasctl.spec.TrialSpec` (the YAML
shape). The shared suite in tests/unit/test_source_contract.py runs every
registered source.
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
"""Source key (the `trial.<key>` that selects it) -> "module:Class", in the
order the spec's error messages list them."""


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
