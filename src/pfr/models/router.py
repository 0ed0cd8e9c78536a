"""Moved to :mod:`pfr.models.simple.router`; this re-export stays until the registry imports from there."""

from pfr.models.simple.router import BACKEND, OPTIONS, EmbeddingRouter, from_spec

__all__ = ["BACKEND", "OPTIONS", "EmbeddingRouter", "from_spec"]
