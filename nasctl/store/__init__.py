"""SQL persistence (the only subpackage that imports SQLAlchemy)."""

from nasctl.store.engine import DEFAULT_URL, resolve_url
from nasctl.store.store import Store

__all__ = ["DEFAULT_URL", "Store", "resolve_url"]
