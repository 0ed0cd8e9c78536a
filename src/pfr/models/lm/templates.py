"""Prompt templates a study can set (docs/method.md §5): the plain-text template's wording, or a structured
JSON rendering for decision services.

A template is part of an LM backend's identity (``identity["template"]``), so the template in force
is recorded with every result and a changed template never mixes with stored scores.
(``JsonTemplate``, which :mod:`pfr.models.lm.prompt` renders).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pfr.errors import DataError
from pfr.models.lm.prompt import JsonTemplate, PromptTemplate

__all__ = ["RENDERERS", "JsonTemplate", "apply_template", "template_from"]

RENDERERS = ("text", "json")


_TEXT_FIELDS = {f.name for f in fields(PromptTemplate)}
#: the placeholders each text field may use
_PLACEHOLDERS = {
    "category_line": {"id": "x", "description": "x"},
    "input_line": {"text": "x"},
    "supplied_line": {"id": "x", "description": "x"},
    "option_line": {"symbol": "A", "label": "x"},
}


def template_from(table: Mapping[str, Any], where: str) -> PromptTemplate:
    """A template from a study file's ``[template]`` table (keys: ``renderer`` and the template's
    fields, ``-`` or ``_``); unknown keys and bad placeholders are errors naming them."""
    valid = ["renderer", *(name.replace("_", "-") for name in sorted(_TEXT_FIELDS))]
    values: dict[str, str] = {}
    renderer = "text"
    for key, value in table.items():
        k = str(key).replace("-", "_")
        if k == "renderer":
            renderer = str(value)
            continue
        if k not in _TEXT_FIELDS:
            raise DataError(f"{where}: unknown key {key!r} (valid keys: {', '.join(valid)})")
        if not isinstance(value, str):
            raise DataError(f"{where}: {key} must be a string")
        try:
            value.format(**_PLACEHOLDERS.get(k, {}))
        except (KeyError, IndexError, ValueError) as exc:
            allowed = ", ".join("{" + p + "}" for p in _PLACEHOLDERS.get(k, {})) or "none"
            raise DataError(f"{where}: {key}: bad placeholder {exc} (allowed: {allowed})") from None
        values[k] = value
    if renderer not in RENDERERS:
        raise DataError(f"{where}: renderer {renderer!r} (use {' or '.join(RENDERERS)})")
    if renderer == "json":
        extra = sorted(set(values) - {"instruction", "answer_cue"})
        if extra:
            raise DataError(f"{where}: the json renderer takes only instruction and answer-cue, not {extra[0]}")
        return JsonTemplate(**values)
    return PromptTemplate(**values)


def apply_template(backend: Any, template: PromptTemplate, where: str = "template") -> None:
    """Give an LM backend a template (it renders with it and records it in its identity)."""
    if not hasattr(backend, "template"):
        name = backend.identity.get("backend", type(backend).__name__)
        raise DataError(f"{where}: the {name} backend reads requests directly; a prompt template needs an LM backend")
    backend.template = template

