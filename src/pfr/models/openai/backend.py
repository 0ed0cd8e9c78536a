"""An OpenAI-compatible server as a decision model: ``openai:MODEL@BASE_URL``.

HTTP with retries is :mod:`~pfr.models.openai.client`, the request shapes and answers
:mod:`~pfr.models.openai.protocol`; scores are built by :mod:`pfr.models.lm.letters`.

Works with any server that returns token logprobs: llama.cpp (``llama_cpp.server`` or
``llama-server``), vLLM, SGLang, Ollama, hosted APIs. ``BASE_URL`` is the API root, e.g.
``http://127.0.0.1:8081/v1``.

Endpoints (option ``endpoint``):

* ``completions`` (default): ``POST /completions`` with the rendered prompt as plain text,
  ``max_tokens=1, temperature=0, logprobs=K``; the scores come from the top-K log-probabilities
  of the first generated token.
* ``chat``: ``POST /chat/completions`` with the rendered prompt as one user message,
  ``max_tokens=1, temperature=0, logprobs=true, top_logprobs=K``; the server applies its chat
  template.

Mapping tokens to options: a returned token counts for option ``X`` when it is ``X`` after stripping
leading whitespace (and the ``▁``/``Ġ`` space markers some servers leave in), so both ``" A"`` and
``"A"`` count for ``A``. When both forms are returned, the option's log-prob is their maximum
(option ``merge=max``, the default: it equals the single-token convention of the in-process backends
whenever the conventional form is the likelier one) or the log of their summed probability
(``merge=sum``).

Censoring: an option none of whose forms is in the returned top-K is *censored*: its log-prob is at
most the K-th (lowest returned) log-prob, so that value is used as its score and
``Scores.censored`` marks it; it is never silently −inf. Raise ``top_k`` (servers cap it: OpenAI at 20
for chat, 5 for completions; llama.cpp and vLLM allow more) to censor less.

Options: those of :data:`BACKEND`, with their defaults (``max_retries``: exponential backoff from
``retry_wait`` seconds, capped at 30 s, honouring ``Retry-After``, on HTTP 429, 5xx, timeouts and
dropped connections; ``params``: a server cannot be asked for the parameter count). Under
``decide=generate|choice`` the factory returns :class:`~pfr.models.openai.text.OpenAIText`, which
completes text, and the registry wraps it (:mod:`pfr.models.generating`).

The API key is sent only in the ``Authorization`` header: it is never part of the identity, the
store, a report or an error message (error text is scrubbed of it), nor are the base URL's user info
and query values (``openai:MODEL@env:VAR`` reads the whole base URL from a variable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores, contact_allowed
from pfr.models.declaration import Declaration, Option
from pfr.models.http.client import Awaited, in_flight, one_line, safe_url, url_from_env, url_hash
from pfr.models.lm.letters import MERGES, SymbolTokens, exact_scores, topk_text_scores
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, render
from pfr.models.openai import protocol
from pfr.models.openai.client import Client
from pfr.models.openai.protocol import ENDPOINTS
from pfr.models.openai.text import CHOICE_MAX_TOKENS, CONCURRENCY, OpenAIText
from pfr.models.options import NAME, PARAMS
from pfr.options import Number

SCORINGS = ("auto", "exact", "top_k")
#: requests in flight by default against a server that takes logprob_token_ids (vLLM, SGLang): continuous
#: batching schedules them together; 8 otherwise (llama.cpp's server runs one slot at a time by default).
EXACT_CONCURRENCY = 32
#: servers (``owned_by`` in ``GET /models``) asked whether they take ``logprob_token_ids`` under scoring=auto.
CONTINUOUS_BATCHING = frozenset({"vllm", "sglang"})
#: top-K (token text, log-prob) → option scores with censoring; the shared rule of :mod:`pfr.models.lm.letters`.
symbol_scores = topk_text_scores


def parse_spec(rest: str) -> tuple[str, str]:
    """``MODEL@BASE_URL`` → (model, base_url); the URL starts at the last ``@http``, or is read from
    the environment variable of ``MODEL@env:VAR`` (never recorded)."""
    at = rest.rfind("@env:")
    if at >= 0:
        model, url = rest[:at], url_from_env(rest[at + 1 :], f"openai:{rest[:at]}@")
    else:
        at = rest.rfind("@http")
        model, url = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", "")
    if not model or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ModelError(
            f"openai model spec must be openai:MODEL@BASE_URL or openai:MODEL@env:VAR (e.g. "
            f"openai:smollm2@http://127.0.0.1:8081/v1), got 'openai:{one_line(safe_spec(rest), 80)}'"
        )
    return model, url.rstrip("/")


def safe_spec(rest: str) -> str:
    """``MODEL@BASE_URL`` with the URL as ``safe_url`` shows it."""
    at = rest.rfind("@http")
    return f"{rest[:at]}@{safe_url(rest[at + 1 :])}" if at >= 0 else rest


class OpenAIBackend:
    """Scores requests through an OpenAI-compatible HTTP API (see the module docstring)."""

    calls_out = True  # a dry run never scores with it (pfr.models.base.no_contact)

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        endpoint: str = "completions",
        top_k: int = 20,
        merge: str = "max",
        scoring: str = "auto",
        concurrency: int | None = None,
        params: int | None = None,
        family: str | None = None,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        timeout: float = 120.0,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 1.0,
        template: PromptTemplate = DEFAULT_TEMPLATE,
        name: str | None = None,
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ModelError(f"model option endpoint={endpoint!r}: use {' or '.join(ENDPOINTS)}")
        if merge not in MERGES:
            raise ModelError(f"model option merge={merge!r}: use {' or '.join(MERGES)}")
        if scoring not in SCORINGS:
            raise ModelError(f"model option scoring={scoring!r}: use {', '.join(SCORINGS)}")
        self.model, self.name = model, name
        self.base_url = base_url.rstrip("/")
        self.endpoint = endpoint
        self.top_k = top_k
        self.merge = merge
        self.params = params
        self.family = family
        self.template = template
        self._temperature = temperature
        key = os.environ.get(api_key_env) or None
        self.client = Client(self.base_url, key, timeout=timeout, pool=max(concurrency or 0, EXACT_CONCURRENCY),
                             max_retries=max_retries, retry_wait=retry_wait)  # fmt: skip
        self.url = self.client.url
        self.owned_by = self.client.owned_by()
        self._symbols = SymbolTokens(self._tokenize, model, hint="use fewer options or another answer cue")
        batching = bool(self.owned_by & CONTINUOUS_BATCHING)
        #: a dry run asks no server, so under scoring=auto it cannot know which identity a run would have
        self.identity_known = contact_allowed() or scoring != "auto"
        self.exact = scoring == "exact" or (scoring == "auto" and batching and self._takes_token_ids())
        if scoring == "exact" and contact_allowed() and not self._takes_token_ids():
            raise ModelError(
                f"server at {self.url} does not return logprob_token_ids (exact scores need vLLM ≥ 0.32's "
                "/tokenize and logprob_token_ids); use scoring=top_k"
            )
        #: requests in flight: a continuous-batching server (one that takes logprob_token_ids) is kept busy
        #: with more; the runner's batch is sized so the pool never runs dry between batches.
        self.concurrency = concurrency or (EXACT_CONCURRENCY if self.exact else 8)
        self.batch_size = max(16, 2 * self.concurrency)

    @property
    def identity(self) -> dict[str, Any]:
        parts = urlsplit(self.base_url)
        hidden = parts.username or parts.password or parts.query  # two keys in the URL are two settings
        return {
            "backend": "openai",
            "name": self.name or self.model,
            **({"model": self.model} if self.name else {}),
            "host": f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname,
            **({"url_hash": url_hash(self.base_url)} if hidden else {}),
            "endpoint": self.endpoint,
            **({"scoring": "exact"} if self.exact else {"top_k": self.top_k, "merge": self.merge}),
            "params": self.params,
            **({"family": self.family} if self.family else {}),
            "temperature": self._temperature,
            "template": self.template.to_dict(),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def awaited(self) -> Awaited | None:
        """The request waited on longest (a run says what it waits for when the server is slow)."""
        return self.client.retrying.awaited()

    @property
    def stats(self) -> dict[str, int]:
        """HTTP attempts made and retried since construction."""
        return self.client.stats

    def prompt(self, request: Request) -> str:
        """The text sent: the whole prompt (completions) or the user message (chat)."""
        return render(request, self.template)

    def close(self) -> None:
        self.client.close()

    # ------------------------------------------------------------------ HTTP (see protocol.py)
    def _post(self, path: str, body: dict[str, Any], request_id: str, root: bool = False) -> dict[str, Any]:
        return self.client.post(path, body, request_id, root)

    def _tokenize(self, text: str) -> list[int]:
        return protocol.tokenize(self.client, self.model, text)

    def _takes_token_ids(self) -> bool:
        return protocol.takes_token_ids(self.client, self.model)

    def _top_logprobs(self, data: dict[str, Any], request_id: str) -> list[tuple[str, float]]:
        return protocol.top_logprobs(data, self.endpoint, self.url, request_id)

    # ------------------------------------------------------------------ scoring
    def _exact_one(self, request: Request) -> Scores:
        """Exact symbol log-probs: the symbol ids by the shared rule (server tokenizer), asked for by id."""
        text = self.prompt(request)
        rid = request.request_id
        after = text if self.endpoint == "completions" else protocol.chat_tail(self.client, self.model, text, rid)
        ids = self._symbols.ids(after, (o.symbol for o in request.options), rid)
        path, body = protocol.exact_request(self.model, text, self.endpoint, ids)
        data = self._post(path, body, rid)
        got = protocol.token_id_logprobs(data, self.endpoint)
        missing = [t for t in ids if t not in got]
        if missing:
            raise ModelError(f"server at {self.url} returned no log-prob for token(s) {missing} of request {rid}")
        return exact_scores(got, ids, protocol.usage_meta(data, cached=True))

    def _score_one(self, request: Request) -> Scores:
        if self.exact:
            return self._exact_one(request)
        path, body = protocol.topk_request(self.model, self.prompt(request), self.endpoint, self.top_k)
        data = self._post(path, body, request.request_id)
        top = self._top_logprobs(data, request.request_id)
        try:
            return symbol_scores(top, [o.symbol for o in request.options], self.merge, protocol.usage_meta(data))
        except ValueError:
            raise ModelError(
                f"server at {self.url} returned no finite logprobs for request {request.request_id}"
            ) from None

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        # Sent in prompt order so that servers with a prefix cache see long shared prefixes back to back.
        order = sorted(range(len(requests)), key=lambda i: self.prompt(requests[i]))
        scored = in_flight(self._score_one, [requests[i] for i in order], self.concurrency)
        out: list[Scores | None] = [None] * len(requests)
        for i, s in zip(order, scored):
            out[i] = s
        return [s for s in out if s is not None]


def from_spec(rest: str, opts: Mapping[str, Any]) -> OpenAIBackend | OpenAIText:
    """``openai:MODEL@BASE_URL`` with the options of :data:`BACKEND`, parsed: the scoring backend, or under
    ``decide=generate|choice`` the text engine the registry wraps."""
    model, url = parse_spec(rest)
    shared = {k: opts[k] for k in ("endpoint", "params", "family", "max_retries", "retry_wait", "timeout",
                                   "api_key_env")}  # fmt: skip
    name = opts["name"] or None
    decoding = opts["decide"]
    if decoding is not None:
        return OpenAIText(model, url, decoding.mode, concurrency=opts["concurrency"] or CONCURRENCY, name=name,
                          **shared)  # fmt: skip
    if opts["temperature"] <= 0:
        raise ModelError(f"model option temperature={opts['temperature']:g}: must be a finite number > 0")
    return OpenAIBackend(model, url, top_k=opts["top_k"], merge=opts["merge"], scoring=opts["scoring"],
                         concurrency=opts["concurrency"], temperature=opts["temperature"], name=name,
                         **shared)  # fmt: skip


_SCORES = ("scores",)  # the options that only change scores
#: the ``openai:`` backend: options, decide modes and factory (docs/backends-serving.md's table is written from it)
BACKEND = Declaration("openai", from_spec, options=(
    Option("endpoint", "completions", "`completions` or `chat`", shown="`completions`"),
    Option("top_k", 20, "K, the logprobs asked for per request", Number(whole=True, low=1), modes=_SCORES),
    Option("merge", "max", 'how `" A"` and `"A"` combine: `max` or `sum`', shown="`max`", modes=_SCORES),
    Option("scoring", "auto", "`exact` asks the server for the symbols' own log-probs (`logprob_token_ids`: vLLM ≥ "
           "0.32, SGLang), `top_k` reads the top-K with censoring; `auto` asks the server which it takes",
           shown="`auto`", modes=_SCORES),
    Option("concurrency", None, "requests in flight (a thread pool over one `httpx.Client`); a batch is sent in prompt "
           "order so prefix caches see shared prefixes back to back", Number(whole=True, low=1),
           shown=f"8 (32 with exact scoring, {CONCURRENCY} with `decide=generate\\|choice`)"),
    Option("params", None, "the model's parameter count (`135M`, `1.5B`, `7e9`): a server cannot be asked for it; in "
           "the identity", PARAMS),
    Option("family", None, "the model family, joining sizes by a line in the recall-against-size figure; in the "
           "identity", NAME),
    Option("max_retries", 5, "retries on HTTP 429, 5xx, timeouts and dropped connections", Number(whole=True, low=0)),
    Option("retry_wait", 0.5, "first backoff in seconds; doubles per retry, capped at 30 s, jittered ×[0.5, 1]; a "
           "numeric `Retry-After` header is honoured", Number(low=0.0)),
    Option("timeout", 120.0, "seconds per HTTP request", Number(low=0.001)),
    Option("api_key_env", "OPENAI_API_KEY", "the environment variable that holds the key; unset is fine for local "
           "servers", shown="`OPENAI_API_KEY`"),
    Option("temperature", 1.0, "score temperature T; the API call itself always uses temperature 0",
           Number(low=0.0), modes=_SCORES),
    Option("name", None, "what reports and checks call the setting; in the identity (the model id is kept as "
           "`model`)", shown="the model id"),
), decides=("scores", "generate", "choice"), max_tokens={"choice": CHOICE_MAX_TOKENS}, decide_help={
    "decide": "`generate`: the model writes its answer (chat models, servers without log-probabilities), read by the "
    "one parse rule; `choice`: the answer is constrained by a strict JSON schema of the option symbols; both "
    "label-only",
})  # fmt: skip
