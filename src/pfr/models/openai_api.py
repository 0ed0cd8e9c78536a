"""An OpenAI-compatible server as a decision model: ``openai:MODEL@BASE_URL``.

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

Options: ``endpoint`` (completions|chat), ``top_k`` (default 20), ``merge`` (max|sum),
``concurrency`` (requests in flight, default 8), ``max_retries`` (default 5; exponential backoff
from ``retry_wait`` seconds, default 0.5, capped at 30 s, honouring ``Retry-After``, on HTTP 429,
5xx, timeouts and dropped connections), ``timeout`` (seconds per HTTP request, default 120),
``api_key_env`` (the environment variable holding the key, default ``OPENAI_API_KEY``; may be unset
for local servers), ``temperature`` (the score temperature T, default 1).

The API key is sent only in the ``Authorization`` header: it is never part of the identity, the
store, a report or an error message (error text is scrubbed of it).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.letters import MERGES, topk_text_scores
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, render

ENDPOINTS = ("completions", "chat")
OPTIONS = (
    "endpoint",
    "top_k",
    "merge",
    "concurrency",
    "max_retries",
    "retry_wait",
    "timeout",
    "api_key_env",
    "temperature",
)
#: top-K (token text, log-prob) → option scores with censoring; the shared rule of :mod:`pfr.models.letters`.
symbol_scores = topk_text_scores


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _safe_url(url: str) -> str:
    """The URL without user info, query or fragment: what may appear in identities and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def parse_spec(rest: str) -> tuple[str, str]:
    """``MODEL@BASE_URL`` → (model, base_url); the URL starts at the last ``@http``."""
    at = rest.rfind("@http")
    model, url = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", "")
    if not model or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ModelError(
            f"openai model spec must be openai:MODEL@BASE_URL (e.g. openai:smollm2@http://127.0.0.1:8081/v1), "
            f"got 'openai:{_one_line(rest, 80)}'"
        )
    return model, url.rstrip("/")


