"""Every committed fixture database (one per past schema revision, made by the
nasctl of that revision) is upgraded, read back and planned for a resume; an
experiment on each that stores its trials differently is resumed to the end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from nasctl.store import Store, migrate
from nasctl.store.migrate import head_revision, known_revisions
from nasctl.types import TrialStatus
from tests.conftest import run_cli

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("db_*.sqlite"))
RESUMED = ("0001_initial", "0002_trial_info", "0004_device_leases", "0007_multifidelity", "0008_attempts")
"""The revisions whose fixtures are resumed to the end: the first, and each that
added columns to the trials (`info`; `devices` and `device_wait_since`;
`fidelity` and `promoted_from`; `failure_class` and `attempts`). The others add
only an index (0003) or tables that start empty (0005 the service's leases, 0006
notes), so a resume reads the same trial rows as from the revision before;
their fixtures are still upgraded, read back and planned (`resume --dryrun`),
with their stored spec parsed as a resume parses it. A resume costs an
orchestrator and two trainings, ~30 s of CPU a fixture."""


def test_a_fixture_exists_for_every_revision() -> None:
    have = {p.stem.removeprefix("db_") for p in FIXTURES}
    assert have == known_revisions(), "commit a fixture database for each schema revision (see README, Development)"
    assert set(RESUMED) <= have


@pytest.mark.e2e
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_upgrade_then_resume(fixture: Path, tmp_path: Path) -> None:
    db_file = tmp_path / fixture.name
    shutil.copy(fixture, db_file)
    db = f"sqlite:///{db_file}"
    revision = fixture.stem.removeprefix("db_")
    before = json.loads(run_cli("db", "current", "--db", db, "--json").stdout)
    assert before["current"] == revision
    up = run_cli("db", "upgrade", "--db", db)
    assert up.returncode == 0, up.stderr
    assert json.loads(run_cli("db", "current", "--db", db, "--json").stdout)["current"] == head_revision()

    old = {t["index"]: t for t in json.loads(run_cli("trials", "fixture-0001", "--db", db, "--json").stdout)}
    assert len(old) == 2 and all(t["status"] == "COMPLETED" for t in old.values())
    # the stored work directory is gone (the database moved): resume elsewhere
    refused = run_cli("resume", "fixture-0001", "--db", db, cwd=tmp_path)  # after parsing the stored spec
    assert refused.returncode == 2 and "--workdir" in refused.stderr
    plan = json.loads(run_cli("resume", "fixture-0001", "--dryrun", "--db", db, "--json").stdout)
    assert (plan["finished"], plan["new_trials_to_propose"], plan["reattach_running"]) == (2, 2, [])
    if revision not in RESUMED:
        return
    res = run_cli("resume", "fixture-0001", "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    trials = {t["index"]: t for t in json.loads(run_cli("trials", "fixture-0001", "--db", db, "--json").stdout)}
    assert sorted(trials) == [0, 1, 2, 3] and all(t["status"] == "COMPLETED" for t in trials.values())
    for i in (0, 1):  # what the old nasctl recorded is untouched
        assert trials[i]["values"] == old[i]["values"] and trials[i]["parameters"] == old[i]["parameters"]
        assert trials[i].get("info") == old[i].get("info")
    for i in (2, 3):  # trials run by this nasctl record how they ran
        assert trials[i]["info"]["precision"] == "fp32" and trials[i]["info"]["device"]
    assert {json.dumps(trials[i]["parameters"], sort_keys=True) for i in (2, 3)}.isdisjoint(
        {json.dumps(old[i]["parameters"], sort_keys=True) for i in (0, 1)}
    )
    assert all(Path(trials[i]["log_dir"]).is_relative_to(tmp_path / "runs") for i in (2, 3))


def test_0002_adds_trial_info_on_every_database(db_url: str) -> None:
    """0001 -> 0002 keeps existing trials (info NULL), then info round-trips; and
    the downgrade drops the column again (SQLite through batch mode)."""
    engine = create_engine(db_url)
    try:
        migrate.upgrade(engine, revision="0001_initial")
        with engine.begin() as c:  # rows as nasctl 0001 wrote them
            c.execute(text(
                "INSERT INTO experiments (id, name, spec, status, work_dir, created_at, updated_at) "
                "VALUES (1, 'old', '{}', 'STOPPED', '/x', '2026-11-22 00:00:00', '2026-11-22 00:00:00')"))
            c.execute(text(
                "INSERT INTO trials (id, experiment_id, " + ("`index`" if "mysql" in db_url else '"index"')
                + ", parameters, status, generation_method, runner_metadata, reader_state, "
                + ("`values`" if "mysql" in db_url else '"values"') + ", created_at) "
                "VALUES (1, 1, 0, '{\"h\": 8}', 'COMPLETED', 'Sobol', '{}', '{}', '{\"val_acc\": 0.5}', "
                "'2026-11-22 00:00:00')"))
        before, after = migrate.upgrade(engine)
        assert (before, after) == ("0001_initial", head_revision())
        store = Store(db_url)
        (t,) = store.list_trials(1)
        assert t.info is None and t.values == {"val_acc": 0.5} and t.parameters == {"h": 8}
        info = {"precision": "bf16", "latency": {"median_ms": 0.05, "threads": 1}, "argv": ["--x", "1"]}
        assert store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.6}, info=info).info == info
        assert store.get_trial(1, 0).info == info
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.6})  # no new info: the stored one stays
        assert store.get_trial(1, 0).info == info
        store.close()
        from alembic import command

        cfg = migrate.alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0001_initial")
        with engine.connect() as c:
            cols = {r[1] if "sqlite" in db_url else r[0] for r in c.execute(text(
                "PRAGMA table_info(trials)" if "sqlite" in db_url else
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'trials'"
                + (" AND table_schema = DATABASE()" if "mysql" in db_url else "")))}
        assert "info" not in {str(x).lower() for x in cols} and "log_tail" in {str(x).lower() for x in cols}
    finally:
        engine.dispose()


def test_0003_indexes_events_by_kind_on_every_database(db_url: str) -> None:
    """0002 -> 0003 adds the (experiment_id, kind, id) index over existing events,
    which the latest-event-of-a-kind query then reads; the downgrade drops it."""
    from sqlalchemy import inspect

    from nasctl.store import queries

    engine = create_engine(db_url)

    def event_indexes() -> dict[str, list[str]]:
        return {str(ix["name"]): list(ix["column_names"]) for ix in inspect(engine).get_indexes("events")}

    try:
        migrate.upgrade(engine, revision="0002_trial_info")
        assert "ix_events_experiment_id_kind_id" not in event_indexes()
        with engine.begin() as c:  # an experiment and events as nasctl 0002 wrote them
            c.execute(text(
                "INSERT INTO experiments (id, name, spec, status, work_dir, created_at, updated_at) "
                "VALUES (1, 'old', '{}', 'STOPPED', '/x', '2026-11-22 00:00:00', '2026-11-22 00:00:00')"))
            for kind, data in [("log_scale", '{"metrics": ["val_loss"]}'), ("status", None),
                               ("log_scale", '{"metrics": []}'), ("finished", None)]:
                c.execute(text("INSERT INTO events (experiment_id, time, kind, message, data) "
                               "VALUES (1, '2026-11-22 00:00:00', :kind, 'm', :data)"), {"kind": kind, "data": data})
        assert migrate.upgrade(engine) == ("0002_trial_info", head_revision())
        assert event_indexes()["ix_events_experiment_id_kind_id"] == ["experiment_id", "kind", "id"]
        store = Store(db_url)
        assert queries.log_scale_metrics(store, 1) == []  # the newest log-scale event wins
        store.add_event(1, queries.LOG_SCALE, "on", data={"metrics": ["val_loss"]})
        assert queries.log_scale_metrics(store, 1) == ["val_loss"]
        assert len(store.events(1)) == 5
        store.close()
        from alembic import command

        cfg = migrate.alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002_trial_info")
        assert "ix_events_experiment_id_kind_id" not in event_indexes()
        assert "ix_events_experiment_id_id" in event_indexes()
    finally:
        engine.dispose()
