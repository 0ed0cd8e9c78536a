"""Moved to :mod:`pfr.models.lm.templates`; this re-export stays until studies/execute.py imports from there."""

from pfr.models.lm.templates import RENDERERS, JsonTemplate, apply_template, template_from

__all__ = ["RENDERERS", "JsonTemplate", "apply_template", "template_from"]
