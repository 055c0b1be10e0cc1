"""Cost measurements of a model: size, FLOPs and inference latency.

These depend only on the architecture (and the precision and device it runs
in), so the built-in trainer measures them once, before training, and logs
them at step 0 and again at the final step.

Method (what the README states, with the measured repeatability):

- `latency_ms`: eval mode, `torch.inference_mode`, autocast in the chosen
  precision around the forward pass, `warmup` discarded runs, then at least
  `repeats` timed runs of one forward pass at a fixed batch size, spread over
  at least `min_seconds` (a few milliseconds of timing reflect the load of
  that one moment; a longer window is more repeatable) and cut, in order, into
  `blocks` blocks: the value is the lowest block median. The torch intra-op
  thread count is fixed (restored afterwards). On CUDA every run is timed
  with CUDA events (the device's clock), not a host clock around a synchronize.
- `num_params`: trainable parameters. `model_bytes`: parameters and buffers as
  stored (weights stay fp32 whatever the precision).
- `mflops`: floating-point operations of one forward pass of ONE sample
  (batch size 1), in millions, as counted by `torch.utils.flop_counter.FlopCounterMode`:
  a multiply-add counts 2; matmuls and convolutions are counted, element-wise
  ops (activations, pooling, bias adds) are not.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

PRECISIONS = ("fp32", "bf16", "fp16")
MAX_TIMED_RUNS = 100_000


@dataclass(frozen=True)
class LatencyResult:
    median_ms: float
    p90_ms: float
    repeats: int
    batch_size: int
    threads: int
    device: str
    precision: str = "fp32"
    warmup: int = 10
    min_ms: float = 0.0
    blocks: int = 1
    overall_median_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def count_parameters(model: Any) -> int:
    """Trainable parameters."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def model_bytes(model: Any) -> int:
    """Bytes of parameters and buffers as stored."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return int(params + buffers)


def autocast_context(precision: str, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """The autocast region for `precision` ("fp32" means none). Autocast casts
    per op (matmuls and convolutions run in the low precision, reductions and
    losses stay fp32); the weights themselves stay fp32.

    Raises:
        ValueError: an unknown precision, or fp16 on a device other than CUDA.
    """
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
    if precision == "fp16":
        if device_type != "cuda":
            raise ValueError("fp16 autocast needs a CUDA device; use bf16 on CPU")
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")


def count_mflops(model: Any, sample: Any) -> float:
    """Millions of FLOPs of one forward pass of `sample` (pass a batch of one for
    the per-sample figure), counted by torch's FlopCounterMode in eval mode."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    try:
        counter = FlopCounterMode(display=False)
        with torch.inference_mode(), counter:
            model(sample)
    finally:
        model.train(was_training)
    return counter.get_total_flops() / 1e6


def measure_latency(
    model: Any,
    example: Any,
    *,
    warmup: int = 10,
    repeats: int = 50,
    threads: int = 1,
    precision: str = "fp32",
    min_seconds: float = 0.0,
    blocks: int = 1,
) -> LatencyResult:
    """Inference latency of `model(example)` in milliseconds: eval mode,
    `torch.inference_mode`, autocast for `precision`, `warmup` discarded runs,
    then at least `repeats` timed runs, continuing until `min_seconds` of timing
    have passed (up to MAX_TIMED_RUNS runs), with the torch intra-op thread
    count fixed to `threads` (restored afterwards). On CUDA each run is timed
    with CUDA events on the device's own clock. The model's train/eval mode is restored.

    The timed runs are cut, in order, into `blocks` equal blocks; `median_ms` is
    the lowest block median. With one block it is the plain median. Several
    blocks keep a burst of other work on the machine, which inflates the
    runs of one block, out of the result."""
    import torch

    was_training = model.training
    model.eval()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    device = example.device
    on_cuda = device.type == "cuda"

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize()

    times: list[float] = []
    need = max(repeats, blocks)
    try:
        with torch.inference_mode(), autocast_context(precision, device.type):
            for _ in range(warmup):
                model(example)
            sync()
            start = time.perf_counter()
            while len(times) < need or (time.perf_counter() - start < min_seconds and len(times) < MAX_TIMED_RUNS):
                if on_cuda:
                    # the GPU's own clock around the kernels, not the host's around a synchronize
                    begin = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    begin.record()
                    model(example)
                    end.record()
                    end.synchronize()
                    times.append(float(begin.elapsed_time(end)))
                else:
                    t0 = time.perf_counter()
                    model(example)
                    times.append((time.perf_counter() - t0) * 1000.0)
    finally:
        torch.set_num_threads(old_threads)
        model.train(was_training)
    size = len(times) // blocks
    block_medians = [statistics.median(times[i * size:(i + 1) * size]) for i in range(blocks)]
    ordered = sorted(times)
    return LatencyResult(
        median_ms=min(block_medians),
        p90_ms=ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        repeats=len(times),
        batch_size=int(example.shape[0]),
        threads=threads,
        device=str(device),
        precision=precision,
        warmup=warmup,
        min_ms=ordered[0],
        blocks=blocks,
        overall_median_ms=statistics.median(times),
    )
