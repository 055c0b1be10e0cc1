"""`nasctl serve`: one long-running process that drives many experiments and serves
the dashboard and API (see supervisor.py for what it does, routes.py for its API)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nasctl.server.supervisor import Supervisor


def create_service_app(sup: Supervisor, *, token: str | None = None,
                       allowed_hosts: Sequence[str] | None = None) -> Any:
    """The dashboard of `nasctl web` plus the service's routes (submit, resume,
    /healthz, /metrics), for the supervisor's database. While the supervisor is a
    standby, every write is refused (503) with the active service's URL."""
    from nasctl.server import routes
    from nasctl.web import create_app

    def refuse_writes() -> tuple[str, str | None] | None:
        return None if sup.active else sup.standby_refusal()

    app = create_app(sup.store, token=token, allowed_hosts=allowed_hosts, refuse_writes=refuse_writes)
    app.state.supervisor = sup
    app.include_router(routes.router)
    return app


__all__ = ["Supervisor", "create_service_app"]
