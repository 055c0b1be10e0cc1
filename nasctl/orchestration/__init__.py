"""The scheduler loop and the optimizer adapter (the only place that imports Ax)."""
