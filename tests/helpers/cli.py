"""The real `nasctl` entry point in a subprocess: started in the background, and its one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

EXAMPLE = str(ROOT / "examples" / "digits_mlp.yaml")


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """`nasctl <args>` started in the background, `env` added to this process's environment."""
    return subprocess.Popen([sys.executable, "-m", "nasctl", *args], cwd=cwd, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The error `proc` printed, after checking that it exited with `code` and printed
    exactly one line on stderr, starting with "Error:", without a traceback and not an
    internal error."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert err.startswith("Error:"), err
    assert "\n" not in err and "Traceback" not in err and "internal error" not in err, err
    return err
