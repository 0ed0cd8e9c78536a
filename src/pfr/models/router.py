"""Moved to :mod:`pfr.models.simple.router`; kept until the registry names the new path."""

from pfr.models.simple.router import BACKEND

__all__ = ["BACKEND"]
