"""Moved to :mod:`pfr.models.simple.baselines`; this re-export stays until the registry imports from there."""

from pfr.models.simple.baselines import BACKEND, Baseline

__all__ = ["BACKEND", "Baseline"]
