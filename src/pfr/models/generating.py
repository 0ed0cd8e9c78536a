"""Decisions from text an engine writes (``decide=generate``) or from output it constrains to one option
symbol (``decide=choice``), read by the one parse rule (:func:`pfr.models.decide.decision`).

:class:`Generating` is the one wrapper: it asks its engine for one answer per request and turns each
into a label-only decision with the raw answer in ``meta.raw``. Any engine that completes text
(:class:`TextEngine`: a plug-in, a declared built-in backend) gets it from the registry when its
declaration offers ``generate`` (:mod:`pfr.models.declaration`). :class:`GeneratingLM` is the same
wrapper over the in-process letter-scoring LMs (``hf:``, ``llamacpp:``), which complete token ids:

The model continues **exactly the prompt the scoring path scores** (:meth:`LetterLM.prompt`, the chat
template as configured, tokenized by :meth:`LetterLM.encode`), for at most ``max_tokens`` new tokens,
greedily at ``gen_temperature=0`` (the default) or sampled with ``seed``. The engine writes text
(:meth:`LetterLM.complete`); :func:`pfr.models.decide.decision` reads it by the one parse rule every
backend shares, so the result is label-only with the raw answer in ``meta.raw``.

Each request's answer must not depend on the batch it comes in or on the order of the requests: an
engine that runs a batch together (``complete_many``: ``hf:`` computes a shared prefix once,
:mod:`pfr.models.hf.decoding`) gives each request the answer it gives alone; the others complete one
request at a time. Each request has a sampling seed of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.decide import Decoding, decision, symbols
from pfr.models.lm.core import LetterLM
from pfr.models.lm.letters import check_context
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, render

__all__ = ["ChoiceEngine", "Completion", "Generating", "GeneratingLM", "Prompt", "TextEngine"]


class Prompt(str):
    """A prompt as an engine receives it: the text itself (a ``str``), and ``request_id``, the request
    it words, for an engine's messages that name the request (a prompt too long, a server's error)."""

    request_id: str

    def __new__(cls, text: str, request_id: str) -> Prompt:
        self = super().__new__(cls, text)
        self.request_id = request_id
        return self


class Completion(NamedTuple):
    """An answer with what the engine counted while writing it (``prompt_tokens``, ``cached_tokens``):
    ``meta`` is kept in the result's ``meta`` after the parse rule's keys."""

    text: str
    meta: dict[str, Any]


@runtime_checkable
class TextEngine(Protocol):
    """An engine that writes text: one completion per prompt, at most ``max_tokens`` tokens, greedy at
    ``temperature=0`` or sampled with ``seed``. A prompt's completion must not depend on the other
    prompts of the call (batch independence, :func:`pfr.testing.check_backend`). Each prompt is a
    :class:`Prompt`; an answer is a ``str`` or a :class:`Completion`.

    Optional members: ``identity`` (a dict of what changes its answers: weights, settings; a ``name``
    or ``backend`` in it is kept as it is, else the wrapper names it ``PREFIX``, ``REST [MODE]``),
    ``batch_size`` (prompts per call, default 16), ``close()``, ``choose`` (:class:`ChoiceEngine`) for
    ``choice``; ``prompt(request)``, ``template`` and ``temperature`` for an engine that words its own
    prompts (a chat template) and records them; ``encode``, ``calls_out`` and ``awaited`` as a
    :class:`~pfr.models.base.Backend` has them (the wrapper shows them as its own).
    """

    def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[str]: ...


@runtime_checkable
class ChoiceEngine(Protocol):
    """An engine that can constrain its output to one of the given symbols per prompt (``decide=choice``)."""

    def choose(
        self, prompts: Sequence[str], symbols: Sequence[Sequence[str]], max_tokens: int, seed: int, temperature: float
    ) -> list[str]: ...


#: the engine's members a :class:`Generating` shows as its own where the engine has them
_FORWARDED = ("encode", "calls_out", "awaited")


class Generating:
    """A backend whose decisions are an engine's answers, read by :func:`~pfr.models.decide.decision`.

    The prompt is the engine's own (``prompt(request)``) or the request rendered by ``template`` (the
    engine's where it has one; a study may set it; it is in the identity). The identity is the
    engine's own ``identity`` under ``backend`` and ``name`` with ``[generate]`` or ``[choice]`` after
    it (unless the engine names itself), the ``temperature`` and ``template``, and
    :attr:`Decoding.identity`: generated answers never mix with scores in a store.
    """

    def __init__(self, engine: Any, decoding: Decoding, *, backend: str = "", name: str = "") -> None:
        self.engine = engine
        self.decoding = decoding
        self.backend, self.name = backend, name
        self._template = DEFAULT_TEMPLATE
        self.batch_size = int(getattr(engine, "batch_size", 16))
        for member in _FORWARDED:
            if hasattr(engine, member):
                setattr(self, member, getattr(engine, member))

    @property
    def template(self) -> PromptTemplate:
        """The wording of the prompt; a study's ``[template]`` set here is rendered and recorded."""
        return self.engine.template if hasattr(self.engine, "template") else self._template

    @template.setter
    def template(self, value: PromptTemplate) -> None:
        if hasattr(self.engine, "template"):
            self.engine.template = value
        else:
            self._template = value

    @property
    def temperature(self) -> float:
        """The engine's score temperature where it has one (it names the setting), else 1: no scores to scale."""
        return float(getattr(self.engine, "temperature", 1.0))

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "name": f"{self.name} [{self.decoding.mode}]",
            **dict(getattr(self.engine, "identity", {}) or {}),
            "temperature": self.temperature,
            "template": self.template.to_dict(),
            **self.decoding.identity,
        }

    def prompt(self, request: Request) -> str:
        own = getattr(self.engine, "prompt", None)
        return str(own(request)) if callable(own) else render(request, self.template)

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if callable(close):
            close()

    def answers(self, requests: Sequence[Request]) -> Sequence[str | Completion]:
        """The engine's raw answer per request, every prompt built before it runs."""
        prompts = [Prompt(self.prompt(r), r.request_id) for r in requests]
        d = self.decoding
        if d.mode == "choice":
            texts = self.engine.choose(prompts, [symbols(r) for r in requests], d.max_tokens, d.seed, d.temperature)
        else:
            texts = self.engine.complete(prompts, d.max_tokens, d.seed, d.temperature)
        if not isinstance(texts, list) or len(texts) != len(prompts):
            got = f"{len(texts)} answers" if isinstance(texts, list) else type(texts).__name__
            raise ModelError(
                f"{self.backend}: the engine must return one answer per prompt ({len(prompts)}), got {got}"
            )
        return texts

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        out = []
        for answer, r in zip(self.answers(requests), requests):
            counted = answer.meta if isinstance(answer, Completion) else {}
            s = decision(answer.text if isinstance(answer, Completion) else answer, r, self.decoding.mode)
            out.append(Scores((), meta={**s.meta, **counted}, choice=s.choice) if counted else s)
        return out


