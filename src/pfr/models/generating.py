"""In-process LMs that decide from text they generate (``decide=generate``) or from output their engine
constrains to one option symbol (``decide=choice``): ``hf:`` and ``llamacpp:``.

The model continues **exactly the prompt the scoring path scores** (:meth:`LetterLM.prompt`, the chat
template as configured, tokenized by :meth:`LetterLM.encode`), for at most ``max_tokens`` new tokens,
greedily at ``gen_temperature=0`` (the default) or sampled with ``seed``. The engine writes text
(:meth:`LetterLM.complete`); :func:`pfr.models.decide.decision` reads it by the one parse rule every
backend shares, so the result is label-only with the raw answer in ``meta.raw``.

Each request is generated on its own from a fresh engine state (no batch padding, no cache left by
an earlier request) and a sampling seed of its own: its answer does not depend on the batch it
comes in or on the order of the requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pfr.design.types import Request
from pfr.models.base import Scores
from pfr.models.decide import Decoding, decision
from pfr.models.letters import check_context
from pfr.models.lm import LetterLM
from pfr.models.prompt import PromptTemplate

__all__ = ["GeneratingLM"]


class GeneratingLM:
    """A :class:`LetterLM` whose generated (or constrained) answer is the decision (module docstring).

    The identity is the scoring identity plus :attr:`Decoding.identity`, with ``[generate]`` or
    ``[choice]`` after the name: generated answers never mix with scores in a store or a report.
    """

    def __init__(self, lm: LetterLM, decoding: Decoding) -> None:
        self.lm = lm
        self.decoding = decoding
        self.batch_size = lm.batch_size

    @property
    def template(self) -> PromptTemplate:
        """The wrapped LM's template: a study's ``[template]`` set here is the one it renders and records."""
        return self.lm.template

    @template.setter
    def template(self, value: PromptTemplate) -> None:
        self.lm.template = value

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.lm.identity, "name": f"{self.lm.name} [{self.decoding.mode}]", **self.decoding.identity}

    @property
    def temperature(self) -> float:
        return self.lm.temperature  # no scores to scale; kept so the identity reads as the scoring one

    def prompt(self, request: Request) -> str:
        return self.lm.prompt(request)

    def encode(self, prompt: str) -> list[int]:
        return self.lm.encode(prompt)

    def close(self) -> None:
        self.lm.close()

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        lm = self.lm
        encoded = []
        for r in requests:  # every prompt checked before the engine spends time on any
            tokens = lm.encode(lm.prompt(r))
            check_context(len(tokens), lm.context_limit, lm.name, r.request_id, lm.context_hint, lm.context_label)
            encoded.append(tokens)
        return [
            decision(lm.complete(tokens, r, self.decoding), r, self.decoding.mode)
            for tokens, r in zip(encoded, requests)
        ]
