"""Conformance checks for backends: how a new backend shows it keeps the contract the harness relies on.

:func:`check_backend` runs a real backend instance through the :class:`~pfr.models.base.Backend`
contract (in the spirit of scikit-learn's ``check_estimator``) and raises :class:`ContractError`
naming the first clause it breaks::

    from pfr.models.registry import load_model
    from pfr.testing import check_backend

    check_backend(load_model("python:my_model.py:score"))

The runner, the store and the reports assume every clause: one finite score per option (in option
order) or a label-only answer (a valid ``choice`` and no scores, or choice ``-1`` with ``meta.invalid``;
a ``meta.parse`` reason agrees with ``meta.invalid``), a JSON-serialisable identity that
does not change while the backend lives (the store keys results on it), a positive batch size,
prompts that do not change between calls, scores (or a label) of a request that do not depend on
the batch it came in, and a ``close`` that may be called twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from pfr.design.invalid import INVALID
from pfr.design.types import Request
from pfr.models.base import Backend, Scores
from pfr.models.decide import INVALID_REASONS


class ContractError(AssertionError):
    """A backend breaks a clause of the backend contract (the message names the clause)."""


def _require(ok: bool, clause: str, detail: str) -> None:
    if not ok:
        raise ContractError(f"{clause}: {detail}")


def sample_requests(limit: int = 2) -> list[Request]:
    """Requests from the bundled demo data (``limit`` texts, four requests each): no download needed."""
    from pfr.api import build

    return build("demo", limit=limit)


def _check_scores(scores: Any, requests: Sequence[Request], where: str) -> list[Scores]:
    _require(isinstance(scores, list), "score", f"{where}: returned {type(scores).__name__}, not a list")
    _require(len(scores) == len(requests), "score", f"{where}: {len(scores)} Scores for {len(requests)} requests")
    for s, r in zip(scores, requests):
        rid = r.request_id
        _require(isinstance(s, Scores), "score", f"{where}: request {rid}: {type(s).__name__}, not Scores")
        n = len(r.options)
        if s.label_only:  # a label-only answer: the choice, no scores (never invented ones)
            ok = (s.choice == INVALID and s.meta.get("invalid") is True) or (
                isinstance(s.choice, int) and not isinstance(s.choice, bool) and 0 <= s.choice < n
            )
            _require(ok, "label-only choice", f"request {rid}: choice {s.choice!r} is no option of {n}")
            reason = s.meta.get("parse")
            _require(
                reason is None or (reason in INVALID_REASONS) is (s.choice == -1),
                "parse reason",
                f"request {rid}: meta.parse {reason!r} with choice {s.choice!r} "
                f"(invalid reasons: {', '.join(sorted(INVALID_REASONS))})",
            )
            continue
        _require(len(s.logits) == n, "score shape", f"request {rid}: {len(s.logits)} scores for {n} options")
        _require(
            all(isinstance(x, float) and math.isfinite(x) for x in s.logits),
            "score finiteness",
            f"request {rid}: scores must be finite floats, got {s.logits}",
        )
        _require(
            len(s.censored) in (0, n) and all(isinstance(c, bool) for c in s.censored),
            "censored flags",
            f"request {rid}: censored must be empty or one bool per option, got {s.censored}",
        )
        try:
            json.dumps(s.meta)
        except (TypeError, ValueError) as exc:
            raise ContractError(f"score meta: request {rid}: not JSON-serialisable ({exc})") from None
    return list(scores)


def _identity(backend: Backend) -> str:
    ident = backend.identity
    _require(isinstance(ident, dict) and bool(ident), "identity", f"must be a non-empty dict, got {ident!r}")
    _require(isinstance(ident.get("backend"), str), "identity", "must name its backend (a 'backend' string)")
    try:
        return json.dumps(ident, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ContractError(f"identity: not JSON-serialisable ({exc})") from None


def check_backend(
    backend: Any, requests: Sequence[Request] | None = None, *, atol: float = 1e-3, close: bool = True
) -> list[str]:
    """Check ``backend`` against the backend contract on ``requests`` (default: :func:`sample_requests`).

    ``atol`` bounds how far a request's scores may move between a batch and a batch of its own (float
    rounding of batched forward passes). With ``close`` the backend is closed twice at the end (it
    cannot score afterwards). Returns the clauses checked; raises :class:`ContractError` on the first
    one broken.
    """
    reqs = list(requests) if requests is not None else sample_requests()
    _require(bool(reqs), "requests", "check_backend needs at least one request")
    checked: list[str] = []
    members = ("identity", "temperature", "batch_size", "prompt", "score", "close")
    missing = [m for m in members if not hasattr(backend, m)]
    _require(not missing, "protocol", f"{type(backend).__name__} lacks {', '.join(missing)}")
    _require(isinstance(backend, Backend), "protocol", f"{type(backend).__name__} is not a pfr Backend")
    checked.append("protocol")

    first = _identity(backend)
    _require(_identity(backend) == first, "identity stable", "two reads of identity differ")
    t = backend.temperature
    _require(isinstance(t, (int, float)) and math.isfinite(t) and t > 0, "temperature", f"must be positive, got {t!r}")
    ident_t = backend.identity.get("temperature")
    _require(ident_t == t, "identity temperature", f"identity says temperature {ident_t!r}, the backend {t!r}")
    b = backend.batch_size
    _require(isinstance(b, int) and not isinstance(b, bool) and b >= 1, "batch_size", f"must be an int ≥ 1, got {b!r}")
    checked += ["identity", "temperature", "batch_size"]

    for r in reqs:
        p = backend.prompt(r)
        _require(p is None or (isinstance(p, str) and bool(p)), "prompt", f"request {r.request_id}: got {p!r}")
        _require(backend.prompt(r) == p, "prompt stable", f"request {r.request_id}: two calls give different text")
        encode = getattr(backend, "encode", None)
        if callable(encode) and isinstance(p, str):
            ids = encode(p)
            _require(
                isinstance(ids, list) and bool(ids) and all(isinstance(i, int) for i in ids),
                "encode",
                f"request {r.request_id}: token ids must be a non-empty list of ints",
            )
    checked.append("prompt")
    template = getattr(backend, "template", None)
    if template is not None:
        shown = backend.identity.get("template")
        _require(shown == template.to_dict(), "identity template", "identity['template'] must be template.to_dict()")
        checked.append("template")

    _require(backend.score([]) == [], "score", "score([]) must return []")
    batch = _check_scores(backend.score(reqs), reqs, "the whole batch")
    for i, r in enumerate(reqs[: min(4, len(reqs))]):
        (alone,) = _check_scores(backend.score([r]), [r], "one request")
        if alone.label_only or batch[i].label_only:  # a label: the same choice alone and in a batch
            _require(
                alone.choice == batch[i].choice,
                "batch independence",
                f"request {r.request_id}: choice {alone.choice} alone, {batch[i].choice} in a batch",
            )
            continue
        worst = max(abs(x - y) for x, y in zip(alone.logits, batch[i].logits))
        _require(
            worst <= atol,
            "batch independence",
            f"request {r.request_id}: scores alone and in a batch differ by {worst:.3g} (> {atol:g})",
        )
    checked += ["score", "batch independence"]
    _require(_identity(backend) == first, "identity stable", "identity changed while scoring")

    if close:
        backend.close()
        try:
            backend.close()
        except Exception as exc:
            raise ContractError(f"close: a second close() raised {type(exc).__name__}: {exc}") from None
        checked.append("close")
    return checked
