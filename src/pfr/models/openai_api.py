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
for local servers), ``temperature`` (the score temperature T, default 1), ``params`` (the model's
parameter count, ``135M`` / ``1.5B``: a server cannot be asked for it) and ``family`` (models of one
family share a line in the recall-against-size figure); both go in the identity.

The API key is sent only in the ``Authorization`` header: it is never part of the identity, the
store, a report or an error message (error text is scrubbed of it).
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlsplit

import httpx

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.letters import MERGES, SymbolTokens, exact_scores, option_mass, topk_text_scores
from pfr.models.options import family, model_option, param_count
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, render

ENDPOINTS = ("completions", "chat")
SCORINGS = ("auto", "exact", "top_k")
#: requests in flight by default against a server that takes logprob_token_ids (vLLM, SGLang): continuous
#: batching schedules them together; 8 otherwise (llama.cpp's server runs one slot at a time by default).
EXACT_CONCURRENCY = 32
#: servers (``owned_by`` in ``GET /models``) asked whether they take ``logprob_token_ids`` under scoring=auto.
CONTINUOUS_BATCHING = frozenset({"vllm", "sglang"})
OPTIONS = (
    "endpoint",
    "top_k",
    "merge",
    "scoring",
    "concurrency",
    "params",
    "family",
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
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ModelError(f"model option endpoint={endpoint!r}: use {' or '.join(ENDPOINTS)}")
        if merge not in MERGES:
            raise ModelError(f"model option merge={merge!r}: use {' or '.join(MERGES)}")
        if scoring not in SCORINGS:
            raise ModelError(f"model option scoring={scoring!r}: use {', '.join(SCORINGS)}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = _safe_url(self.base_url)
        self.endpoint = endpoint
        self.top_k = top_k
        self.merge = merge
        self.params = params
        self.family = family
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self.template = template
        self._temperature = temperature
        self._key = os.environ.get(api_key_env) or None
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        pool = max(concurrency or 0, EXACT_CONCURRENCY)
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        #: HTTP attempts made and retried since construction (tests and benchmarks read these).
        self.stats = {"requests": 0, "retries": 0}
        self._probe()
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self._root = root
        self._symbols = SymbolTokens(self._tokenize, model, hint="use fewer options or another answer cue")
        batching = bool(self.owned_by & CONTINUOUS_BATCHING)
        self.exact = scoring == "exact" or (scoring == "auto" and batching and self._takes_token_ids())
        if scoring == "exact" and not self._takes_token_ids():
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
        return {
            "backend": "openai",
            "name": self.model,
            "host": f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname,
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
        """Fail fast, with one line, when nothing answers at the base URL (any HTTP answer will do).

        Keeps who serves the model (``owned_by`` of ``GET /models``: ``vllm``, ``sglang``, …): only
        such servers are asked whether they take ``logprob_token_ids`` (scoring=auto).
        """
        try:
            resp = self._client.get(f"{self.base_url}/models", timeout=10.0)
        except httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {self.url}: {self._scrub(str(exc) or type(exc).__name__)}") from None
        try:
            entries = resp.json().get("data") or []
            self.owned_by = {str(e.get("owned_by", "")) for e in entries if isinstance(e, dict)}
        except (ValueError, AttributeError):
            self.owned_by = set()

    def _tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` with no special tokens added, from the server's ``/tokenize`` (vLLM, SGLang)."""
        data = self._post("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}, "tokenize",
                          root=True)  # fmt: skip
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise ModelError(f"server at {self.url} answered /tokenize without a token list")
        return [int(t) for t in tokens]

    def _takes_token_ids(self) -> bool:
        """Whether the server returns exact log-probs for requested token ids (``logprob_token_ids``).

        Asked once, of vLLM and SGLang servers (``owned_by``): ``/tokenize`` must answer, and a
        one-token completion that requests the id of ``" A"`` must return that id's log-prob. Servers
        that ignore the field (llama.cpp) or reject it fall back to top-K with censoring.
        """
        try:
            resp = self._client.post(
                f"{self._root}/tokenize", json={"model": self.model, "prompt": "Answer: A", "add_special_tokens": False}
            )
            ids = resp.json().get("tokens") if resp.status_code == 200 else None
            if not isinstance(ids, list) or not ids:
                return False
            tid = int(ids[-1])
            body = {"model": self.model, "prompt": "Answer:", "max_tokens": 1, "temperature": 0, "logprobs": 1,
                    "logprob_token_ids": [tid], "return_tokens_as_token_ids": True}  # fmt: skip
            resp = self._client.post(f"{self.base_url}/completions", json=body)
            if resp.status_code != 200:
                return False
            top = (((resp.json().get("choices") or [{}])[0].get("logprobs") or {}).get("top_logprobs") or [None])[0]
            return isinstance(top, dict) and f"token_id:{tid}" in top
        except (httpx.HTTPError, ValueError, TypeError, AttributeError, IndexError):
            return False

    def _post(self, path: str, body: dict[str, Any], request_id: str, root: bool = False) -> dict[str, Any]:
        url = f"{self._root if root else self.base_url}{path}"
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

    def _exact_one(self, request: Request) -> Scores:
        """Exact symbol log-probs: the symbol ids by the shared rule (server tokenizer), asked for by id."""
        text = self.prompt(request)
        rid = request.request_id
        if self.endpoint == "completions":
            ids = self._symbols.ids(text, (o.symbol for o in request.options), rid)
            body: dict[str, Any] = {"model": self.model, "prompt": text, "max_tokens": 1, "temperature": 0,
                                    "logprobs": len(ids), "logprob_token_ids": ids,
                                    "return_tokens_as_token_ids": True}  # fmt: skip
            data = self._post("/completions", body, rid)
            rows = (((data.get("choices") or [{}])[0] or {}).get("logprobs") or {}).get("top_logprobs") or [None]
            top = rows[0] if isinstance(rows[0], dict) else {}
        else:
            messages = [{"role": "user", "content": text}]
            chat = self._post("/tokenize", {"model": self.model, "messages": messages, "add_generation_prompt": True},
                              rid, root=True)  # fmt: skip
            tail_ids = [int(t) for t in (chat.get("tokens") or [])][-64:]
            detok = self._post("/detokenize", {"model": self.model, "tokens": tail_ids}, rid, root=True)
            tail = str(detok.get("prompt", ""))
            ids = self._symbols.ids(tail, (o.symbol for o in request.options), rid)
            body = {"model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                    "top_logprobs": len(ids), "logprob_token_ids": ids, "return_tokens_as_token_ids": True}  # fmt: skip
            data = self._post("/chat/completions", body, rid)
            content = (((data.get("choices") or [{}])[0] or {}).get("logprobs") or {}).get("content") or [{}]
            top = {str(t.get("token")): t.get("logprob") for t in (content[0] or {}).get("top_logprobs") or []}
        got = {int(k.removeprefix("token_id:")): float(v) for k, v in top.items()
               if k.startswith("token_id:") and v is not None}  # fmt: skip
        missing = [t for t in ids if t not in got]
        if missing:
            raise ModelError(f"server at {self.url} returned no log-prob for token(s) {missing} of request {rid}")
        logits = exact_scores(got, ids)
        meta: dict[str, Any] = {"option_mass": option_mass(logits)}
        usage = data.get("usage") or {}
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            meta["prompt_tokens"] = usage["prompt_tokens"]
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            meta["cached_tokens"] = details["cached_tokens"]
        return Scores(logits, (False,) * len(logits), meta)

    def _score_one(self, request: Request) -> Scores:
        if self.exact:
            return self._exact_one(request)
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
        futures = _in_flight(self._score_one, [requests[i] for i in order], self.concurrency)
        out: list[Scores | None] = [None] * len(requests)
        for i, fut in zip(order, futures):
            out[i] = fut.result()
        return [s for s in out if s is not None]


def _in_flight(fn: Callable[[Request], Scores], items: Sequence[Request], workers: int) -> list[Future[Scores]]:
    """``fn`` over ``items`` on ``workers`` daemon threads, at most ``workers`` calls in flight.

    Not a ThreadPoolExecutor: its exit (and the interpreter's) joins every worker, so Ctrl-C or a
    failed request would wait for each HTTP call still in flight, up to its timeout times its
    retries. Daemon workers are abandoned instead: a caller that stops reading the futures (an
    exception, KeyboardInterrupt) returns at once; nothing from the abandoned calls is kept.
    """
    futures: list[Future[Scores]] = [Future() for _ in items]
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    failed = threading.Event()  # one failure stops the others from starting new calls

    def work() -> None:
        while not failed.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            fut = futures[i]
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(items[i]))
            except BaseException as exc:  # handed to the reader of the future
                failed.set()
                fut.set_exception(exc)

    for n in range(min(workers, len(items))):
        threading.Thread(target=work, name=f"pfr-openai-{n}", daemon=True).start()
    return futures


def _number(opts: Mapping[str, str], key: str, kind: Callable[[str], Any], default: Any, minimum: float) -> Any:
    from pfr.options import Number

    return model_option(opts, key, Number(whole=kind is int, low=minimum), default)


def from_spec(rest: str, opts: Mapping[str, str]) -> OpenAIBackend:
    """``openai:MODEL@BASE_URL`` with the options in the module docstring."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown openai option {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    model, url = parse_spec(rest)
    temperature = _number(opts, "temperature", float, 1.0, 0.0)
    if temperature <= 0:
        raise ModelError(f"model option temperature={opts['temperature']}: must be a finite number > 0")
    return OpenAIBackend(
        model,
        url,
        endpoint=opts.get("endpoint", "completions"),
        top_k=_number(opts, "top_k", int, 20, 1),
        merge=opts.get("merge", "max"),
        scoring=opts.get("scoring", "auto"),
        concurrency=_number(opts, "concurrency", int, None, 1),
        params=param_count(opts),
        family=family(opts),
        max_retries=_number(opts, "max_retries", int, 5, 0),
        retry_wait=_number(opts, "retry_wait", float, 0.5, 0.0),
        timeout=_number(opts, "timeout", float, 120.0, 0.001),
        api_key_env=opts.get("api_key_env", "OPENAI_API_KEY"),
        temperature=temperature,
    )
