"""The quasi-random start without a round trip through Ax's generation strategy.

Ax draws each quasi-random (Sobol) trial by fitting a fresh `RandomAdapter` to
the whole experiment (its data too) and then completes it by validating the
new data against every earlier trial: about 50 ms of CPU per trial on the
development machine, almost all of it pandas, and growing with the trials.
None of it changes which point is drawn: the point is the next element of the
scrambled Sobol sequence of the experiment's seed, mapped through the search
space's transforms, skipped when it repeats an arm the experiment has.

`SobolStart` draws those same points in chunks: Ax's own Sobol adapter (the
generator spec of the strategy's "Sobol" node: same generator, seed,
transforms and rounding) is built once per chunk, with its deduplication off
so that each point's position in the sequence is known, and the skipping of
repeated arms is done here, on arm signatures, in the order Ax would do it.
One chunk costs one adapter fit and one `gen`, whatever its size.

See `AxOptimizer.generate` for when it is used and how the trials reach Ax's
experiment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from nasctl.optimizer import compat

CHUNK = 64
"""Points drawn per adapter fit at most (the fit costs ~10-20 ms, mostly Ax
copying the experiment's optimization config; each point tens of µs)."""

MAX_REJECTED = 10_000
"""Consecutive repeated points after which the space counts as used up (Ax's
`DEFAULT_MAX_RS_DRAWS`); Ax's own strategy then decides what happens."""


class SpaceExhausted(Exception):
    """Every point drawn lately repeated an arm the experiment has."""

SOBOL_NODE = "Sobol"


class SobolStart:
    """The Sobol points of an Ax generation strategy's "Sobol" node, drawn in chunks.

    Args:
        generator_spec: the node's `GeneratorSpec` (its generator and kwargs: seed).
        experiment: the Ax experiment (its search space; the trials are not read).
        position: how many points of the sequence were drawn already.
    """

    def __init__(self, generator_spec: Any, experiment: Any, position: int) -> None:
        self.spec = generator_spec
        self.experiment = experiment
        self.position = position
        self._chunk: deque[dict[str, Any]] = deque()

    def _refill(self, size: int) -> None:
        kwargs = {**self.spec.generator_kwargs, "init_position": self.position, "deduplicate": False}
        adapter = self.spec.generator_enum(experiment=self.experiment, data=None, **kwargs)
        run = adapter.gen(n=size)
        self._chunk.extend(dict(arm.parameters) for arm in run.arms)

    def draw(self, taken: Callable[[dict[str, Any]], bool], chunk: int = CHUNK) -> tuple[dict[str, Any], int]:
        """The next point of the sequence that `taken` does not reject, and the
        sequence position after it (Ax's `init_position` for the next draw).
        `chunk`: how many points to draw when it must draw (the points still
        wanted: points drawn beyond them are never used).

        Each rejected point uses up its position, as Ax's rejection sampling does.

        Raises:
            SpaceExhausted: `MAX_REJECTED` points in a row were rejected (the
                position is left before them).
        """
        start = self.position
        for _ in range(MAX_REJECTED):
            if not self._chunk:
                self._refill(max(1, min(chunk, CHUNK)))
            params = self._chunk.popleft()
            self.position += 1
            if not taken(params):
                return params, self.position
        self.position = start
        self._chunk.clear()
        raise SpaceExhausted(f"{MAX_REJECTED} quasi-random points in a row repeated earlier trials")


def sobol_generator_spec(generation_strategy: Any) -> Any | None:
    """The generator spec of the strategy's "Sobol" node (None without one)."""
    for node in generation_strategy.nodes_by_name.values():
        if node.name == SOBOL_NODE:
            for gspec in node.generator_specs:
                if gspec.generator_enum.value == SOBOL_NODE:
                    return gspec
    return None


def _last_sobol_run(generation_strategy: Any) -> Any | None:
    """The strategy's latest generator run from its "Sobol" node: Ax fits the
    node's next adapter with the state recorded in it (`init_position`)."""
    for gr in reversed(compat.strategy_generator_runs(generation_strategy)):
        if compat.generation_node_name(gr) == SOBOL_NODE:
            return gr
    return None


def sobol_position(generation_strategy: Any, generator_spec: Any) -> int:
    """Where the strategy's "Sobol" node would go on drawing: the position after
    its latest run, else its `init_position` argument (set on resume), else 0."""
    gr = _last_sobol_run(generation_strategy)
    state = (compat.generator_state_after_gen(gr) or {}) if gr is not None else {}
    if "init_position" in state:
        return int(state["init_position"])
    return int((generator_spec.generator_kwargs or {}).get("init_position", 0))


def set_sobol_position(generation_strategy: Any, position: int) -> None:
    """Make the strategy's "Sobol" node go on from `position` (where `SobolStart`
    stopped): in the state of its latest run where it has one, since Ax prefers
    that to the node's arguments, else in its `init_position` argument."""
    gr = _last_sobol_run(generation_strategy)
    if gr is not None and compat.set_generator_state_after_gen(gr, "init_position", position):
        return
    gspec = sobol_generator_spec(generation_strategy)
    if gspec is not None:
        gspec.generator_kwargs = {**(gspec.generator_kwargs or {}), "init_position": position}


def sobol_trial_limit(generation_strategy: Any) -> int | None:
    """Up to how many trials in the experiment the "Sobol" node surely keeps
    drawing, by its transition criteria: the smallest threshold of those
    `MinTrials` criteria that count every trial (whatever its status, failed
    and abandoned ones at most), since such a criterion cannot be met while
    the experiment has fewer trials than that. None: no limit (a node without
    criteria, e.g. `method: sobol`). 0 where the criteria are of a kind not
    understood here (then nothing is drawn by `SobolStart`)."""
    from ax.generation_strategy.transition_criterion import MinTrials

    node = generation_strategy.nodes_by_name.get(SOBOL_NODE)
    if node is None:
        return 0
    limits = []
    for c in node.transition_criteria:
        if not isinstance(c, MinTrials):
            return 0
        if c.only_in_statuses is None and not c.count_only_trials_with_data:
            limits.append(int(c.threshold))
    if node.transition_criteria and not limits:
        return 0
    return min(limits) if limits else None
