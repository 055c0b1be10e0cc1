"""What a user reads after a real run: trial logs that hold the trial's own
lines (no warnings about how nasctl launched it, no Lightning adverts or
deprecations), and progress lines that name each trial's own method."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.orchestration.progress import describe_proposal
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e

# Lines nasctl's own launching or the built-in trainer used to put in every trial log.
NOISE = (
    "found in sys.modules",            # runpy, when a warm trial's module was preloaded
    "Tip:", "litlogger",               # Lightning's advert
    "GPU available:", "TPU available:",  # Lightning's accelerator report
    "`srun` command is available",     # Lightning, on a host with Slurm installed
    "is deprecated",                   # torch's pytree deprecation, triggered by Lightning
    "`Trainer.fit` stopped",
)
PROPOSED = re.compile(r"^proposed (.+) in \d+\.\ds$")
GROUP = re.compile(r"trials? ([\d, ]+) with (\w+)")


def test_trial_logs_are_quiet_and_progress_names_each_trials_method(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (ROOT / "examples" / "digits_mlp.yaml").read_text()
        .replace("epochs:        {type: int, low: 1, high: 4}", "epochs:        {type: fixed, value: 1}")
        .replace("initial_trials: 8", "initial_trials: 2")
    )
    db = f"sqlite:///{tmp_path}/nas.db"
    proc = run_cli("run", str(spec), "--name", "quiet", "--max-trials", "4", "--db", db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    trials = json.loads(run_cli("trials", "quiet", "--db", db, "--json").stdout)
    method = {t["index"]: t["generation_method"] for t in trials}
    assert method[0] == "CenterOfSearchSpace" and method[1] == "Sobol"  # one proposal, two methods

    named: dict[int, str] = {}
    out = proc.stdout + proc.stderr  # progress lines go to stderr when not on a terminal
    for line in out.splitlines():
        m = PROPOSED.match(line.strip())
        if m:
            for indices, meth in GROUP.findall(m.group(1)):
                for i in indices.split(","):
                    named[int(i)] = meth
    assert named == method, out
    assert "proposed trial 0 with CenterOfSearchSpace and trial 1 with Sobol" in out

    logs = {t["index"]: sorted((Path(t["log_dir"]) / "job").rglob("std*.log")) for t in trials}
    for index, files in logs.items():
        assert files, f"trial {index} left no stdout/stderr files"
        text = "".join(f.read_text() for f in files)
        assert "final step" in text  # the trainer's own line is there
        for noise in NOISE:
            assert noise not in text, f"trial {index}: {noise!r} in\n{text}"


def test_a_proposal_line_groups_trials_by_their_method() -> None:
    c = [Candidate(4, {}, "Sobol"), Candidate(5, {}, "Sobol"), Candidate(6, {}, "MBM"), Candidate(7, {}, "Sobol")]
    assert describe_proposal(c, 1.26) == "proposed trials 4, 5 with Sobol and trial 6 with MBM and trial 7 with Sobol in 1.3s"
    assert describe_proposal(c[2:3], 0.04) == "proposed trial 6 with MBM in 0.0s"
