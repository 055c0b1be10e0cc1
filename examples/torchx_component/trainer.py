"""A TorchX component that trains one digits MLP: what `torchx run` would run,
used by nasctl as the trial (see ../torchx_component.yaml)."""

import torchx.specs as specs
from torchx.components import utils


def trainer(
    hidden_size_1: int,
    hidden_size_2: int,
    learning_rate: float,
    dropout: float,
    epochs: int,
    log_dir: str,
    trial_index: int,
) -> specs.AppDef:
    """Train nasctl's digits MLP once and log its metrics to TensorBoard.

    Args:
        hidden_size_1: width of the first hidden layer
        hidden_size_2: width of the second hidden layer
        learning_rate: Adam learning rate
        dropout: dropout after each hidden layer
        epochs: training epochs
        log_dir: TensorBoard directory (nasctl passes the trial's)
        trial_index: the trial's index (nasctl passes it)
    """
    return utils.python(
        "--hidden_size_1", str(hidden_size_1),
        "--hidden_size_2", str(hidden_size_2),
        "--learning_rate", repr(learning_rate),
        "--dropout", repr(dropout),
        "--epochs", str(epochs),
        "--log_dir", log_dir,
        m="nasctl.search_spaces.mlp",
        name=f"digits-mlp-{trial_index}",
        cpu=1,
        memMB=2000,
    )
