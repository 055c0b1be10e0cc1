"""Cost metrics: exact FLOP counts, precision inside the latency measurement,
and the block medians that keep a burst of other work out of the latency."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn as nn

from nasctl.metrics.latency import (
    autocast_context,
    count_mflops,
    count_parameters,
    measure_latency,
    model_bytes,
)


def test_mflops_equal_a_hand_count() -> None:
    # conv: 2 * Cout * H * W * Cin * k * k; linear: 2 * in * out (bias, ReLU, pooling not counted)
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(36, 10))
    assert count_mflops(m, torch.zeros(1, 1, 8, 8)) * 1e6 == 2 * 4 * 6 * 6 * 1 * 3 * 3 + 2 * 36 * 10
    m1 = nn.Sequential(nn.Conv1d(2, 3, 5, padding="same"), nn.Flatten(), nn.Linear(3 * 40, 10))
    assert count_mflops(m1, torch.zeros(1, 2, 40)) * 1e6 == 2 * 3 * 40 * 2 * 5 + 2 * 120 * 10
    assert m.training  # restored


def test_size_metrics() -> None:
    m = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.Linear(32, 10))
    m[2].weight.requires_grad_(False)
    assert count_parameters(m) == 64 * 32 + 32 + 32 + 32 + 10
    # every parameter and buffer (BatchNorm's running stats and counter) as stored
    assert model_bytes(m) == 4 * (64 * 32 + 32 + 64 + 320 + 10 + 64) + 8


class _Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.seen: list[tuple[bool, torch.dtype, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(x)
        self.seen.append((torch.is_autocast_enabled("cpu"), out.dtype, torch.is_inference_mode_enabled()))
        return out


@pytest.mark.parametrize("precision,dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_latency_runs_in_the_chosen_precision(precision: str, dtype: torch.dtype) -> None:
    m = _Recorder()
    res = measure_latency(m, torch.zeros(3, 8), warmup=2, repeats=5, precision=precision)
    assert len(m.seen) == 7
    assert all(s == (precision == "bf16", dtype, True) for s in m.seen)
    assert res.precision == precision and res.batch_size == 3 and res.repeats == 5 and res.median_ms > 0
    assert m.training and m.fc.weight.dtype == torch.float32  # weights stay fp32, mode restored


def test_latency_blocks_and_minimum_window() -> None:
    m = nn.Linear(8, 4)
    res = measure_latency(m, torch.zeros(1, 8), warmup=0, repeats=10, min_seconds=0.05, blocks=5)
    assert res.repeats > 10 and res.blocks == 5  # kept timing for 0.05 s
    assert res.min_ms <= res.median_ms <= res.overall_median_ms * 5


def test_fp16_is_refused_off_cuda() -> None:
    with pytest.raises(ValueError, match="bf16"):
        autocast_context("fp16", "cpu")


class _Burst(nn.Module):
    """Sleeps `slow_s` per call for its first `slow_calls` calls (a burst of
    other work on the machine), then `fast_s`."""

    def __init__(self, slow_calls: int, slow_s: float = 0.02, fast_s: float = 0.002) -> None:
        super().__init__()
        self.calls, self.slow_calls, self.slow_s, self.fast_s = 0, slow_calls, slow_s, fast_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        time.sleep(self.slow_s if self.calls <= self.slow_calls else self.fast_s)
        return x


def test_a_burst_of_other_work_stays_out_of_the_latency() -> None:
    """The method behind the repeatability figures of docs/builtin-trainer.md: a
    burst that slows the first 3 of 5 blocks moves the plain median but not the
    lowest block median. (Cross-process agreement itself is a timing figure,
    measured by benchmarks/latency_repeatability.py.)"""
    res = measure_latency(_Burst(slow_calls=30), torch.zeros(1, 8), warmup=0, repeats=50, blocks=5)
    assert res.repeats == 50 and res.blocks == 5
    assert res.overall_median_ms >= 20.0  # the plain median is the burst's
    assert res.median_ms < 10.0  # the lowest block median is the quiet blocks' 2 ms sleep
