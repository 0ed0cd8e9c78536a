"""Moved to :mod:`pfr.models.lm.prompt`; kept until models/generate.py and models/openai/backend.py import it."""

from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, render

__all__ = ["DEFAULT_TEMPLATE", "PromptTemplate", "render"]
