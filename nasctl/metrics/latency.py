"""Cost measurements of a trained model: size and inference latency."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LatencyResult:
    median_ms: float
    p90_ms: float
    repeats: int
    batch_size: int
    threads: int
    device: str


def count_parameters(model: Any) -> int:
    """Trainable parameters."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def model_bytes(model: Any) -> int:
    """Bytes of parameters and buffers as stored."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return int(params + buffers)


def measure_latency(
    model: Any, example: Any, *, warmup: int = 10, repeats: int = 50, threads: int = 1
) -> LatencyResult:
    """Inference latency of `model(example)`: eval mode, `torch.inference_mode`,
    `warmup` discarded runs, then the median of `repeats` timed runs with the
    torch intra-op thread count fixed to `threads` (restored afterwards). On
    CUDA each run is synchronised before the clock is read."""
    import torch

    was_training = model.training
    model.eval()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    device = example.device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    try:
        with torch.inference_mode():
            for _ in range(warmup):
                model(example)
            sync()
            for _ in range(repeats):
                t0 = time.perf_counter()
                model(example)
                sync()
                times.append((time.perf_counter() - t0) * 1000.0)
    finally:
        torch.set_num_threads(old_threads)
        model.train(was_training)
    times.sort()
    return LatencyResult(
        median_ms=statistics.median(times),
        p90_ms=times[min(len(times) - 1, int(0.9 * len(times)))],
        repeats=repeats,
        batch_size=int(example.shape[0]),
        threads=threads,
        device=str(device),
    )
