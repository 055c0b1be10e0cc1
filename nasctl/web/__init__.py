"""The web dashboard: `create_app(store)` returns a FastAPI app (JSON under /api, pages, static files)."""

from __future__ import annotations

from nasctl.web.app import create_app

__all__ = ["create_app"]
