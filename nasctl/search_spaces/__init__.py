"""Built-in search spaces: a model family plus the trainer that runs one trial.

Each entry names the module run as `python -m MODULE` for a trial, the
parameters its trainer accepts and the metrics it logs, so a spec can be
checked before anything is launched. The registry is name -> entry, and the
trainer modules are imported only inside trial processes. Every entry trains
with the shared Lightning trainer (`trainer.py`), as do user models
(`trial.model`, run by USER_MODEL_MODULE).
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


# What the shared trainer (trainer.py) consumes and logs, whatever the model.
TRAINER_PARAMETERS = frozenset(
    {
        "learning_rate", "batch_size", "epochs", "weight_decay", "seed", "dataset",
        "precision", "channels_last",
        "latency_batch_size", "latency_repeats", "latency_warmup", "latency_threads", "latency_min_seconds",
    }
)
TRAINER_METRICS = ("val_acc", "val_loss", "train_loss", "num_params", "model_bytes", "mflops", "latency_ms")
USER_MODEL_MODULE = "nasctl.search_spaces.model"
TRAINER_PRELOAD = ("torch", "pytorch_lightning", "torch.utils.tensorboard", "nasctl.search_spaces.trainer",
                   "nasctl.search_spaces.data")
"""What the built-in trainer imports: ~3.5 s of a cold digits trial here. A warm
server imports it once (`trial.preload`, nasctl/runners/warm.py)."""
DATASETS = ("digits", "mnist1d", "mnist")  # plus idx:/path/to/dir

BUILTIN_SEARCH_SPACES: dict[str, BuiltinSearchSpace] = {
    "mlp_digits": BuiltinSearchSpace(
        name="mlp_digits",
        module="nasctl.search_spaces.mlp",
        parameters=TRAINER_PARAMETERS | {"hidden_size_1", "hidden_size_2", "dropout", "activation"},
        metrics=TRAINER_METRICS,
        description="two-hidden-layer MLP, on scikit-learn's 8x8 digits (1,797 images) unless --dataset says otherwise",
    ),
    "cnn": BuiltinSearchSpace(
        name="cnn",
        module="nasctl.search_spaces.cnn",
        parameters=TRAINER_PARAMETERS
        | {"num_blocks", "pooling", "classifier_width", "dropout"}
        | {f"{p}_{k}" for p in ("channels", "kernel_size") for k in range(1, 5)},
        metrics=TRAINER_METRICS,
        description="1-4 conv blocks (Conv1d or Conv2d by the data's shape) + MLP head, on MNIST-1D unless --dataset says otherwise",
    ),
}


def check_dataset(name: str) -> None:
    """Raises SpecError unless `name` is a dataset the built-in trainer knows."""
    if name in DATASETS or (name.startswith("idx:") and len(name) > 4):
        return
    raise SpecError(
        f"trial.dataset {name!r} is not a known dataset",
        f"use one of {', '.join(DATASETS)} or idx:/path/to/dir (MNIST-format IDX files)",
    )


def get_search_space(name: str) -> BuiltinSearchSpace:
    try:
        return BUILTIN_SEARCH_SPACES[name]
    except KeyError:
        raise SpecError(
            f"trial.search_space {name!r} is not a built-in search space",
            f"use one of: {', '.join(sorted(BUILTIN_SEARCH_SPACES))}, or set trial.script",
        ) from None
