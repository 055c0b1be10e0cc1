"""Reading a trial's job logs without leaving the experiment's directory."""

from __future__ import annotations

import os
from pathlib import Path

from nasctl.errors import BadInputError, NotFoundError

#: The tail is read from at most this many bytes at the end of the file.
MAX_TAIL_BYTES = 256 * 1024


def confined_path(work_dir: str, path: str) -> Path:
    """`path` resolved (symlinks followed), if it lies inside `work_dir`.

    Raises:
        BadInputError: the resolved path is outside the experiment's directory.
    """
    root = Path(os.path.realpath(work_dir))
    resolved = Path(os.path.realpath(os.path.join(root, path)))
    if resolved != root and root not in resolved.parents:
        raise BadInputError(
            f"log {path!r} is outside the experiment's directory {root}",
            "logs are only served from the experiment's work_dir",
        )
    return resolved


def available(work_dir: str, path: object) -> bool:
    """Is `path` a log file that `tail` can serve (a file inside `work_dir`)?"""
    if not isinstance(path, str) or not path:
        return False
    try:
        return confined_path(work_dir, path).is_file()
    except BadInputError:
        return False


def tail(work_dir: str, path: str, lines: int) -> str:
    """The last `lines` lines of a log file under `work_dir` (decoded leniently).

    Raises:
        BadInputError: the file is outside `work_dir`.
        NotFoundError: the file does not exist (yet).
    """
    p = confined_path(work_dir, path)
    if not p.is_file():
        raise NotFoundError(f"log file {p} does not exist", "the job may not have started yet")
    with open(p, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - MAX_TAIL_BYTES))
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
