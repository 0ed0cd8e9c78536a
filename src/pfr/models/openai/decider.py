"""Generated and constrained decisions on OpenAI-compatible servers: ``openai:MODEL@BASE_URL`` with
``--model-opt decide=generate`` or ``decide=choice``.

For chat models and servers that return no log-probabilities, the model *generates* its answer
(temperature 0 and a fixed seed by default, both recorded in the identity) and the answer is read
by the one parse rule of :mod:`pfr.models.decide` (documented in docs/backends-serving.md), the same
on every backend. With ``decide=choice`` the server is asked to constrain the answer to the option
symbols: ``response_format`` is a strict JSON schema whose only documents are ``{"answer": SYMBOL}``
(:func:`~pfr.models.decide.choice_schema`; OpenAI, vLLM on both endpoints), read by the same rule
after unwrapping (a truncated object is invalid). A server that rejects the schema, or answers with
something other than a JSON object (it ignored the schema: llama_cpp.server's completions), stops the
run with one line instead of silently deciding from free text. Results are label-only; the raw answer
is kept in ``meta.raw``.

Options (besides the ``openai:`` ones that apply: ``endpoint``, ``concurrency``, ``max_retries``,
``retry_wait``, ``timeout``, ``api_key_env``, ``params``, ``family``): ``max_tokens`` (default 8),
``seed`` (default 0), ``gen_temperature`` (default 0) and ``name`` (what reports call the setting);
under ``decide=choice`` ``max_tokens`` defaults to :data:`CHOICE_MAX_TOKENS`. Requests and answers have the shapes of
:mod:`pfr.models.openai.protocol`, sent by its client, as the scoring backend sends them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores, check_known
from pfr.models.decide import Decoding, choice_schema, decision, decoding_from
from pfr.models.http.client import Awaited, in_flight, url_identity
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, render
from pfr.models.openai import protocol
from pfr.models.openai.backend import parse_spec
from pfr.models.openai.client import Client
from pfr.models.openai.protocol import ENDPOINTS
from pfr.models.options import family, model_option, param_count

OPTIONS = ("decide", "endpoint", "concurrency", "max_retries", "retry_wait", "timeout", "api_key_env", "params",
           "family", "max_tokens", "seed", "gen_temperature", "name")  # fmt: skip
#: ``max_tokens`` of ``decide=choice`` unless given: ``{"answer": "B"}`` with the white space a server's
#: grammar allows between its parts takes more than ``generate``'s 8 tokens
CHOICE_MAX_TOKENS = 24
#: what a server that rejects the constrained request is told (llama_cpp.server takes no json_schema)
CHOICE_HINT = "decide=choice sends response_format json_schema, which this server does not take; use decide=generate"


class GenerateDecider:
    """An OpenAI-compatible server whose generated (or constrained) answer is the decision (module docstring)."""

    calls_out = True  # a dry run never scores with it (pfr.models.base.no_contact)

    def __init__(
        self,
        model: str,
        base_url: str,
        decoding: Decoding,
        *,
        endpoint: str = "completions",
        concurrency: int = 4,
        timeout: float = 120.0,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        api_key_env: str = "OPENAI_API_KEY",
        params: int | None = None,
        family: str | None = None,
        template: PromptTemplate = DEFAULT_TEMPLATE,
        name: str | None = None,
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ModelError(f"model option endpoint={endpoint!r}: use {' or '.join(ENDPOINTS)}")
        self.model, self.endpoint, self.decoding = model, endpoint, decoding
        self.concurrency, self.params, self.family = concurrency, params, family
        self.template, self.name = template, name
        self.batch_size = 2 * concurrency
        key = os.environ.get(api_key_env) or None
        self.client = Client(base_url, key, timeout=timeout, pool=concurrency, max_retries=max_retries,
                             retry_wait=retry_wait)  # fmt: skip
        self.client.owned_by()  # one line at once when nothing answers at the URL

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "name": self.name or f"{self.model} [{self.decoding.mode}]",
            "model": self.model,
            **url_identity(self.client.base_url),
            "endpoint": self.endpoint,
            **self.decoding.identity,
            "temperature": self.temperature,
            "template": self.template.to_dict(),
            **({"params": self.params} if self.params is not None else {}),
            **({"family": self.family} if self.family else {}),
        }

    @property
    def temperature(self) -> float:
        return 1.0  # no scores to scale

    def prompt(self, request: Request) -> str:
        return render(request, self.template)

    def close(self) -> None:
        self.client.close()

    def awaited(self) -> Awaited | None:
        """The request waited on longest (a run says what it waits for when the server is slow)."""
        return self.client.retrying.awaited()

    def fields(self, request: Request) -> dict[str, Any]:
        """What a request asks for besides its prompt: greedy (by default) sampling with the recorded seed,
        and under ``decide=choice`` the strict JSON schema of this request's symbols."""
        d = self.decoding
        out: dict[str, Any] = {"max_tokens": d.max_tokens, "temperature": d.temperature, "seed": d.seed}
        if d.mode == "choice":
            schema = {"name": "decision", "strict": True, "schema": choice_schema(request)}
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        return out

    def _one(self, request: Request) -> Scores:
        path, body = protocol.request(self.model, self.prompt(request), self.endpoint, **self.fields(request))
        choice = self.decoding.mode == "choice"
        try:
            data = self.client.post(path, body, request.request_id)
        except ModelError as exc:
            if choice and any(w in str(exc) for w in ("rejected request", "json_schema", "response_format")):
                raise ModelError(f"{exc} ({CHOICE_HINT})") from None
            raise
        raw = protocol.answer_text(data, self.endpoint)
        if raw is None:
            where = "message.content" if self.endpoint == "chat" else "text"
            raise ModelError(f"server at {self.client.url} answered request {request.request_id} without "
                             f"choices[0].{where}: {self.client.scrub(str(data))}")  # fmt: skip
        if choice and not raw.lstrip().startswith("{"):  # unconstrained: decide=choice must not become generate
            said = self.client.scrub(raw)
            raise ModelError(f"server at {self.client.url} ignored response_format json_schema for request "
                             f"{request.request_id} (it answered {said!r}); use decide=generate")  # fmt: skip
        return decision(raw, request, self.decoding.mode)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return in_flight(self._one, list(requests), self.concurrency)