class GeneratingLM(Generating):
    """:class:`Generating` over a :class:`LetterLM`, which completes the scoring prompt's token ids
    (its prompt, template, temperature, ``encode`` and ``close`` are the LM's, as for any engine).

    The identity is the scoring identity plus :attr:`Decoding.identity`, with ``[generate]`` or
    ``[choice]`` after the name: generated answers never mix with scores in a store or a report.
    """

    def __init__(self, lm: LetterLM, decoding: Decoding) -> None:
        super().__init__(lm, decoding, backend=lm.kind, name=lm.name)
        self.lm = lm

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.lm.identity, "name": f"{self.lm.name} [{self.decoding.mode}]", **self.decoding.identity}

    def answers(self, requests: Sequence[Request]) -> list[str]:
        lm = self.lm
        encoded = []
        for r in requests:  # every prompt checked before the engine spends time on any
            tokens = lm.encode(lm.prompt(r))
            check_context(len(tokens), lm.context_limit, lm.name, r.request_id, lm.context_hint, lm.context_label)
            encoded.append(tokens)
        many = getattr(lm, "complete_many", None)
        if callable(many):  # the engine runs the batch together (shared prefixes once)
            return list(many(encoded, list(requests), self.decoding))
        return [lm.complete(tokens, r, self.decoding) for tokens, r in zip(encoded, requests)]
