"""Bad input through the real `nasctl` entry point: one line, the right exit code, no traceback, no data lost."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine, text

from nasctl.store.migrate import head_revision
from tests.conftest import run_cli
from tests.helpers.cli import EXAMPLE, one_line_error


def test_malformed_spec(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsearch_space: {lr: {type: float, low: 1, high: 0}}\n")
    err = one_line_error(run_cli("run", str(bad), "--db", f"sqlite:///{tmp_path}/n.db", cwd=tmp_path))
    assert "search_space.lr: low (1.0) must be below high (0.0)" in err
    assert err.endswith("(see the spec format in docs/spec.md)")  # the reference, not the README
    assert not (tmp_path / "n.db").exists()  # nothing written for bad input


def test_unknown_scheduler(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(Path(EXAMPLE).read_text().replace("scheduler: local_cwd", "scheduler: local"))
    err = one_line_error(run_cli("run", str(spec), "--dryrun", cwd=tmp_path))
    assert "'local' is not a known scheduler" in err and "local_cwd" in err


def test_builtin_space_rejects_unknown_parameter(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(Path(EXAMPLE).read_text().replace("dropout:", "drop_out:"))
    err = one_line_error(run_cli("run", str(spec), "--dryrun", cwd=tmp_path))
    assert "does not take parameters ['drop_out']" in err


def test_missing_database_and_debug(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/none.db"
    err = one_line_error(run_cli("status", "x", "--db", url))
    assert "no nasctl database at" in err and "nasctl run" in err
    proc = run_cli("--debug", "status", "x", "--db", url)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_bad_urls_and_flags(tmp_path: Path) -> None:
    assert "is not a database URL" in one_line_error(run_cli("ls", "--db", "not a url"))
    assert "no driver" in one_line_error(run_cli("ls", "--db", "oracle+nodriver://x/y"))
    proc = run_cli("run", EXAMPLE, "--bogus-flag")
    assert proc.returncode == 2 and "No such option" in proc.stderr
    proc = run_cli("export", "x", "--format", "xml")
    assert proc.returncode == 2


def test_outdated_database_refused_until_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    assert run_cli("db", "upgrade", "--db", url).returncode == 0
    proc = run_cli("db", "current", "--db", url, "--json")
    info = json.loads(proc.stdout)
    assert info["up_to_date"] is True and info["current"] == info["head"]
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("INSERT INTO experiments (name, spec, status, work_dir, created_at, updated_at) "
                       "VALUES ('kept', '{}', 'COMPLETED', '/tmp', '2026-01-01', '2026-01-01')"))
        c.execute(text("DELETE FROM alembic_version"))  # as if written before revisions were tracked
    err = one_line_error(run_cli("ls", "--db", url))
    assert "no nasctl schema revision" in err
    # upgrade refuses too, and changes nothing
    assert "not created by nasctl" in one_line_error(run_cli("db", "upgrade", "--db", url))
    with engine.begin() as c:
        assert c.execute(text("SELECT name FROM experiments")).scalars().all() == ["kept"]
        c.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": head_revision()})
    proc = run_cli("ls", "--db", url, "--json")
    assert proc.returncode == 0 and [e["name"] for e in json.loads(proc.stdout)] == ["kept"]
    # a database from a newer nasctl is refused with the right fix
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0042_future'"))
    assert "upgrade nasctl" in one_line_error(run_cli("trials", "kept", "--db", url))
    assert "upgrade nasctl" in one_line_error(run_cli("db", "upgrade", "--db", url))


def test_db_upgrade_on_a_new_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    up = run_cli("db", "upgrade", "--db", url)
    head = head_revision()
    assert up.returncode == 0 and f"upgraded from empty to {head}" in up.stdout, up.stdout + up.stderr
    again = run_cli("db", "upgrade", "--db", url)
    assert f"already at revision {head}" in again.stdout


def test_dryrun_starts_nothing(tmp_path: Path) -> None:
    proc = run_cli("run", EXAMPLE, "--dryrun", "--json", "--db", f"sqlite:///{tmp_path}/d.db", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["scheduler"] == "local_cwd"
    assert plan["command"][1:3] == ["-m", "nasctl.search_spaces.mlp"]
    assert "--hidden_size_1" in plan["command"]
    assert "NASCTL_LOG_DIR" in plan["request"] and "trial_0000" in plan["request"]
    assert plan["preload"][:2] == ["torch", "pytorch_lightning"]  # the built-in trainer starts warm
    assert "NASCTL_WARM_SOCKET" not in plan["request"]  # no warm server was started
    assert not (tmp_path / "d.db").exists() and not (tmp_path / "nasctl_runs").exists()


def test_export_to_a_missing_folder(tmp_path: Path) -> None:
    from nasctl.store import Store
    from tests.helpers.synthetic import add_synthetic

    url = f"sqlite:///{tmp_path}/e.db"
    add_synthetic(Store(url, create=True), "exp", 3)
    out = tmp_path / "missing" / "dir" / "x.json"
    err = one_line_error(run_cli("export", "exp", "--out", str(out), "--db", url))
    assert f"cannot write --out {out}: No such file or directory" in err and "folder that exists" in err
    assert not (tmp_path / "missing").exists()
    ok = run_cli("export", "exp", "--out", str(tmp_path / "x.json"), "--db", url)
    assert ok.returncode == 0 and len(json.loads((tmp_path / "x.json").read_text())["trials"]) == 3


def test_bad_retry_settings_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """A negative or absurd trial.max_retries, an unknown class or `user` in
    trial.retry_on: one line naming the key and what to use, exit 2, nothing written."""
    cases = {
        "max_retries: -1": "trial.max_retries: Input should be greater than or equal to 0",
        "max_retries: 101": "trial.max_retries: Input should be less than or equal to 100",
        "retry_on: [user]": "trial.retry_on: user failures (the trial's own code) are never retried",
        "retry_on: [oom]": "trial.retry_on: unknown failure class 'oom'; use any of infrastructure, timeout, cancelled",
    }
    for setting, expected in cases.items():
        spec = tmp_path / "s.yaml"
        spec.write_text(Path(EXAMPLE).read_text().replace("search_space: mlp_digits",
                                                          "search_space: mlp_digits\n  " + setting))
        err = one_line_error(run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/n.db", cwd=tmp_path))
        assert expected in err, (setting, err)
        assert not (tmp_path / "n.db").exists()


def test_a_folder_with_trials_of_a_run_not_in_the_database_is_refused(tmp_path: Path) -> None:
    """`nasctl rm` without --files (or a deleted database) leaves the trial folders:
    a new run under the same name would read their records and results as its own
    trials'. It is refused before anything is written; the old files stay."""
    old = tmp_path / "runs" / "stale" / "trials" / "trial_0000" / "job"
    old.mkdir(parents=True)
    (old / "exit.json").write_text('{"exit_code": 0}')
    db = f"sqlite:///{tmp_path}/n.db"
    err = one_line_error(run_cli("run", EXAMPLE, "--name", "stale", "--db", db, "--workdir", str(tmp_path / "runs"),
                                 cwd=tmp_path))
    assert f"the trial directory {tmp_path / 'runs' / 'stale'} holds trials of an earlier run" in err
    assert "--workdir" in err and "--name" in err
    assert (old / "exit.json").read_text() == '{"exit_code": 0}'
    listed = run_cli("ls", "--db", db, "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []  # no experiment was created
