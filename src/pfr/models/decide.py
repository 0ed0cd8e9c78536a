"""How a backend decides: from its answer-letter scores (``decide=scores``, the default), from text it
generates (``decide=generate``), or from output the engine constrains to one option (``decide=choice``).

Generated and constrained answers are read by **one parse rule**, :func:`parse`, the same on every
backend (docs/backends-serving.md); each answer's *reason* is kept in ``meta.parse``:

1. only the first line counts; surrounding white space, quotes, ``*``, brackets are dropped;
2. an option's **symbol** alone (``B``), or followed by ``.``, ``)``, ``:`` or ``,`` (``B.``,
   ``B) whatever``), names that option (``letter``); followed by that option's label (``B) HUM:ind``,
   ``B HUM:ind``) it names it twice (``both``); followed by *another* option's label
   (``D. ENTY:utterance`` where D is Other) it names two options (``contradiction``: invalid);
3. else an option's **label** alone (ignoring case and a final ``.``) names that option (``label``);
4. anything else is ``unparseable``: invalid.

An invalid answer is never mapped to an option: it is stored with choice ``-1`` and ``meta.invalid``,
is no option (docs/method.md §6.1: wrong, never a fallback pick, never the same decision); the
report gives its rate, ``INV``, per setting and per request kind and counts the reasons in its notes.

A constrained answer is a JSON object ``{"answer": SYMBOL}`` (:func:`choice_schema`) or the bare
symbol (:func:`choice_grammar`); :func:`read_choice` unwraps the object before the same rule.

The raw answer is kept in each result's ``meta.raw`` (and so in ``pfr export``). Results are
label-only: a generated answer has no per-option scores. Sampling is greedy by default
(``gen_temperature=0``) with a recorded ``seed``; both, ``max_tokens`` and the rule's version are in
the identity, so changing any of them re-scores (version 2 made a contradiction invalid; version 1
let the letter win).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.http.answers import UNKNOWN
from pfr.models.options import positive

#: the parse rule's version, part of the identity: a changed rule re-scores
PARSE_RULE = 2
#: the reasons of :func:`parse`, in the order the report lists them, and those that are invalid
PARSES = ("letter", "label", "both", "contradiction", "unparseable")
INVALID_PARSES = frozenset({"contradiction", "unparseable"})
#: every ``meta.parse`` reason of an invalid answer, the parse rule's and ``http:``/``python:``'s
INVALID_REASONS = INVALID_PARSES | frozenset(UNKNOWN)
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


def decoding_from(
    opts: Mapping[str, str], backend: str, modes: Sequence[str] = ("generate",), max_tokens: int | None = None
) -> Decoding | None:
    """The :class:`Decoding` that ``opts`` ask for, or ``None`` for ``decide=scores``.

    ``modes`` are what ``backend`` can do besides scores; another mode is one line naming them.
    ``max_tokens`` is the backend's default for this mode where it is not :class:`Decoding`'s.
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
    tokens = positive(opts, "max_tokens", int, Decoding(mode).max_tokens if max_tokens is None else max_tokens)
    return Decoding(mode, tokens, int(seed), temperature)


@dataclass(frozen=True)
class Parsed:
    """What the parse rule read: the option (``None``: invalid) and why (one of :data:`PARSES`)."""

    choice: int | None
    reason: str


def _fold(text: str) -> str:
    return text.strip(_STRIP).rstrip(".").strip(_STRIP).casefold()


def _label_index(text: str, request: Request) -> int | None:
    folded = _fold(text)
    return next((i for i, o in enumerate(request.options) if folded == o.label.casefold()), None)


def parse(text: str, request: Request) -> Parsed:
    """The option a generated answer names and the reason; the rule is in the module docstring."""
    line = text.strip().split("\n", 1)[0] if text.strip() else ""
    answer = line.strip(_STRIP)
    if not answer:
        return Parsed(None, "unparseable")
    for i, o in enumerate(request.options):
        if answer == o.symbol:
            return Parsed(i, "letter")
        if not answer.startswith(o.symbol):
            continue
        rest = answer[len(o.symbol) :]
        punct = rest[0] in ".):,"
        if not punct and not rest[0].isspace():
            continue
        tail = rest[1:] if punct else rest
        named = _label_index(tail, request) if _fold(tail) else None
        if named is not None:
            return Parsed(i, "both") if named == i else Parsed(None, "contradiction")
        if punct:
            return Parsed(i, "letter")  # what follows names no option (a truncated label, a reason)
    named = _label_index(answer, request)
    return Parsed(None, "unparseable") if named is None else Parsed(named, "label")


def parse_answer(text: str, request: Request) -> int | None:
    """The option a generated answer names, or ``None`` (invalid): :func:`parse` without the reason."""
    return parse(text, request).choice


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
    choice ``-1`` and ``meta.invalid`` when the rule names none; ``meta.raw`` keeps the text and
    ``meta.parse`` the reason (:data:`PARSES`)."""
    raw = "" if raw is None else str(raw)
    got = parse(read_choice(raw) if mode == "choice" else raw, request)
    meta = {"raw": raw, "invalid": got.choice is None, "parse": got.reason}
    return Scores((), meta=meta, choice=-1 if got.choice is None else got.choice)


def reason_counts(metas: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many answers each ``meta.parse`` reason read (:data:`PARSES`, then :data:`UNKNOWN` of
    ``http:``/``python:``, then any other), for the report's notes; empty when no answer has one."""
    counts = Counter(str(m["parse"]) for m in metas if isinstance(m, Mapping) and m.get("parse") is not None)
    order = {r: i for i, r in enumerate((*PARSES, *UNKNOWN))}
    return {r: counts[r] for r in sorted(counts, key=lambda r: (order.get(r, len(order)), r))}


def symbols(request: Request) -> list[str]:
    """The option symbols of a request, in option order: what a constrained answer may be."""
    return [o.symbol for o in request.options]


def choice_schema(request: Request | Sequence[str]) -> dict[str, Any]:
    """A JSON schema whose only valid documents are ``{"answer": SYMBOL}`` for this request's options
    (or these symbols): OpenAI ``response_format``; vLLM and llama.cpp accept it too."""
    allowed = symbols(request) if isinstance(request, Request) else list(request)
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": allowed}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def choice_grammar(request: Request) -> str:
    """A GBNF grammar (llama.cpp) whose only sentences are this request's option symbols."""
    return "root ::= " + " | ".join(json.dumps(s) for s in symbols(request))


__all__ = [
    "DECIDE_OPTIONS",
    "INVALID_PARSES",
    "INVALID_REASONS",
    "MODES",
    "PARSES",
    "PARSE_RULE",
    "Decoding",
    "Parsed",
    "choice_grammar",
    "choice_schema",
    "decision",
    "decoding_from",
    "mode_of",
    "parse",
    "parse_answer",
    "read_choice",
    "reason_counts",
    "symbols",
]
