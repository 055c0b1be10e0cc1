"""Incremental TensorBoard event-file reader.

An event file is a sequence of TFRecords: an 8-byte little-endian length, its
4-byte masked CRC-32C, the serialized `Event` protobuf, and the data's masked
CRC-32C. `TensorBoardReader` remembers, per file, the byte offset after the
last complete record, so each poll reads only what was appended since the last
one: the cost of a poll depends on what is new, not on the length of the log.
Its state is plain JSON and is stored with the trial, so a restarted
orchestrator continues where the last one stopped.

A record still being written (the file ends inside it) is left for the next
poll. A complete record whose checksum does not match raises `MetricsError`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nasctl.errors import MetricsError
from nasctl.types import Observation

EVENT_FILE_MARKER = "tfevents"
RANKS_DIR = "ranks"
"""The folder under a trial's log dir where the ranks other than 0 of a multi-process
trial log (nasctl/runners/distributed.py): their files are not the trial's metrics."""
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
MAX_RECORD_BYTES = 64 * 1024 * 1024


def _crc() -> Any:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c


def _event_cls() -> Any:
    from tensorboard.compat.proto.event_pb2 import Event

    return Event


def event_files(log_dir: str | os.PathLike[str]) -> list[Path]:
    """Event files anywhere under `log_dir` but in `RANKS_DIR` (other ranks' copies), in a stable order."""
    root = Path(log_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob(f"*{EVENT_FILE_MARKER}*")
                  if p.is_file() and p.relative_to(root).parts[0] != RANKS_DIR)


def _scalars(event: Any) -> Iterable[tuple[str, float]]:
    if not event.HasField("summary"):
        return
    for v in event.summary.value:
        kind = v.WhichOneof("value")
        if kind == "simple_value":
            yield v.tag, float(v.simple_value)
        elif kind == "tensor" and v.metadata.plugin_data.plugin_name in ("scalars", ""):
            t = v.tensor
            if t.float_val:
                yield v.tag, float(t.float_val[0])
            elif t.double_val:
                yield v.tag, float(t.double_val[0])
            elif t.int64_val:
                yield v.tag, float(t.int64_val[0])
            elif t.tensor_content and t.dtype in (1, 2):  # DT_FLOAT, DT_DOUBLE
                fmt = "<f" if t.dtype == 1 else "<d"
                if len(t.tensor_content) == struct.calcsize(fmt):
                    yield v.tag, float(struct.unpack(fmt, t.tensor_content)[0])


class TensorBoardReader:
    """Reads scalar events appended under a log directory since the last call.

    Args:
        log_dir: the trial's TensorBoard directory (searched recursively).
        state: a previous `state` (JSON) to resume from; None starts at the beginning.

    `read_new()` is not idempotent by design: each call returns only new scalars.
    """

    def __init__(self, log_dir: str | os.PathLike[str], state: dict[str, Any] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self._offsets: dict[str, int] = dict((state or {}).get("offsets", {}))
        self.bytes_read = 0

    @property
    def state(self) -> dict[str, Any]:
        return {"offsets": dict(self._offsets)}

    def read_new(self) -> list[Observation]:
        """Scalars logged since the last call, in file order.

        Raises:
            MetricsError: a complete record is corrupt (bad checksum or protobuf).
        """
        out: list[Observation] = []
        for path in event_files(self.log_dir):
            key = str(path.relative_to(self.log_dir))
            offset = self._offsets.get(key, 0)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size <= offset:
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(size - offset)
            self.bytes_read += len(data)
            consumed = self._parse(data, path, offset, out)
            self._offsets[key] = offset + consumed
        return out

    def _parse(self, data: bytes, path: Path, base: int, out: list[Observation]) -> int:
        masked_crc32c = _crc()
        Event = _event_cls()
        pos = 0
        n = len(data)
        while pos + _HEADER.size <= n:
            length, len_crc = _HEADER.unpack_from(data, pos)
            if masked_crc32c(data[pos : pos + 8]) != len_crc or length > MAX_RECORD_BYTES:
                raise MetricsError(
                    f"TensorBoard file {path} is corrupt at byte {base + pos} (bad record header)",
                    "the training script must write event files with a TensorBoard writer; "
                    "delete or move the damaged file",
                )
            end = pos + _HEADER.size + length + _FOOTER.size
            if end > n:
                break  # record still being written
            payload = data[pos + _HEADER.size : pos + _HEADER.size + length]
            (data_crc,) = _FOOTER.unpack_from(data, pos + _HEADER.size + length)
            if masked_crc32c(payload) != data_crc:
                raise MetricsError(
                    f"TensorBoard file {path} is corrupt at byte {base + pos} (checksum mismatch)",
                    "delete or move the damaged file",
                )
            event = Event()
            try:
                event.ParseFromString(payload)
            except Exception as e:  # protobuf's DecodeError has no stable import path
                raise MetricsError(
                    f"TensorBoard file {path} has an unreadable event at byte {base + pos}: {e}",
                    "delete or move the damaged file",
                ) from None
            for tag, value in _scalars(event):
                out.append(Observation(tag, int(event.step), value, float(event.wall_time)))
            pos = end
        return pos


def read_scalars(log_dir: str | os.PathLike[str]) -> list[Observation]:
    """Every scalar under `log_dir` (a one-shot read)."""
    return TensorBoardReader(log_dir).read_new()


def write_scalars(log_dir: str | os.PathLike[str], values: Mapping[str, float], step: int) -> Path:
    """Append `values` as scalar events at `step` to this process's event file in
    `log_dir` (created with its version header on first use), synchronously.

    A light writer for trial entry points that need no torch: each record is
    flushed before returning, so a reader never waits on a background thread.
    Returns the event file's path.
    """
    from tensorboard.compat.proto.summary_pb2 import Summary

    return write_summary(
        log_dir, Summary(value=[Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]), step
    )


def write_summary(log_dir: str | os.PathLike[str], summary: Any, step: int, wall_time: float | None = None) -> Path:
    """Append one `Summary` protobuf (scalars, or plugin data such as the HParams
    plugin's) at `step` to this process's event file in `log_dir`, as
    `write_scalars` does. Returns the event file's path."""
    import socket
    import time

    Event = _event_cls()
    masked_crc32c = _crc()
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"events.out.{EVENT_FILE_MARKER}.{socket.gethostname()}.{os.getpid()}.nasctl"
    now = time.time() if wall_time is None else wall_time
    events = [] if path.exists() else [Event(wall_time=now, file_version="brain.Event:2")]
    events.append(Event(wall_time=now, step=int(step), summary=summary))
    with open(path, "ab") as f:
        for event in events:
            payload = event.SerializeToString()
            header = struct.pack("<Q", len(payload))
            f.write(header + _FOOTER.pack(masked_crc32c(header)) + payload + _FOOTER.pack(masked_crc32c(payload)))
    return path
