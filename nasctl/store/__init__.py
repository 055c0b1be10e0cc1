"""SQL persistence (the only subpackage that imports SQLAlchemy)."""

from nasctl.store.store import DEFAULT_URL, Store, resolve_url

__all__ = ["DEFAULT_URL", "Store", "resolve_url"]