def from_openai_spec(rest: str, opts: Mapping[str, str]) -> GenerateDecider:
    """``openai:MODEL@BASE_URL`` with ``decide=generate`` or ``decide=choice`` (options in the module docstring)."""
    from pfr.options import Number

    mode = opts.get("decide")
    check_known(opts, OPTIONS, f"openai (decide={mode})")
    decoding = decoding_from(opts, "openai:", ("generate", "choice"))
    if decoding is None:
        raise ModelError(f"model option decide={mode!r}: from_openai_spec builds decide=generate or choice")
    if decoding.mode == "choice" and "max_tokens" not in opts:  # room for the whole JSON object
        decoding = replace(decoding, max_tokens=CHOICE_MAX_TOKENS)
    model, url = parse_spec(rest)
    return GenerateDecider(
        model,
        url,
        decoding,
        endpoint=opts.get("endpoint", "completions"),
        concurrency=model_option(opts, "concurrency", Number(whole=True, low=1), 4),
        timeout=model_option(opts, "timeout", Number(low=0.001), 120.0),
        max_retries=model_option(opts, "max_retries", Number(whole=True, low=0), 5),
        retry_wait=model_option(opts, "retry_wait", Number(low=0.0), 0.5),
        api_key_env=opts.get("api_key_env", "OPENAI_API_KEY"),
        params=param_count(opts),
        family=family(opts),
        name=opts.get("name") or None,
    )


__all__ = ["GenerateDecider", "from_openai_spec"]
