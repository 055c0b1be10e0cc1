"""The Lightning trainer every built-in search space (and `trial.model`) uses.

A trial process parses its `--name value` arguments, builds a classifier for
the chosen dataset, and then, following the trial contract:

1. measures the costs, which depend on the architecture only (`num_params`,
   `model_bytes`, `mflops`, `latency_ms`; see nasctl.metrics.latency), and logs
   them at step 0, so they are known while the trial runs;
2. writes `trial_info.json` next to the TensorBoard files (device, precision,
   threads, latency settings, versions, argv, architecture): the orchestrator
   stores it with the trial;
3. trains with Lightning (CUDA when present), logging `train_loss`,
   `val_loss` and `val_acc` per epoch; it continues from the checkpoint
   `NASCTL_RESUME_FROM` names, if that can be read, and keeps
   `NASCTL_CHECKPOINT_DIR/last.ckpt` up to date at every epoch's end and on
   SIGUSR1, SIGUSR2 or SIGTERM (nasctl.search_spaces.checkpoints);
4. logs `val_acc` and the costs again at one common final step, so that step
   holds every objective.

SIGTERM stops training at the next batch's end, after a checkpoint: the trial
then reports no result and ends by SIGTERM, as a process killed outright does.

Data-parallel: started by torch.distributed.run (`runner.cfg.nproc_per_node`,
`trial.resources.nodes`; see nasctl/runners/distributed.py), each process trains
its share with Lightning's DDP (a DistributedSampler each, gloo on CPU, nccl on
CUDA, one device per process by LOCAL_RANK); `batch_size` stays the global batch
(each process takes batch_size / WORLD_SIZE) and validation metrics are averaged
over the ranks. Only rank 0 writes what nasctl reads: TensorBoard files (Lightning's
logger), trial_info.json and the checkpoint; a signal any rank gets makes every
rank save and stop at the same batch.

Precision: `fp32`; `bf16` (autocast to bfloat16, on CPU and CUDA); `fp16`
(autocast to float16 with a gradient scaler, CUDA only). Weights stay fp32.
`channels_last` puts the model and its 4-D inputs in torch.channels_last
(a no-op for 1-D signals and flat inputs).

Bad input (fp16 without CUDA, a missing or corrupt dataset, a user model that
cannot be built) ends the process with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from nasctl.errors import BadInputError, TrialSetupError
from nasctl.metrics import TRIAL_INFO_FILE
from nasctl.metrics.latency import PRECISIONS
from nasctl.search_spaces import TRAINER_METRICS, TRAINER_PARAMETERS  # noqa: F401 - re-exported

if TYPE_CHECKING:
    import torch

    from nasctl.search_spaces.checkpoints import CheckpointCallback, SignalFlags
    from nasctl.search_spaces.data import ArrayDataset

LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}

COST_METRICS = ("num_params", "model_bytes", "mflops", "latency_ms")
LATENCY_BLOCKS = 5  # latency_ms is the lowest of 5 block medians (see nasctl.metrics.latency)


def parse_bool(text: str) -> bool:
    """`True`/`False` as nasctl passes booleans (also 1/0, yes/no)."""
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def add_trainer_arguments(p: argparse.ArgumentParser, *, dataset: str = "digits") -> None:
    """One argument per name in TRAINER_PARAMETERS, plus --log_dir."""
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dataset", default=dataset, help="digits, mnist1d, mnist or idx:/path/to/dir")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--channels_last", type=parse_bool, default=False)
    p.add_argument("--latency_batch_size", type=int, default=1)
    p.add_argument("--latency_repeats", type=int, default=50)
    p.add_argument("--latency_warmup", type=int, default=10)
    p.add_argument("--latency_threads", type=int, default=1)
    p.add_argument("--latency_min_seconds", type=float, default=0.25)
    p.add_argument("--log_dir", default=os.environ.get("NASCTL_LOG_DIR", "tb_logs"))


def check_trainer_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse-style errors (exit 2) for out-of-range trainer arguments."""
    for name in ("batch_size", "epochs", "latency_batch_size", "latency_repeats", "latency_threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.latency_warmup < 0:
        p.error("--latency_warmup must be >= 0")
    if not 0 <= args.latency_min_seconds <= 60:
        p.error("--latency_min_seconds must be in [0, 60]")
    if not args.learning_rate > 0:
        p.error("--learning_rate must be > 0")


def pick_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def world() -> tuple[int, int, int, int]:
    """This process's RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE (torch.distributed.run's
    environment; 0, 0, 1, 1 for a trial run by one process)."""
    env = os.environ
    return (int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), int(env.get("WORLD_SIZE", "1")),
            int(env.get("LOCAL_WORLD_SIZE", "1")))


