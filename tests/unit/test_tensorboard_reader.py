"""The incremental TensorBoard reader on real event files written by TensorBoard's writer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from nasctl.errors import MetricsError
from nasctl.metrics import MetricSummary
from nasctl.metrics.tensorboard import TensorBoardReader, event_files, read_scalars
from nasctl.types import Observation


def test_reads_only_what_is_new(tmp_path: Path) -> None:
    w = SummaryWriter(str(tmp_path))
    for i in range(5):
        w.add_scalar("val_acc", i / 10, i)
    w.flush()
    r = TensorBoardReader(tmp_path)
    first = r.read_new()
    assert [(o.metric, o.step) for o in first] == [("val_acc", i) for i in range(5)]
    size_after_first = sum(p.stat().st_size for p in event_files(tmp_path))
    assert r.bytes_read == size_after_first
    assert r.read_new() == []
    assert r.bytes_read == size_after_first  # nothing re-read

    w.add_scalar("val_acc", 0.9, 5)
    w.add_scalar("loss/train", 0.1, 5)
    w.flush()
    new = r.read_new()
    assert [(o.metric, o.step, round(o.value, 4)) for o in new] == [("val_acc", 5, 0.9), ("loss/train", 5, 0.1)]
    size_after_second = sum(p.stat().st_size for p in event_files(tmp_path))
    assert r.bytes_read == size_after_second  # each byte read exactly once
    w.close()


def test_state_round_trip_resumes_at_offset(tmp_path: Path) -> None:
    w = SummaryWriter(str(tmp_path))
    w.add_scalar("m", 1.0, 0)
    w.flush()
    r1 = TensorBoardReader(tmp_path)
    assert len(r1.read_new()) == 1
    w.add_scalar("m", 2.0, 1)
    w.flush()
    r2 = TensorBoardReader(tmp_path, state=r1.state)  # e.g. a restarted orchestrator
    assert [(o.step, o.value) for o in r2.read_new()] == [(1, 2.0)]
    w.close()


def test_partial_record_waits_for_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "src"
    w = SummaryWriter(str(src))
    for i in range(3):
        w.add_scalar("m", float(i), i)
    w.close()
    (f,) = event_files(src)
    data = f.read_bytes()
    dst = tmp_path / "dst"
    dst.mkdir()
    target = dst / f.name
    target.write_bytes(data[:-7])  # the writer is mid-way through the last record
    r = TensorBoardReader(dst)
    assert [o.step for o in r.read_new()] == [0, 1]
    with open(target, "ab") as out:
        out.write(data[-7:])
    assert [o.step for o in r.read_new()] == [2]


def test_corrupt_file_raises_naming_the_file(tmp_path: Path) -> None:
    w = SummaryWriter(str(tmp_path))
    for i in range(3):
        w.add_scalar("m", float(i), i)
    w.close()
    (f,) = event_files(tmp_path)
    data = bytearray(f.read_bytes())
    data[-6] ^= 0xFF  # flip a payload byte of the last record
    f.write_bytes(bytes(data))
    with pytest.raises(MetricsError, match=f"{f.name}.*corrupt at byte"):
        TensorBoardReader(tmp_path).read_new()

    garbage = tmp_path / "g"
    garbage.mkdir()
    (garbage / "events.out.tfevents.1.host").write_bytes(b"this is not a tfrecord file at all")
    with pytest.raises(MetricsError, match="bad record header"):
        read_scalars(garbage)


def test_missing_dir_and_several_files(tmp_path: Path) -> None:
    assert read_scalars(tmp_path / "nope") == []
    for sub in ("a", "b"):
        w = SummaryWriter(str(tmp_path / sub))
        w.add_scalar(f"m_{sub}", 1.0, 0)
        w.close()
    assert sorted(o.metric for o in read_scalars(tmp_path)) == ["m_a", "m_b"]


def test_copy_of_lightning_style_tensor_scalars(tmp_path: Path) -> None:
    # new_style=True writes scalars as tensors with the scalars plugin
    w = SummaryWriter(str(tmp_path))
    w.add_scalar("x", 0.25, 3, new_style=True)
    w.close()
    assert [(o.metric, o.step, o.value) for o in read_scalars(tmp_path)] == [("x", 3, 0.25)]


def test_metric_summary_last_best_nan() -> None:
    s = MetricSummary()
    s.update([Observation("acc", 0, 0.5), Observation("acc", 2, 0.7), Observation("acc", 1, 0.9)])
    assert s.value("acc") == 0.7  # highest step, not latest written
    assert s.value("acc", "best", maximize=True) == 0.9
    assert s.value("acc", "best", maximize=False) == 0.5
    s.update([Observation("acc", 2, 0.8)])  # same step again: later value wins
    assert s.value("acc") == 0.8
    s.update([Observation("loss", 0, math.nan)])
    assert math.isnan(s.value("loss"))  # type: ignore[arg-type]
    assert math.isnan(s.value("loss", "best"))  # type: ignore[arg-type]
    assert s.value("missing") is None
    import json

    clone = MetricSummary(json.loads(json.dumps(s.state, allow_nan=False)))  # strict JSON
    assert clone.value("acc") == 0.8 and math.isnan(clone.value("loss"))  # type: ignore[arg-type]
