"""Reading a decision model's answer: a label-only choice, or one number per option.

Shared by the ``http:`` backend (an answer found at a dotted path in a JSON response) and by
``python:`` models (the value a function returns), so both read answers by one rule:

* a **string** is an option's label (exact, then ignoring case and surrounding space) or its
  symbol — a *label-only* answer;
* an **integer** is a 0-based option index — label-only;
* a **list** of numbers holds one number per option, in option order;
* an **object** maps option labels or symbols to numbers; every option must be present.

Numbers are read as ``numbers``: ``logprob`` (log-probabilities, each ≤ 0), ``prob`` (probabilities
in [0, 1], stored as their logs) or ``logit`` (any log-scores; the harness normalises them). A label-only answer
carries no scores at all: it is stored as a choice, never as made-up one-hot scores.

A string that names no option, or an index out of range, is the model's answer all the same: an
**invalid** one (choice ``-1``, ``meta.invalid``, the value in ``meta.raw``, ``meta.parse`` one of
:data:`UNKNOWN`), so a service that sometimes answers outside the options can still be evaluated.
Under ``strict`` it is an error instead. A malformed answer (a missing path, a wrong type, NaN, a
wrong number of scores) is always an error: it says nothing about the model's decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pfr.design.types import Request
from pfr.models.base import Scores

NUMBERS = ("logprob", "prob", "logit")
#: ``meta.parse`` of an invalid label-only answer: a string that names no option, an index out of range
UNKNOWN = ("unknown-label", "out-of-range")

#: how far above 0 a log-probability may be (rounding in the service's float formatting)
LOGPROB_SLACK = 1e-6


class AnswerError(ValueError):
    """An answer that cannot be read; the message says why in a few words (the caller adds where)."""


class UnknownAnswer(AnswerError):
    """A well-formed label-only answer that names no option: ``reason`` is one of :data:`UNKNOWN`."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def at_path(data: Any, path: str) -> Any:
    """The value at dotted ``path`` (``decision.label``, ``choices.0.probs``); ``.`` is ``data`` itself.

    A part that is a number indexes a list. Raises :class:`AnswerError` naming the first missing part.
    """
    if path in ("", "."):
        return data
    cur = data
    walked: list[str] = []
    for part in path.split("."):
        walked.append(part)
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise AnswerError(f"no {'.'.join(walked)!r} in the answer")
    return cur


def option_index(value: str, request: Request) -> int:
    """The option a label or symbol names: exact label, exact symbol, then label ignoring case."""
    for i, o in enumerate(request.options):
        if o.label == value:
            return i
    for i, o in enumerate(request.options):
        if o.symbol == value:
            return i
    folded = value.strip().casefold()
    for i, o in enumerate(request.options):
        if o.label.strip().casefold() == folded:
            return i
    shown = ", ".join(repr(o.label) for o in request.options[:6]) + (", …" if len(request.options) > 6 else "")
    raise UnknownAnswer(f"{_short(value)!r} is neither the label nor the symbol of an option ({shown})", UNKNOWN[0])


def _label_choice(value: str | int, request: Request) -> int:
    if isinstance(value, str):
        return option_index(value, request)
    if not 0 <= value < len(request.options):
        n = len(request.options)
        raise UnknownAnswer(f"option index {value} is out of range for {n} options (0-based)", UNKNOWN[1])
    return value


def _number(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise AnswerError(f"{what} is {_short(repr(x))}, not a number")
    v = float(x)
    if math.isnan(v):
        raise AnswerError(f"{what} is NaN")
    return v


def _as_log(values: Sequence[float], numbers: str) -> tuple[float, ...]:
    if numbers == "logprob":  # a positive one is a logit or a probability's misreading: never renormalised away
        for v in values:
            if v > LOGPROB_SLACK:
                raise AnswerError(f"log-probability {v!r} is above 0 (numbers=logprob); for log-scores use "
                                  "numbers=logit, for probabilities numbers=prob")  # fmt: skip
    if numbers != "prob":
        return tuple(values)
    for v in values:
        if not 0.0 <= v <= 1.0:
            raise AnswerError(f"probability {v!r} is outside [0, 1] (numbers=prob)")
    return tuple(math.log(v) if v > 0 else -math.inf for v in values)


def read_answer(
    value: Any, request: Request, numbers: str | None, meta: dict[str, Any] | None = None, *, strict: bool = False
) -> Scores:
    """``value`` as the :class:`Scores` of ``request`` (see the module docstring).

    ``numbers`` may be ``None`` when only label-only answers are expected: numbers then are an
    error that asks for ``numbers=``, so that probabilities are never read as log-scores by accident.
    An answer naming no option is an invalid answer, or under ``strict`` an :class:`UnknownAnswer`.
    """
    meta = dict(meta or {})
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return Scores((), meta=meta, choice=_label_choice(value, request))
        except UnknownAnswer as exc:
            if strict:
                raise
            return Scores((), meta={**meta, "raw": value, "invalid": True, "parse": exc.reason}, choice=-1)
    if isinstance(value, (list, tuple, Mapping)):
        if numbers is None:
            raise AnswerError("the answer holds numbers; say how to read them with numbers=logprob|prob|logit")
        n = len(request.options)
        if isinstance(value, Mapping):
            keyed = {str(k): v for k, v in value.items()}
            raw = []
            for o in request.options:
                key = o.label if o.label in keyed else o.symbol
                if key not in keyed:
                    raise AnswerError(f"the scores have no entry for option {o.symbol} {o.label!r}")
                raw.append(_number(keyed[key], f"the score of {o.label!r}"))
        else:
            if len(value) != n:
                raise AnswerError(f"{len(value)} numbers for {n} options")
            raw = [_number(x, f"number {i}") for i, x in enumerate(value)]
        return Scores(_as_log(raw, numbers), meta=meta)
    raise AnswerError(f"the answer is {_short(repr(value))}: not a label, a symbol, an index, a list or an object")


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
