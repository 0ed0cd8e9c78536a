"""What a model is to the harness: a batch of requests in, one log-score per option out.

A backend implements :class:`Backend`. The harness turns raw log-scores into the model's
normalised log-probabilities (``log_softmax(scores / T)``, floored at ``1e-12``) and takes the
first-in-order argmax as the native decision (DESIGN §5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pfr.design.types import Request

LOG_FLOOR = math.log(1e-12)


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
    """``log_softmax(logits / T)`` with probabilities floored at 1e-12."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    scaled = [x / temperature for x in logits]
    finite = [x for x in scaled if math.isfinite(x)]
    if not finite:
        return [math.log(1.0 / len(scaled))] * len(scaled)
    top = max(finite)
    lse = top + math.log(sum(math.exp(x - top) for x in finite))
    return [max(x - lse, LOG_FLOOR) if math.isfinite(x) else LOG_FLOOR for x in scaled]


def decide(logprobs: Sequence[float]) -> int:
    """First-in-order argmax (choice order breaks ties)."""
    best = 0
    for i, v in enumerate(logprobs):
        if v > logprobs[best]:
            best = i
    return best


@runtime_checkable
class Backend(Protocol):
    """A decision model.

    ``identity`` names the model and every setting that changes its scores (path or hub id,
    revision or file hash, temperature, prompt template); the results store keys on it.
    ``prompt`` returns the exact text the model sees for a request (or ``None`` for models that
    read the request's fields directly).
    """

    @property
    def identity(self) -> dict[str, Any]: ...

    @property
    def temperature(self) -> float: ...

    def prompt(self, request: Request) -> str | None: ...

    def score(self, requests: Sequence[Request]) -> list[Scores]: ...


def label_choice(scores: Scores, request: Request) -> int:
    """The option index of a label-only answer, checked against the request's options."""
    choice = scores.choice
    if choice == -1 and scores.meta.get("invalid") is True:  # an answer that names no option
        return -1
    if choice is None or isinstance(choice, bool) or not 0 <= choice < len(request.options):
        from pfr.errors import ModelError

        raise ModelError(
            f"backend chose option {choice!r} of {len(request.options)} options (request {request.request_id})"
        )
    return int(choice)