def own_device(local_rank: int, per_node: int, visible: int) -> tuple[int, bool]:
    """The CUDA device of process `local_rank` of `per_node` on a node with `visible` devices,
    and whether processes share devices: its r-th share of them (the first device of it),
    or, with fewer devices than processes, device r mod `visible`, shared."""
    if visible >= per_node:
        return local_rank * (visible // per_node), False
    return local_rank % visible, True


def parallel_settings(device_type: str) -> dict[str, Any]:
    """The Trainer's devices and strategy: one device for a trial of one process; under
    torch.distributed.run, Lightning's DDP with each process one node of one device (its
    own share of the node's GPUs, or the CPU), nccl between GPUs of their own, gloo on
    CPU or between processes that share a GPU."""
    _, local_rank, size, per_node = world()
    if size <= 1:
        return {"accelerator": device_type, "devices": 1}
    import torch
    from lightning_fabric.plugins.environments.torchelastic import TorchElasticEnvironment
    from pytorch_lightning.strategies import DDPStrategy

    class OneDevicePerProcess(TorchElasticEnvironment):
        """torch.distributed.run's environment, every process taken as a node of one device:
        Lightning then places each on the device chosen here, shared or not."""

        def local_rank(self) -> int:
            return 0

        def node_rank(self) -> int:
            return self.global_rank()

    if device_type == "cuda":
        device, shared = own_device(local_rank, per_node, torch.cuda.device_count())
        return {"accelerator": "cuda", "devices": [device], "num_nodes": size,
                "strategy": DDPStrategy(cluster_environment=OneDevicePerProcess(),
                                        process_group_backend="gloo" if shared else "nccl")}
    return {"accelerator": "cpu", "devices": 1, "num_nodes": size,
            "strategy": DDPStrategy(cluster_environment=OneDevicePerProcess(), process_group_backend="gloo")}


def check_precision(precision: str, device_type: str) -> None:
    """Raises TrialSetupError for fp16 off CUDA (autocast fp16 with a gradient scaler is a CUDA feature)."""
    if precision == "fp16" and device_type != "cuda":
        raise TrialSetupError(
            "--precision fp16 needs a CUDA GPU (fp16 autocast with a gradient scaler); this trial runs on CPU",
            "use --precision bf16 on CPU",
        )


def measure_costs(
    net: torch.nn.Module, data: ArrayDataset, args: argparse.Namespace, device_type: str
) -> tuple[dict[str, float], dict[str, Any]]:
    """The cost metrics of `net` (see nasctl.metrics.latency) and how they were measured."""
    import torch

    from nasctl.metrics.latency import count_mflops, count_parameters, measure_latency, model_bytes

    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    x = torch.from_numpy(data.x_val[: args.latency_batch_size]).to(device_type)
    if x.shape[0] < args.latency_batch_size:  # a tiny validation set: repeat it
        reps = -(-args.latency_batch_size // x.shape[0])
        x = x.repeat(reps, *([1] * (x.dim() - 1)))[: args.latency_batch_size]
    if x.dim() == 4:
        x = x.contiguous(memory_format=fmt)
    net.to(device_type)
    mflops = count_mflops(net, x[:1])
    costs = {"num_params": float(count_parameters(net)), "model_bytes": float(model_bytes(net)), "mflops": mflops}
    if world()[0] != 0:  # a data-parallel trial's costs are rank 0's; timing here too would disturb its timing
        return {**costs, "latency_ms": float("nan")}, {
            "measured_by": "rank 0", "repeats": 0, "batch_size": args.latency_batch_size,
            "threads": args.latency_threads, "device": device_type}
    lat = measure_latency(
        net, x, warmup=args.latency_warmup, repeats=args.latency_repeats,
        threads=args.latency_threads, precision=args.precision, min_seconds=args.latency_min_seconds,
        blocks=LATENCY_BLOCKS,
    )
    return {**costs, "latency_ms": lat.median_ms}, lat.as_dict()


def write_info(log_dir: str, info: dict[str, Any]) -> None:
    """Write trial_info.json atomically (the orchestrator may read it at any time); in a
    data-parallel trial only rank 0 does (the others' would say the same)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, TRIAL_INFO_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1, sort_keys=True, default=str)
    os.replace(tmp, path)


def base_info(args: argparse.Namespace, device_type: str, model_name: str, data: ArrayDataset) -> dict[str, Any]:
    import torch

    device = device_type
    if device_type == "cuda":
        device = f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
    return {
        "model": model_name,
        "dataset": data.name,
        "input_shape": list(data.shape),
        "num_classes": data.num_classes,
        "train_size": int(len(data.y_train)),
        "val_size": int(len(data.y_val)),
        "device": device,
        "world_size": world()[2],  # processes training data-parallel (1: one)
        "precision": args.precision,
        "lightning_precision": LIGHTNING_PRECISION[args.precision],
        "channels_last": bool(args.channels_last),
        "train_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "lightning": importlib.metadata.version("pytorch-lightning"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "cpu": platform.processor() or platform.machine(),
        "argv": sys.argv[1:],
        "mflops_per": "one sample (batch size 1)",
    }


def run_trial(
    args: argparse.Namespace,
    build: Callable[[ArrayDataset], torch.nn.Module],
    model_name: str,
) -> int:
    """Train `build(dataset)` as one trial (see the module docstring).

    Returns:
        The exit code: 0, 2 for bad input, or -SIGTERM for a trial stopped by
        SIGTERM (`exit_process` then ends the process by that signal).
    """
    try:
        return _run(args, build, model_name)
    except BadInputError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2


# Lightning's messages that say nothing about this trial: where it found no
# accelerator, an advert for a hosted logger, the end of `fit` (our own final
# line follows), and two warnings about the environment rather than the run:
# `srun` exists on a Slurm host although the trial is deliberately not a Slurm
# job, and torch deprecates a pytree class that Lightning's own code still uses.
# The third is about a retry that resumes a checkpoint saved mid-epoch (after
# a signal): the rest of that epoch is drawn from a fresh shuffle,
# which is how this trainer resumes (docs/builtin-trainer.md), not a mistake.
LIGHTNING_NOISE = (
    r"The `srun` command is available on your system but is not used",
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"You're resuming from a checkpoint that ended before the epoch ended",
)


def quiet_lightning() -> None:
    """Keep a trial's log to what is about the trial: Lightning's informational
    lines off (its loggers to WARNING, as its docs suggest), the noise above
    filtered. Real warnings and errors still reach stderr. Called in the
    trial's own process only."""
    import logging
    import warnings

    import pytorch_lightning  # noqa: F401 - its import sets its loggers to INFO: set them after it

    for name in ("pytorch_lightning", "lightning_fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in LIGHTNING_NOISE:
        warnings.filterwarnings("ignore", message=message)


def _run(args: argparse.Namespace, build: Callable[[ArrayDataset], torch.nn.Module], model_name: str) -> int:
    device_type = pick_device()
    check_precision(args.precision, device_type)
    _, local_rank, size, per_node = world()
    if size > 1 and device_type == "cuda":  # this process's own device from the start (latency, fit)
        import torch

        torch.cuda.set_device(own_device(local_rank, per_node, torch.cuda.device_count())[0])

    from nasctl.search_spaces.checkpoints import SignalFlags

    # from here on SIGUSR1, SIGUSR2 and SIGTERM only set flags, acted on once training runs
    with SignalFlags().installed() as flags:
        return _train(args, build, model_name, device_type, flags)


def _prepare(args: argparse.Namespace, build: Callable[[ArrayDataset], torch.nn.Module], model_name: str,
             device_type: str) -> tuple[ArrayDataset, torch.nn.Module, dict[str, float], dict[str, Any]]:
    """The dataset, the network, its costs and the trial's info so far (steps 1 and 2 of the contract)."""
    import pytorch_lightning as pl
    import torch

    from nasctl.search_spaces.data import load_dataset

    quiet_lightning()
    pl.seed_everything(args.seed, verbose=False)
    data = load_dataset(args.dataset)
    net = build(data)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)  # type: ignore[call-overload]  # a no-op without 4-D weights

    t0 = time.perf_counter()
    costs, latency = measure_costs(net, data, args, device_type)
    info = base_info(args, device_type, model_name, data)
    info.update(latency=latency, cost_seconds=round(time.perf_counter() - t0, 3), architecture=repr(net)[:4000])
    return data, net, costs, info


def _train(args: argparse.Namespace, build: Callable[[ArrayDataset], torch.nn.Module], model_name: str,
           device_type: str, flags: SignalFlags) -> int:
    import torch
    from pytorch_lightning.loggers import TensorBoardLogger
    from torch.utils.data import TensorDataset

    from nasctl.search_spaces.checkpoints import (
        CheckpointCallback, checkpoint_path, killed_exit_code, resume_point, save_checkpoint,
    )

    data, net, costs, info = _prepare(args, build, model_name, device_type)
    latency = info["latency"]
    resume, why_not = resume_point()
    info.update(resumed_from=resume)
    if why_not:
        print(why_not, file=sys.stderr, flush=True)
        info.update(resume_error=why_not)
    write_info(args.log_dir, info)

    logger = TensorBoardLogger(save_dir=args.log_dir, name="", version="", default_hp_metric=False)
    logger.log_metrics(costs, step=0)

    train = TensorDataset(torch.from_numpy(data.x_train), torch.from_numpy(data.y_train))
    val = TensorDataset(torch.from_numpy(data.x_val), torch.from_numpy(data.y_val))
    model = lightning_classifier(net, args)
    saver = CheckpointCallback(checkpoint_path(), flags)
    t1 = time.perf_counter()
    trainer = fit(model, train, val, args, logger, saver, resume)
    train_seconds = time.perf_counter() - t1
    info.update(train_seconds=round(train_seconds, 3), final_step=trainer.global_step)
    if resume:
        info.update(resumed_at_epoch=saver.start_epoch, resumed_at_step=saver.start_step)
    if saver.stopped:  # by SIGTERM: no result; the checkpoint lets the next attempt go on
        logger.finalize("failed")
        info.update(stopped_by="SIGTERM")
        write_info(args.log_dir, info)
        print(f"stopped by SIGTERM at step {trainer.global_step} (training {train_seconds:.1f}s)", flush=True)
        return killed_exit_code()
    if saver.path is not None:
        save_checkpoint(trainer, saver.path)  # the finished state: what a promotion continues from

    # Lightning's teardown moves the module back to the CPU after fit: evaluate on
    # the device the trial trained on (fp16 autocast exists only there)
    device = torch.device(f"cuda:{torch.cuda.current_device()}" if device_type == "cuda" else "cpu")
    final = {"val_acc": accuracy(model, val, device, args.precision), **costs}
    logger.log_metrics(final, step=trainer.global_step)
    logger.finalize("success")
    if device.type == "cuda":  # what the trial needed of its GPU (training and latency runs)
        info.update(peak_memory_mb=round(torch.cuda.max_memory_allocated(device) / 2**20, 1),
                    visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    write_info(args.log_dir, info)
    print(
        f"final step {trainer.global_step}: "
        + ", ".join(f"{k}={v:.6g}" for k, v in final.items())
        + f" (latency: median of {latency['repeats']} runs, batch {latency['batch_size']}, "
        f"{latency['threads']} thread, {latency['device']}, {args.precision}; training {train_seconds:.1f}s)",
        flush=True,
    )
    return 0


def fit(model: Any, train: Any, val: Any, args: argparse.Namespace, logger: Any, saver: CheckpointCallback,
        resume: str | None) -> Any:
    """Train `model` with Lightning (continuing from checkpoint `resume` if given); returns the Trainer."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    size = world()[2]
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        **parallel_settings(pick_device()),
        precision=LIGHTNING_PRECISION[args.precision],  # type: ignore[arg-type]
        logger=logger,
        callbacks=[saver],
        enable_checkpointing=False,  # Lightning's ModelCheckpoint: `saver` keeps the one checkpoint nasctl reads
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
    )
    trainer.fit(
        model,
        # batch_size is the global batch: each of `world` processes takes its share of it
        # (Lightning gives each a DistributedSampler), so one step sees what one process would
        DataLoader(train, batch_size=max(1, args.batch_size // size), shuffle=True),
        DataLoader(val, batch_size=512),
        ckpt_path=resume,
    )
    return trainer


def lightning_classifier(net: torch.nn.Module, args: argparse.Namespace) -> Any:
    """The LightningModule that trains `net` as a classifier: cross-entropy, Adam with
    the trial's learning rate and weight decay; logs train_loss, val_loss and val_acc."""
    import pytorch_lightning as pl
    import torch
    import torch.nn.functional as F

    def to_input(x: torch.Tensor) -> torch.Tensor:
        return x.contiguous(memory_format=torch.channels_last) if args.channels_last and x.dim() == 4 else x

    class Classifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(to_input(x))  # type: ignore[no-any-return]

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
            x, t = batch
            loss = F.cross_entropy(self(x), t)
            self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
            return loss

        def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
            x, t = batch
            logits = self(x)
            # sync_dist: averaged over the ranks, each of which validates its share
            self.log("val_loss", F.cross_entropy(logits.float(), t), on_epoch=True, sync_dist=True)
            self.log("val_acc", (logits.argmax(-1) == t).float().mean(), on_epoch=True, sync_dist=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)

    return Classifier()


def accuracy(model: torch.nn.Module, val: Any, device: torch.device, precision: str) -> float:
    """`model`'s accuracy on the validation tensors, evaluated on `device` in batches of 1024."""
    import torch

    from nasctl.metrics.latency import autocast_context

    model.to(device).eval()
    correct = 0
    with torch.inference_mode(), autocast_context(precision, device.type):
        for i in range(0, len(val), 1024):
            x = val.tensors[0][i: i + 1024].to(device)
            correct += int((model(x).argmax(-1).cpu() == val.tensors[1][i: i + 1024]).sum())
    return correct / len(val)


def exit_process(code: int) -> NoReturn:
    """End the trial process at once, skipping the interpreter's shutdown.

    With torch and Lightning loaded that shutdown (module teardown, garbage
    collection) took 4-6 s here after training had finished: a quarter of a
    digits trial, during which the worker's slot stays taken. Everything the
    trial leaves behind is complete by then (the TensorBoard logger was
    finalized, which closes its event files); only stdout and stderr need a flush.

    A negative `code` (a trial stopped by SIGTERM, see run_trial) ends the
    process by that signal, as if the signal had killed it outright: how
    runners tell an attempt ended from outside from the trial's own failure.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)
