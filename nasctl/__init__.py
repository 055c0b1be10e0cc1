"""nasctl: multi-objective neural architecture search and experiment orchestration."""

__version__ = "0.1.0"
