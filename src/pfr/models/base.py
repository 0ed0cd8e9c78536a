"""What a model is to the harness: a batch of requests in, one log-score per option out.

A backend implements :class:`Backend`. The harness turns raw log-scores into the model's
normalised log-probabilities (``log_softmax(scores / T)``, floored at ``1e-12``) and takes the
first-in-order argmax as the native decision (docs/method.md §5).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pfr.design.invalid import INVALID
from pfr.design.types import Request
from pfr.errors import ModelError

#: set by :func:`no_contact` (a dry run): no server is asked, no user function called
_NO_CONTACT: contextvars.ContextVar[bool] = contextvars.ContextVar("pfr_no_contact", default=False)


@dataclass(frozen=True)
class Scores:
    """The raw log-scores a backend gave one request, one per option in option order.

    ``censored[i]`` marks a score that is only an upper bound (an option missing from an API's
    top-k logprobs); ``meta`` carries backend details worth keeping (token counts, timings).
    A *label-only* answer (a service or function that names one option and gives no scores) has
    no ``logits`` and its ``choice`` (an option index): it is stored as such, never as made-up
    scores, so analyses that need scores can refuse it.
    """

    logits: tuple[float, ...]
    censored: tuple[bool, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    choice: int | None = None

    @property
    def label_only(self) -> bool:
        return self.choice is not None and not self.logits

    @property
    def any_censored(self) -> bool:
        return any(self.censored)


def normalise_scores(logits: Sequence[float], temperature: float = 1.0) -> list[float]:
    """``log_softmax(logits / T)`` floored at 1e-12, with the rule of :mod:`pfr.models.scores` for
    ``+inf``, ``-inf`` and NaN (a NaN is a :class:`~pfr.errors.ModelError`)."""
    from pfr.models.scores import settle

    return settle(logits, temperature)[0]


def native_choice(logprobs: Sequence[float]) -> int:
    """The native decision: the first-in-order argmax (choice order breaks ties)."""
    from pfr.models.scores import first_argmax

    return first_argmax(logprobs)


@runtime_checkable
class Backend(Protocol):
    """A decision model: what the runner, the API and studies call on it.

    ``identity`` names the model and every setting that changes its scores (path or hub id,
    revision or file hash, temperature, prompt template); the results store keys on it.
    ``prompt`` returns the exact text the model sees for a request (or ``None`` for models that
    read the request's fields directly). ``batch_size`` is how many requests the runner sends per
    ``score`` call (a multiple of 4 keeps each quad in one call). ``close`` frees what the backend
    holds (an engine, worker processes, connections); it may be called more than once, and the
    backend cannot score afterwards. :func:`pfr.testing.check_backend` checks all of it.
    """

    @property
    def identity(self) -> dict[str, Any]: ...

    @property
    def temperature(self) -> float: ...

    @property
    def batch_size(self) -> int: ...

    def prompt(self, request: Request) -> str | None: ...

    def score(self, requests: Sequence[Request]) -> list[Scores]: ...

    def close(self) -> None: ...


@runtime_checkable
class TokenCounter(Protocol):
    """Optional: a backend that can tokenize its own prompts (matched-length checks count with it)."""

    def encode(self, prompt: str) -> list[int]: ...


@runtime_checkable
class Templated(Protocol):
    """Optional: an LM backend whose prompt wording a study may set (``template`` is in its identity)."""

    template: Any


@contextmanager
def no_contact() -> Iterator[None]:
    """A dry run: a backend built inside probes no server, and its HTTP clients refuse any request
    unsent. A backend whose scoring reaches outside pfr (a service, a server, a user's function)
    says so with ``calls_out = True``; a dry run never scores with it."""
    token = _NO_CONTACT.set(True)
    try:
        yield
    finally:
        _NO_CONTACT.reset(token)


def contact_allowed() -> bool:
    """False inside :func:`no_contact` (a dry run)."""
    return not _NO_CONTACT.get()


def check_known(options: Mapping[str, Any] | Iterable[str], known: Iterable[str], backend_name: str) -> None:
    """Refuse ``--model-opt`` keys a backend does not take, in one line naming the valid ones.

    Every backend calls this first, so a misspelt option never silently keeps its default.
    """
    allowed = list(known)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        listed = ", ".join(allowed) if allowed else "none"
        raise ModelError(f"unknown {backend_name} option {', '.join(unknown)} (known: {listed})")


def label_choice(scores: Scores, request: Request) -> int:
    """The option index of a label-only answer, checked against the request's options."""
    choice = scores.choice
    if choice == INVALID and scores.meta.get("invalid") is True:  # an answer that names no option (method §6.1)
        return INVALID
    if choice is None or isinstance(choice, bool) or not 0 <= choice < len(request.options):
        from pfr.errors import ModelError

        raise ModelError(
            f"backend chose option {choice!r} of {len(request.options)} options (request {request.request_id})"
        )
    return int(choice)
