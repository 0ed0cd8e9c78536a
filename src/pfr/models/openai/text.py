"""Text from OpenAI-compatible servers, for decisions: ``openai:MODEL@BASE_URL`` with ``--model-opt
decide=generate`` or ``decide=choice``.

For chat models and servers that return no log-probabilities, the model *generates* its answer
(temperature 0 and a fixed seed by default, both recorded in the identity) and the answer is read
by the one parse rule of :mod:`pfr.models.decide` (documented in docs/backends-serving.md), the same
on every backend: :class:`OpenAIText` completes the prompts, :class:`~pfr.models.generating.Generating`
(the registry's wrapper) turns the answers into decisions. With ``decide=choice`` the server is asked
to constrain the answer to the option symbols: ``response_format`` is a strict JSON schema whose only
documents are ``{"answer": SYMBOL}`` (:func:`~pfr.models.decide.choice_schema`; OpenAI, vLLM on both
endpoints), read by the same rule after unwrapping (a truncated object is invalid). A server that
rejects the schema, or answers with something other than a JSON object (it ignored the schema:
llama_cpp.server's completions), stops the run with one line instead of silently deciding from free
text. Results are label-only; the raw answer is kept in ``meta.raw``.

The options are the ``openai:`` declaration's (:data:`pfr.models.openai.backend.BACKEND`) that apply to
these modes; under ``decide=choice`` ``max_tokens`` defaults to :data:`CHOICE_MAX_TOKENS`. Requests and
answers have the shapes of :mod:`pfr.models.openai.protocol`, sent by its client, as the scoring
backend sends them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pfr.errors import ModelError
from pfr.models.decide import choice_schema
from pfr.models.http.client import Awaited, in_flight, url_identity
from pfr.models.openai import protocol
from pfr.models.openai.client import Client
from pfr.models.openai.protocol import ENDPOINTS

#: ``max_tokens`` of ``decide=choice`` unless given: ``{"answer": "B"}`` with the white space a server's
#: grammar allows between its parts takes more than ``generate``'s 8 tokens
CHOICE_MAX_TOKENS = 24
#: requests in flight unless ``concurrency`` says otherwise
CONCURRENCY = 4
#: what a server that rejects the constrained request is told (llama_cpp.server takes no json_schema)
CHOICE_HINT = "decide=choice sends response_format json_schema, which this server does not take; use decide=generate"


class OpenAIText:
    """An OpenAI-compatible server that completes prompts (a :class:`~pfr.models.generating.TextEngine`,
    with ``choose`` for ``decide=choice``); ``mode`` names the setting (``MODEL [MODE]`` unless ``name``)."""

    calls_out = True  # a dry run never scores with it (pfr.models.base.no_contact)

    def __init__(
        self,
        model: str,
        base_url: str,
        mode: str,
        *,
        endpoint: str = "completions",
        concurrency: int = CONCURRENCY,
        timeout: float = 120.0,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        api_key_env: str = "OPENAI_API_KEY",
        params: int | None = None,
        family: str | None = None,
        name: str | None = None,
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ModelError(f"model option endpoint={endpoint!r}: use {' or '.join(ENDPOINTS)}")
        self.model, self.endpoint, self.mode = model, endpoint, mode
        self.concurrency, self.params, self.family, self.name = concurrency, params, family, name
        self.batch_size = 2 * concurrency
        key = os.environ.get(api_key_env) or None
        self.client = Client(base_url, key, timeout=timeout, pool=concurrency, max_retries=max_retries,
                             retry_wait=retry_wait)  # fmt: skip
        self.client.owned_by()  # one line at once when nothing answers at the URL

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "name": self.name or f"{self.model} [{self.mode}]",
            "model": self.model,
            **url_identity(self.client.base_url),
            "endpoint": self.endpoint,
            **({"params": self.params} if self.params is not None else {}),
            **({"family": self.family} if self.family else {}),
        }

    def close(self) -> None:
        self.client.close()

    def awaited(self) -> Awaited | None:
        """The request waited on longest (a run says what it waits for when the server is slow)."""
        return self.client.retrying.awaited()

    def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[str]:
        """Each prompt's answer, greedy (by default) with the recorded seed, ``concurrency`` in flight."""
        fields = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        return in_flight(lambda p: self._one(p, fields), list(prompts), self.concurrency)

    def choose(self, prompts: Sequence[str], symbols: Sequence[Sequence[str]], max_tokens: int, seed: int,
               temperature: float) -> list[str]:  # fmt: skip
        """Each prompt's answer under the strict JSON schema of its symbols (``decide=choice``)."""
        asks = []
        for p, allowed in zip(prompts, symbols):
            schema = {"name": "decision", "strict": True, "schema": choice_schema(allowed)}
            fields = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                      "response_format": {"type": "json_schema", "json_schema": schema}}  # fmt: skip
            asks.append((p, fields))
        return in_flight(lambda ask: self._one(*ask), asks, self.concurrency)

    def _one(self, prompt: str, fields: dict[str, Any]) -> str:
        rid = str(getattr(prompt, "request_id", "?"))
        path, body = protocol.request(self.model, str(prompt), self.endpoint, **fields)
        choice = "response_format" in fields
        try:
            data = self.client.post(path, body, rid)
        except ModelError as exc:
            if choice and any(w in str(exc) for w in ("rejected request", "json_schema", "response_format")):
                raise ModelError(f"{exc} ({CHOICE_HINT})") from None
            raise
        raw = protocol.answer_text(data, self.endpoint)
        if raw is None:
            where = "message.content" if self.endpoint == "chat" else "text"
            raise ModelError(f"server at {self.client.url} answered request {rid} without "
                             f"choices[0].{where}: {self.client.scrub(str(data))}")  # fmt: skip
        if choice and not raw.lstrip().startswith("{"):  # unconstrained: decide=choice must not become generate
            said = self.client.scrub(raw)
            raise ModelError(f"server at {self.client.url} ignored response_format json_schema for request "
                             f"{rid} (it answered {said!r}); use decide=generate")  # fmt: skip
        return raw


__all__ = ["CHOICE_HINT", "CHOICE_MAX_TOKENS", "CONCURRENCY", "OpenAIText"]
