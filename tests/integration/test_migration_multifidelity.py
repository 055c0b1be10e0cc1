"""Revision 0007_multifidelity on every database: existing trials keep NULL fidelity
and promoted_from, a trial can be promoted once only, and the downgrade drops both."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text

from nasctl.errors import StorageError
from nasctl.store import Store, migrate
from nasctl.store.migrate import head_revision

def test_0007_adds_fidelity_and_one_promotion_per_trial(db_url: str) -> None:
    engine = create_engine(db_url)
    q = "`" if "mysql" in db_url else '"'

    def trial_columns() -> set[str]:
        return {str(c["name"]).lower() for c in inspect(engine).get_columns("trials")}

    try:
        migrate.upgrade(engine, revision="0006_notes")
        assert "fidelity" not in trial_columns()
        with engine.begin() as c:  # rows as nasctl 0006 wrote them
            c.execute(text(
                "INSERT INTO experiments (id, name, spec, status, work_dir, created_at, updated_at) "
                "VALUES (1, 'old', '{}', 'STOPPED', '/x', '2026-11-22 00:00:00', '2026-11-22 00:00:00')"))
            for i in range(2):
                c.execute(text(
                    f"INSERT INTO trials (experiment_id, {q}index{q}, parameters, status, generation_method, "
                    f"runner_metadata, reader_state, {q}values{q}, created_at) VALUES "
                    f"(1, {i}, '{{\"h\": 8}}', 'COMPLETED', 'Sobol', '{{}}', '{{}}', '{{}}', "
                    "'2026-11-22 00:00:00')"))
        assert migrate.upgrade(engine) == ("0006_notes", head_revision())
        assert {"fidelity", "promoted_from"} <= trial_columns()
        store = Store(db_url)
        assert [(t.fidelity, t.promoted_from) for t in store.list_trials(1)] == [(None, None), (None, None)]
        # many trials without a promotion (NULL) side by side, one promotion per trial
        store.add_trial(1, 2, {"h": 8, "epochs": 1}, "Sobol", "old-2", "/x/2", fidelity=1)
        store.add_trial(1, 3, {"h": 8, "epochs": 3}, "promotion", "old-3", "/x/3", fidelity=3, promoted_from=2)
        with pytest.raises(StorageError, match="(?i)promoted_from|duplicate|unique"):
            store.add_trial(1, 4, {"h": 8, "epochs": 3}, "promotion", "old-4", "/x/4", fidelity=3, promoted_from=2)
        assert (store.get_trial(1, 3).fidelity, store.get_trial(1, 3).promoted_from) == (3.0, 2)
        store.close()
        from alembic import command

        cfg = migrate.alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0006_notes")
        assert not {"fidelity", "promoted_from"} & trial_columns()
        assert "generation_method" in trial_columns()
    finally:
        engine.dispose()
