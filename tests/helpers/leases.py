"""Lease owners for lease tests."""

from __future__ import annotations

import socket
import subprocess
import sys

import psutil


def dead_owner() -> str:
    """The owner text of a process of this host that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(proc.pid).create_time()
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:{started:.3f}"
