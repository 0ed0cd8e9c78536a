"""Moved to :mod:`pfr.models.lm.prompt`; this re-export stays until
models/generate.py and models/openai/backend.py imports from there."""

from pfr.models.lm.prompt import (
    DEFAULT_TEMPLATE,
    JsonTemplate,
    PromptTemplate,
    chat_wrap,
    render,
    render_json,
    render_prefix,
)

__all__ = ["DEFAULT_TEMPLATE", "JsonTemplate", "PromptTemplate", "chat_wrap", "render", "render_json", "render_prefix"]
