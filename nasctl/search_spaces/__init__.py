"""Built-in search spaces: a model family plus the trainer that runs one trial.

Each entry names the module run as `python -m MODULE` for a trial, the
parameters its trainer accepts and the metrics it logs, so a spec can be
checked before anything is launched. The registry is name -> entry, and the
trainer modules are imported only inside trial processes.
"""

from __future__ import annotations

from dataclasses import dataclass

from nasctl.errors import SpecError


@dataclass(frozen=True)
class BuiltinSearchSpace:
    name: str
    module: str
    parameters: frozenset[str]
    metrics: tuple[str, ...]
    description: str


BUILTIN_SEARCH_SPACES: dict[str, BuiltinSearchSpace] = {
    "mlp_digits": BuiltinSearchSpace(
        name="mlp_digits",
        module="nasctl.search_spaces.mlp",
        parameters=frozenset(
            {
                "hidden_size_1",
                "hidden_size_2",
                "learning_rate",
                "dropout",
                "batch_size",
                "epochs",
                "activation",
                "weight_decay",
                "seed",
                "latency_batch_size",
                "latency_repeats",
            }
        ),
        metrics=("val_acc", "val_loss", "train_loss", "num_params", "model_bytes", "latency_ms"),
        description="two-hidden-layer MLP on scikit-learn's 8x8 digits (1,797 images), trained with Lightning",
    ),
}


def get_search_space(name: str) -> BuiltinSearchSpace:
    try:
        return BUILTIN_SEARCH_SPACES[name]
    except KeyError:
        raise SpecError(
            f"trial.search_space {name!r} is not a built-in search space",
            f"use one of: {', '.join(sorted(BUILTIN_SEARCH_SPACES))}, or set trial.script",
        ) from None
