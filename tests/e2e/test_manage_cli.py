"""`nasctl rename` and `nasctl rm` on real experiments run by `nasctl run`: a renamed
experiment resumes to the end after a crash, a removed one leaves nothing behind,
and bad input or a driven experiment is refused with one line and exit code 2."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from nasctl.leases import owner_id
from nasctl.store import Store
from nasctl.store import manage as store_manage
from tests.conftest import ROOT, run_cli
from tests.helpers.cli import one_line_error
from tests.helpers.synthetic import TINY_SCRIPT, TINY_SPEC, add_synthetic

pytestmark = pytest.mark.e2e


def _env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC.format(script=TINY_SCRIPT))
    return spec


def test_a_crashed_experiment_is_stopped_renamed_and_resumed_to_the_end(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    runs = tmp_path / "runs"
    crashed = run_cli("run", str(_spec(tmp_path)), "--db", db, "--workdir", str(runs), "--max-trials", "5",
                      "--parallelism", "1", "--json", cwd=tmp_path,
                      env={**_env(), "NASCTL_FAILPOINTS": "after_finish_trial:2"})
    assert crashed.returncode != 0  # killed itself after the 2nd finished trial
    before = {t["index"]: t for t in json.loads(run_cli("trials", "tiny", "--db", db, "--json").stdout)}
    assert sum(t["status"] == "COMPLETED" for t in before.values()) >= 2

    # still marked RUNNING: refused until stopped
    err = one_line_error(run_cli("rename", "tiny", "tiny-v1", "--db", db))
    assert "is running" in err and "stop it first with `nasctl stop tiny`" in err
    assert run_cli("stop", "tiny", "--db", db).returncode == 0

    store = Store(db)
    store_manage.set_note(store, store.get_experiment("tiny").id, "first try, lr too high")
    store_manage.set_note(store, store.get_experiment("tiny").id, "kept trial", trial_index=0)
    assert "not a valid experiment name" in one_line_error(run_cli("rename", "tiny", "tiny v1", "--db", db))
    assert "no experiment named 'nope'" in one_line_error(run_cli("rename", "nope", "tiny-v1", "--db", db))
    ok = run_cli("rename", "tiny", "tiny-v1", "--db", db, "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"experiment": "tiny-v1", "old_name": "tiny", "work_dir": str(runs / "tiny")}
    assert one_line_error(run_cli("status", "tiny", "--db", db)).startswith("Error: no experiment named 'tiny'")

    resumed = run_cli("resume", "tiny-v1", "--db", db, "--json", cwd=tmp_path, env=_env())
    assert resumed.returncode == 0, resumed.stderr
    after = {t["index"]: t for t in json.loads(run_cli("trials", "tiny-v1", "--db", db, "--json").stdout)}
    assert sorted(after) == [0, 1, 2, 3, 4] and all(t["status"] in ("COMPLETED", "FAILED") for t in after.values())
    for i, t in before.items():
        if t["status"] == "COMPLETED":
            assert after[i]["values"] == t["values"]
    assert all(Path(t["log_dir"]).is_relative_to(runs / "tiny") for t in after.values())  # the files stayed
    assert after[0]["note"] == "kept trial" and after[1]["note"] is None
    exported = json.loads(run_cli("export", "tiny-v1", "--db", db).stdout)
    assert exported["experiment"]["note"] == "first try, lr too high" and exported["trials"][0]["note"] == "kept trial"
    assert run_cli("export", "tiny-v1", "--db", db, "--format", "csv").stdout.splitlines()[0].endswith(",note")

    # a new experiment under the old name must not write into the renamed one's folder
    err = one_line_error(run_cli("run", str(_spec(tmp_path)), "--db", db, "--workdir", str(runs), cwd=tmp_path,
                                 env=_env()))
    assert "belongs to experiment 'tiny-v1'" in err and "--workdir" in err


def test_rm_removes_rows_and_files_after_confirmation(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    runs = tmp_path / "runs"
    done = run_cli("run", str(_spec(tmp_path)), "--db", db, "--workdir", str(runs), "--max-trials", "3", "--json",
                   cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    assert (runs / "tiny" / "trials").is_dir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    (runs / "tiny" / "shortcut").symlink_to(outside)

    assert "no experiment named 'nope'" in one_line_error(run_cli("rm", "nope", "--yes", "--db", db))
    err = one_line_error(run_cli("rm", "tiny", "--db", db))  # no terminal to confirm on
    assert "pass --yes" in err
    code, out = _in_terminal(["rm", "tiny", "--files", "--db", db], answer="n")
    assert code == 1 and "Remove experiment tiny (completed, 3 trials) and the folder" in out
    assert json.loads(run_cli("ls", "--db", db, "--json").stdout)[0]["name"] == "tiny"
    code, out = _in_terminal(["rm", "tiny", "--files", "--db", db], answer="y")
    assert code == 0 and "removed tiny: 3 trials" in out
    assert json.loads(run_cli("ls", "--db", db, "--json").stdout) == []
    assert not (runs / "tiny").exists() and (outside / "precious.txt").read_text() == "keep"


def test_rm_and_rename_refuse_a_driven_experiment(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(db, create=True)
    exp = add_synthetic(store, "live", 3)
    store.acquire_lease(exp.id, owner_id(), stale_after=60)  # this test process drives it
    for args in (["rm", "live", "--yes"], ["rm", "live", "--files", "--yes"], ["rename", "live", "other"]):
        err = one_line_error(run_cli(*args, "--db", db))
        assert "it cannot be" in err and "stop it first with `nasctl stop live`" in err
    assert len(store.list_trials(exp.id)) == 3


def _in_terminal(args: list[str], answer: str) -> tuple[int, str]:
    """Run nasctl with a terminal as its stdin and stderr, answer its prompt, return (exit code, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "nasctl", *args], stdin=slave, stdout=subprocess.PIPE,
                            stderr=slave, env={**os.environ, **_env()}, text=True)
    os.close(slave)
    seen = b""
    while b"[y/N]" not in seen:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, f"no prompt: {seen!r}"
        seen += os.read(master, 4096)
    os.write(master, (answer + "\n").encode())
    out, _ = proc.communicate(timeout=60)
    try:
        while select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 4096)
    except OSError:
        pass
    os.close(master)
    return proc.returncode, seen.decode(errors="replace") + out
