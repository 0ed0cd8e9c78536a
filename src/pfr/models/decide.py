"""How a backend decides: from its answer-letter scores (``decide=scores``, the default), from text it
generates (``decide=generate``), or from output the engine constrains to one option (``decide=choice``).

Generated and constrained answers are read by **one parse rule**, :func:`parse_answer`, the same on
every backend (docs/backends-serving.md):

1. only the first line counts; surrounding white space, quotes, ``*``, brackets are dropped;
2. an option's **symbol** alone (``B``), or followed by ``.``, ``)``, ``:`` or ``,`` (``B.``,
   ``B) HUM:ind``), or followed by white space and that option's label, names that option;
3. else an option's **label** (ignoring case and a final ``.``) names that option;
4. anything else is **invalid**: never mapped to an option. It is stored with choice ``-1`` and is no
   option (docs/method.md §6.1: wrong, never a fallback pick, never the same decision); the report
   gives its rate, ``INV``, per setting and per request kind.

A constrained answer is a JSON object ``{"answer": SYMBOL}`` (:func:`choice_schema`) or the bare
symbol (:func:`choice_grammar`); :func:`read_choice` unwraps the object before the same rule.

The raw answer is kept in each result's ``meta.raw`` (and so in ``pfr export``). Results are
label-only: a generated answer has no per-option scores. Sampling is greedy by default
(``gen_temperature=0``) with a recorded ``seed``; both, ``max_tokens`` and the rule's version are in
the identity, so changing any of them re-scores.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.options import positive

#: the parse rule's version, part of the identity: a changed rule re-scores
PARSE_RULE = 1
#: the options every generating backend takes besides its own
DECIDE_OPTIONS = ("decide", "max_tokens", "seed", "gen_temperature")
MODES = ("scores", "generate", "choice")
_STRIP = " \t\r\n\"'`*()[]"


@dataclass(frozen=True)
class Decoding:
    """How a generated decision is sampled: ``mode`` is ``generate`` or ``choice``."""

    mode: str
    max_tokens: int = 8
    seed: int = 0
    temperature: float = 0.0

    @property
    def identity(self) -> dict[str, Any]:
        """What goes into a backend's identity (a change re-scores)."""
        return {
            "decide": self.mode,
            "parse_rule": PARSE_RULE,
            "sampling": {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens},
        }


def mode_of(opts: Mapping[str, str]) -> str:
    """``decide=`` (``scores`` when absent), checked against :data:`MODES`."""
    mode = opts.get("decide", "scores")
    if mode not in MODES:
        raise ModelError(f"model option decide={mode!r}: use {', '.join(MODES)}")
    return mode


def decoding_from(opts: Mapping[str, str], backend: str, modes: Sequence[str] = ("generate",)) -> Decoding | None:
    """The :class:`Decoding` that ``opts`` ask for, or ``None`` for ``decide=scores``.

    ``modes`` are what ``backend`` can do besides scores; another mode is one line naming them.
    ``max_tokens`` or ``gen_temperature`` without ``decide=generate|choice`` is refused: it would change nothing.
    """
    mode = mode_of(opts)
    if mode == "scores":
        stray = sorted(set(opts) & {"max_tokens", "gen_temperature"})  # (``seed`` may be a backend's own option)
        if stray:
            raise ModelError(f"model option {stray[0]} needs decide=generate or decide=choice")
        return None
    if mode not in modes:
        able = f"use {' or '.join(('scores', *modes))}" if modes else "use scores (the default)"
        raise ModelError(f"model option decide={mode} is not available for {backend}: ({able})")
    seed = opts.get("seed", "0")
    if not seed.lstrip("-").isdigit():
        raise ModelError(f"model option seed={seed!r}: must be a whole number")
    try:
        temperature = float(opts.get("gen_temperature", "0"))
    except ValueError:
        raise ModelError(f"model option gen_temperature={opts['gen_temperature']!r}: must be a number") from None
    if not temperature >= 0 or temperature == float("inf"):
        raise ModelError(f"model option gen_temperature={opts['gen_temperature']!r}: must be 0 or more")
    return Decoding(mode, positive(opts, "max_tokens", int, 8), int(seed), temperature)


def parse_answer(text: str, request: Request) -> int | None:
    """The option a generated answer names, or ``None`` (invalid); the rule is in the module docstring."""
    line = text.strip().split("\n", 1)[0] if text.strip() else ""
    answer = line.strip(_STRIP)
    if not answer:
        return None
    for i, o in enumerate(request.options):
        if answer == o.symbol:
            return i
        if answer.startswith(o.symbol):
            rest = answer[len(o.symbol) :]
            if rest[0] in ".):,":
                return i
            if rest[0].isspace() and rest.strip().strip(_STRIP).rstrip(".").casefold() == o.label.casefold():
                return i
    folded = answer.rstrip(".").strip(_STRIP).casefold()
    for i, o in enumerate(request.options):
        if folded == o.label.casefold():
            return i
    return None


def read_choice(text: str) -> str:
    """A constrained answer's text: ``{"answer": "B"}`` → ``B``; anything else as it came."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        return str(data["answer"])
    return data if isinstance(data, str) else text


def decision(raw: str | None, request: Request, mode: str = "generate") -> Scores:
    """A label-only :class:`Scores` for one generated (or constrained) answer: the parsed option, or
    choice ``-1`` and ``meta.invalid`` when the rule names none; ``meta.raw`` keeps the text."""
    raw = "" if raw is None else str(raw)
    choice = parse_answer(read_choice(raw) if mode == "choice" else raw, request)
    return Scores((), meta={"raw": raw, "invalid": choice is None}, choice=-1 if choice is None else choice)


def symbols(request: Request) -> list[str]:
    """The option symbols of a request, in option order: what a constrained answer may be."""
    return [o.symbol for o in request.options]


def choice_schema(request: Request) -> dict[str, Any]:
    """A JSON schema whose only valid documents are ``{"answer": SYMBOL}`` for this request's options
    (OpenAI ``response_format``; vLLM and llama.cpp accept it too)."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": symbols(request)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def choice_grammar(request: Request) -> str:
    """A GBNF grammar (llama.cpp) whose only sentences are this request's option symbols."""
    return "root ::= " + " | ".join(json.dumps(s) for s in symbols(request))


__all__ = [
    "DECIDE_OPTIONS",
    "MODES",
    "PARSE_RULE",
    "Decoding",
    "choice_grammar",
    "choice_schema",
    "decision",
    "decoding_from",
    "mode_of",
    "parse_answer",
    "read_choice",
    "symbols",
]
