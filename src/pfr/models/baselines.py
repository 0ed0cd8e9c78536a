"""Moved to :mod:`pfr.models.simple.baselines`; kept until the registry names the new path."""

from pfr.models.simple.baselines import BACKEND

__all__ = ["BACKEND"]