class OpenAIBackend:
    """Scores requests through an OpenAI-compatible HTTP API (see the module docstring)."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        endpoint: str = "completions",
        top_k: int = 20,
        merge: str = "max",
        concurrency: int = 8,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        timeout: float = 120.0,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 1.0,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ModelError(f"model option endpoint={endpoint!r}: use {' or '.join(ENDPOINTS)}")
        if merge not in MERGES:
            raise ModelError(f"model option merge={merge!r}: use {' or '.join(MERGES)}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = _safe_url(self.base_url)
        self.endpoint = endpoint
        self.top_k = top_k
        self.merge = merge
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self.template = template
        self._temperature = temperature
        self._key = os.environ.get(api_key_env) or None
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        #: HTTP attempts made and retried since construction (tests and benchmarks read these).
        self.stats = {"requests": 0, "retries": 0}
        self._probe()

    @property
    def identity(self) -> dict[str, Any]:
        parts = urlsplit(self.base_url)
        return {
            "backend": "openai",
            "name": self.model,
            "host": f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname,
            "endpoint": self.endpoint,
            "top_k": self.top_k,
            "merge": self.merge,
            "temperature": self._temperature,
            "template": self.template.to_dict(),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str:
        """The text sent: the whole prompt (completions) or the user message (chat)."""
        return render(request, self.template)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ HTTP
    def _scrub(self, text: str) -> str:
        text = _one_line(text)
        return text.replace(self._key, "***") if self._key else text

    def _probe(self) -> None:
        """Fail fast, with one line, when nothing answers at the base URL (any HTTP answer will do)."""
        try:
            self._client.get(f"{self.base_url}/models", timeout=10.0)
        except httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {self.url}: {self._scrub(str(exc) or type(exc).__name__)}") from None

    def _post(self, path: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.stats["retries"] += 1
            with self._lock:
                self.stats["requests"] += 1
            wait = min(self.retry_wait * 2**attempt, 30.0) * (0.5 + 0.5 * self._rng.random())
            try:
                resp = self._client.post(url, json=body)
            except httpx.TimeoutException as exc:
                problem = f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.url}: {self._scrub(str(exc) or type(exc).__name__)}"
            else:
                if resp.status_code == 429 or resp.status_code >= 500:
                    problem = f"HTTP {resp.status_code}: {self._scrub(resp.text)}"
                    after = resp.headers.get("retry-after", "")
                    if after.replace(".", "", 1).isdigit():
                        wait = min(float(after), 60.0)
                elif resp.status_code >= 400:
                    raise ModelError(
                        f"server at {self.url} rejected request {request_id} (HTTP {resp.status_code}): "
                        f"{self._scrub(resp.text)}"
                    )
                else:
                    try:
                        data = resp.json()
                    except ValueError:
                        raise ModelError(
                            f"server at {self.url} answered {path} with non-JSON: {self._scrub(resp.text)}"
                        ) from None
                    if not isinstance(data, dict):
                        raise ModelError(f"server at {self.url} answered {path} with a non-object JSON")
                    return data
            if attempt < self.max_retries:
                time.sleep(wait)
        if problem.startswith("cannot reach"):
            raise ModelError(f"{problem} (after {self.max_retries + 1} tries)")
        raise ModelError(f"server at {self.url} failed request {request_id} {self.max_retries + 1} times: {problem}")

    # ------------------------------------------------------------------ scoring
    def _top_logprobs(self, data: dict[str, Any], request_id: str) -> list[tuple[str, float]]:
        """The top-K (token, log-prob) of the first generated token, or a ModelError saying why not."""
        choice = (data.get("choices") or [{}])[0] or {}
        lp = choice.get("logprobs") or {}
        top: Any = None
        if self.endpoint == "completions":
            rows = lp.get("top_logprobs") or []
            top = rows[0] if rows else None
            if isinstance(top, dict):
                return [(str(k), float(v)) for k, v in top.items() if v is not None]
        else:
            content = lp.get("content") or []
            top = content[0].get("top_logprobs") if content and isinstance(content[0], dict) else None
            if isinstance(top, list) and top:
                return [(str(t.get("token", "")), float(t["logprob"])) for t in top if t.get("logprob") is not None]
        answer = choice.get("text") or (choice.get("message") or {}).get("content")
        if choice.get("finish_reason") == "stop" and not answer:
            why = "the model ended its answer at once (end of sequence) and this server gives no logprobs then"
        else:
            why = "it may not support them; try the other endpoint, or a server that returns logprobs"
        raise ModelError(
            f"server at {self.url} returned no logprobs for request {request_id} (endpoint={self.endpoint}): {why}"
        )

    def _score_one(self, request: Request) -> Scores:
        text = self.prompt(request)
        if self.endpoint == "completions":
            body: dict[str, Any] = {
                "model": self.model,
                "prompt": text,
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": self.top_k,
            }
            path = "/completions"
        else:
            body = {
                "model": self.model,
                "messages": [{"role": "user", "content": text}],
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": True,
                "top_logprobs": self.top_k,
            }
            path = "/chat/completions"
        data = self._post(path, body, request.request_id)
        top = self._top_logprobs(data, request.request_id)
        try:
            logits, censored = symbol_scores(top, [o.symbol for o in request.options], self.merge)
        except ValueError:
            raise ModelError(
                f"server at {self.url} returned no finite logprobs for request {request.request_id}"
            ) from None
        usage = data.get("usage") or {}
        meta = {"returned": len(top), "censored": sum(censored)}
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            meta["prompt_tokens"] = usage["prompt_tokens"]
        return Scores(logits, censored, meta)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        # Sent in prompt order so that servers with a prefix cache see long shared prefixes back to back.
        order = sorted(range(len(requests)), key=lambda i: self.prompt(requests[i]))
        out: list[Scores | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            futures = {i: pool.submit(self._score_one, requests[i]) for i in order}
            try:
                for i in order:
                    out[i] = futures[i].result()
            except BaseException:
                for f in futures.values():
                    f.cancel()
                raise
        return [s for s in out if s is not None]


def _number(opts: Mapping[str, str], key: str, kind: type, default: Any, minimum: float) -> Any:
    value = opts.get(key)
    if value is None:
        return default
    try:
        x = kind(value)
    except ValueError:
        raise ModelError(f"model option {key}={value!r} must be a {'whole ' if kind is int else ''}number") from None
    if x < minimum:
        raise ModelError(f"model option {key}={value!r} must be at least {minimum:g}")
    return x


def from_spec(rest: str, opts: Mapping[str, str]) -> OpenAIBackend:
    """``openai:MODEL@BASE_URL`` with the options in the module docstring."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown openai option {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    model, url = parse_spec(rest)
    temperature = _number(opts, "temperature", float, 1.0, 0.0)
    if temperature <= 0:
        raise ModelError("model option temperature must be positive")
    return OpenAIBackend(
        model,
        url,
        endpoint=opts.get("endpoint", "completions"),
        top_k=_number(opts, "top_k", int, 20, 1),
        merge=opts.get("merge", "max"),
        concurrency=_number(opts, "concurrency", int, 8, 1),
        max_retries=_number(opts, "max_retries", int, 5, 0),
        retry_wait=_number(opts, "retry_wait", float, 0.5, 0.0),
        timeout=_number(opts, "timeout", float, 120.0, 0.001),
        api_key_env=opts.get("api_key_env", "OPENAI_API_KEY"),
        temperature=temperature,
    )
