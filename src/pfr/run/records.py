"""What the store keeps and checks, apart from how: the keys of a model and of a request, a scored
request as read back, and the checks a request or a stored row must pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pfr.design.invalid import INVALID
from pfr.design.policies import is_boundary_panel
from pfr.design.types import Request, content_id


class ScoredRow(NamedTuple):
    """One scored request as the store writes it: its key and what :class:`StoredResult` reads back."""

    key: str
    request: Request
    prompt: str | None
    logits: Sequence[float]
    logprobs: Sequence[float]
    censored: Sequence[bool]
    choice: int
    seconds: float
    meta: dict[str, Any]


def model_key(identity: dict[str, Any]) -> str:
    return content_id(identity)


def inventory_rows(request: Request) -> list[dict[str, Any]]:
    return [{"id": c.id, "description": c.description, "parent": c.parent} for c in request.inventory]


def request_key(request: Request, prompt: str | None) -> str:
    """Content hash of everything about a request that can change a score.

    The request's fields, the *full* inventory (ids, descriptions and parents: a router and a
    ``python:`` model read the descriptions directly, not through a prompt) and the exact prompt.
    Editing a descriptions file therefore re-scores every request it touches.
    """
    body = request.to_dict()
    body.pop("inventory")
    return content_id({"request": body, "inventory": inventory_rows(request), "prompt": prompt})


def request_problem(request: Request) -> str | None:
    """The first field of ``request`` that is out of range or inconsistent, as a short message;
    ``None`` for a well-formed request. Catches hand-edited requests files and store rows."""
    n = len(request.options)
    if request.factors.get("task") == "classify-then-map":  # one full-inventory request, no fallback
        from pfr.design.reference import reference_problem

        return reference_problem(request)
    if n < 2:
        return f"options: {n} option(s), need at least 2"
    if request.assignment not in ("R", "F"):
        return f"assignment: {request.assignment!r} is not R or F"
    if request.definition not in ("U", "C"):
        return f"definition: {request.definition!r} is not U or C"
    for name in ("expected", "fallback_index", "index"):
        value = getattr(request, name)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name}: {value!r} is not an integer"
    if not 0 <= request.expected < n:
        return f"expected: {request.expected} is out of range for {n} options (0..{n - 1})"
    if not 0 <= request.fallback_index < n:
        return f"fallback_index: {request.fallback_index} is out of range for {n} options (0..{n - 1})"
    if not request.options[request.fallback_index].is_fallback:
        return f"fallback_index: option {request.fallback_index} is not the fallback"
    if [o.is_fallback for o in request.options].count(True) != 1:
        return "options: exactly one option must be the fallback"
    if is_boundary_panel(request.panel):  # every request of a boundary quad requires Fast (docs/method.md §4.3)
        if request.expected == request.fallback_index:
            return f"expected: {request.expected} is the fallback; a {request.panel} request requires Fast"
        return None
    if request.assignment == "F" and request.expected != request.fallback_index:
        return f"expected: {request.expected} must be the fallback ({request.fallback_index}) under assignment F"
    return None


@dataclass(frozen=True)
class StoredResult:
    """One scored request as read back from the store."""

    model: dict[str, Any]
    request: Request
    prompt: str | None
    logits: tuple[float, ...]
    logprobs: tuple[float, ...]
    censored: tuple[bool, ...]
    choice: int
    seconds: float
    meta: dict[str, Any]

    @property
    def label_only(self) -> bool:
        """A label-only answer: the model named its choice and gave no per-option scores."""
        return not self.logprobs


def result_problem(r: StoredResult) -> str | None:
    n = len(r.request.options)
    label_only = not r.logits and not r.logprobs and isinstance(r.meta, dict) and r.meta.get("label_only") is True
    for name in ("logits", "logprobs"):
        if len(getattr(r, name)) != n and not label_only:
            return f"{name}: {len(getattr(r, name))} scores for {n} options"
    if r.censored and len(r.censored) != n:
        return f"censored: {len(r.censored)} flags for {n} options"
    if not 0 <= r.choice < n and not (label_only and r.choice == INVALID and r.meta.get("invalid") is True):
        return f"choice: {r.choice} is out of range for {n} options"
    if not isinstance(r.meta, dict):
        return "meta: not a JSON object"
    return None


#: One scored request read from a file (``pfr import``), ready for :meth:`Store.add_results`: the same
#: type the store reads back, so an import and a store row cannot drift apart field by field.
Imported = StoredResult


class RowError(ValueError):
    """A problem with one row; the caller adds the file and line."""
