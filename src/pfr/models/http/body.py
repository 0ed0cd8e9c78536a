"""What the ``http:`` backend sends: the default JSON body of a request, or a user's template.

The default body is one JSON object per request (docs/deployed.md documents it as a schema)::

    {"request_id": str, "text": str | null, "instruction": str,
     "options": [{"symbol": str, "label": str, "category": str | null, "description": str | null,
                  "fallback": bool}],
     "categories": [{"id": str, "description": str}],
     "design": {"name": str, "dataset": str, "panel": str, "definition": "U" | "C", "factors": {...}}}

It never carries what would give the answer away (the gold category, the assignment R/F, the
expected option). ``body=FILE`` renders any other body from the same fields with a sandboxed
Jinja2 template (a template cannot reach Python objects or files); the rendered text must be JSON.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError


def default_body(request: Request) -> dict[str, Any]:
    """The default JSON object for ``request`` (see the module docstring)."""
    descriptions = {c.id: c.description for c in request.inventory}
    return {
        "request_id": request.request_id,
        "text": request.text if request.show_text else None,
        "instruction": request.criterion,
        "options": [
            {
                "symbol": o.symbol,
                "label": o.label,
                "category": o.category,
                "description": descriptions.get(o.category) if o.category is not None else None,
                "fallback": o.is_fallback,
            }
            for o in request.options
        ],
        "categories": [{"id": c.id, "description": c.description} for c in request.inventory],
        "design": {
            "name": request.design,
            "dataset": request.dataset,
            "panel": request.panel,
            "definition": request.definition,
            "factors": dict(request.factors),
        },
    }


class BodyTemplate:
    """A sandboxed Jinja2 template that renders the JSON body of one request (``request`` and its
    fields as top-level names) or of a batch (``requests``, a list of default bodies)."""

    def __init__(self, path: str) -> None:
        from jinja2 import StrictUndefined, TemplateError
        from jinja2.sandbox import SandboxedEnvironment

        file = Path(path)
        try:
            source = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError(f"model option body={path}: cannot read the template ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise ModelError(f"model option body={path}: the template is not UTF-8 text") from None
        self.path = path
        self.sha = hashlib.sha256(source.encode()).hexdigest()[:16]
        env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)
        try:
            self._template = env.from_string(source)
        except TemplateError as exc:
            line = getattr(exc, "lineno", None)
            raise ModelError(f"{path}{f':{line}' if line else ''}: template error: {exc}") from None

    def render(self, context: dict[str, Any], what: str) -> Any:
        """The template rendered with ``context`` and parsed as JSON; errors name the file and ``what``."""
        from jinja2 import TemplateError
        from jinja2.exceptions import SecurityError

        try:
            text = self._template.render(**context)
        except (TemplateError, SecurityError) as exc:
            line = getattr(exc, "lineno", None)
            raise ModelError(f"{self.path}{f':{line}' if line else ''}: rendering {what} failed: {exc}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            flat = " ".join(text.split())[:200]
            raise ModelError(
                f"{self.path}: rendering {what} gave no JSON ({exc.msg} at line {exc.lineno}): {flat}"
            ) from None


def request_body(request: Request, template: BodyTemplate | None) -> Any:
    """The JSON value sent for one request."""
    body = default_body(request)
    if template is None:
        return body
    return template.render({**body, "request": body}, f"request {request.request_id}")


def batch_body(requests: list[Request], template: BodyTemplate | None) -> Any:
    """The JSON value sent for a batch: a JSON array of default bodies, or the template's rendering."""
    bodies = [default_body(r) for r in requests]
    if template is None:
        return bodies
    return template.render({"requests": bodies}, f"a batch of {len(requests)} from {requests[0].request_id}")
