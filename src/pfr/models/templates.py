"""Moved to :mod:`pfr.models.lm.templates`; kept until studies/execute.py imports from there."""

from pfr.models.lm.templates import apply_template

__all__ = ["apply_template"]
