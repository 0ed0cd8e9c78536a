"""The rule that turns a backend's raw scores into stored log-probabilities and a decision.

It is applied to every request before anything is stored, so a report never sees a score it
cannot order. With temperature ``T`` (a finite number > 0):

* NaN anywhere: the request is refused (a :class:`~pfr.errors.ModelError` naming the model, the
  request and the option); the batch is not stored, earlier batches stay.
* ``+inf``: the options scored ``+inf`` share the probability equally (the limit of the softmax
  as their scores grow); every other option gets the floor. One ``+inf`` option is chosen with
  probability 1.
* ``-inf``: probability 0, stored at the floor ``log(1e-12)``.
* every score ``-inf``: no option is preferred; all get ``log(1/k)``.
* otherwise ``log_softmax(score / T)`` over the finite scores, floored at ``log(1e-12)`` (computed
  from differences to the highest score, so finite scores never overflow into ``+inf``).
* ties: the first option in the request's order wins (the decision is the first-in-order argmax
  of the stored log-probabilities).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pfr.errors import ModelError
from pfr.options import TEMPERATURE, parse

#: the floor of a normalised log-probability (log 1e-12), here and in reference answers (pfr.analysis.reference)
LOG_FLOOR = math.log(1e-12)


def settle(
    logits: Sequence[float], temperature: float = 1.0, *, model: str = "the model", request: str = "?"
) -> tuple[list[float], int]:
    """``(log-probabilities, decision)`` of one request's raw scores under the module's rule."""
    t = float(parse("temperature", temperature, TEMPERATURE))
    k = len(logits)
    if k == 0:
        raise ModelError(f"{model} returned no scores (request {request})")
    for i, x in enumerate(logits):
        if math.isnan(x):
            raise ModelError(f"{model} returned NaN for option {i + 1} of {k} (request {request})")
    top = [i for i, x in enumerate(logits) if x == math.inf]
    if top:
        share = 0.0 - math.log(len(top))  # 0.0, not -0.0, for a single +inf
        logprobs = [share if x == math.inf else LOG_FLOOR for x in logits]
    else:
        finite = [x for x in logits if math.isfinite(x)]
        if not finite:
            logprobs = [-math.log(k)] * k
        else:
            # differences first, then the temperature: a huge finite score never overflows into +inf
            high = max(finite)
            diff = [(x - high) / t if math.isfinite(x) else -math.inf for x in logits]
            lse = math.log(sum(math.exp(d) for d in diff))
            logprobs = [max(d - lse, LOG_FLOOR) for d in diff]
    return logprobs, first_argmax(logprobs)


def model_label(identity: dict[str, Any]) -> str:
    """``python model FILE:FUNC``, ``hf model ID``…: how an error names the model from its identity."""
    if identity.get("backend") == "python":
        return f"python model {identity.get('target')}:{identity.get('function')}"
    name = next((identity[k] for k in ("name", "model", "model_id", "path", "kind") if identity.get(k)), "")
    return f"{identity.get('backend', 'the')} model {name}".rstrip()


def first_argmax(values: Sequence[float]) -> int:
    """The index of the largest value; the first in order among equals."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best
