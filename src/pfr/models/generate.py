"""Decisions from generated text on OpenAI-compatible servers: ``openai:MODEL@BASE_URL --model-opt decide=generate``.

For chat models and servers that return no log-probabilities, the model *generates* its answer
(temperature 0 and a fixed seed by default, both recorded in the identity) and the answer is read
by the one parse rule of :mod:`pfr.models.decide` (documented in docs/backends-serving.md), the same
on every backend. Results are label-only; the raw answer is kept in ``meta.raw``.

Options (besides the ``openai:`` ones that apply: ``endpoint``, ``concurrency``, ``max_retries``,
``retry_wait``, ``timeout``, ``api_key_env``, ``params``, ``family``): ``max_tokens`` (default 8),
``seed`` (default 0), ``gen_temperature`` (default 0).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.decide import PARSE_RULE, decision
from pfr.models.http_client import JsonClient, in_flight, one_line, safe_url
from pfr.models.options import family, param_count, positive
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, render

OPTIONS = ("decide", "endpoint", "concurrency", "max_retries", "retry_wait", "timeout", "api_key_env", "params",
           "family", "max_tokens", "seed", "gen_temperature")  # fmt: skip


def _spec(rest: str) -> tuple[str, str]:
    at = rest.rfind("@http")
    model, url = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", "")
    if not model or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ModelError(f"openai model spec must be openai:MODEL@BASE_URL, got 'openai:{one_line(rest, 80)}'")
    return model, url.rstrip("/")


class GenerateDecider:
    """An OpenAI-compatible server whose generated answer is the decision (module docstring)."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        endpoint: str = "completions",
        max_tokens: int = 8,
        seed: int = 0,
        gen_temperature: float = 0.0,
        concurrency: int = 4,
        timeout: float = 120.0,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        api_key_env: str = "OPENAI_API_KEY",
        params: int | None = None,
        family: str | None = None,
    ) -> None:
        if endpoint not in ("completions", "chat"):
            raise ModelError(f"model option endpoint={endpoint!r}: use completions or chat")
        self.model, self.base_url, self.endpoint = model, base_url, endpoint
        self.max_tokens, self.seed, self.gen_temperature = max_tokens, seed, gen_temperature
        self.concurrency, self.params, self.family = concurrency, params, family
        self.template: PromptTemplate = DEFAULT_TEMPLATE
        self.batch_size = 2 * concurrency
        key = os.environ.get(api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        path = "/chat/completions" if endpoint == "chat" else "/completions"
        self.client = JsonClient(base_url + path, headers, timeout=timeout, max_retries=max_retries,
                                 retry_wait=retry_wait)  # fmt: skip

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "name": f"{self.model} [generate]",
            "model": self.model,
            "url": safe_url(self.base_url),
            "endpoint": self.endpoint,
            "decide": "generate",
            "parse_rule": PARSE_RULE,
            "sampling": {"temperature": self.gen_temperature, "seed": self.seed, "max_tokens": self.max_tokens},
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

    def _one(self, request: Request) -> Scores:
        sampling = {"max_tokens": self.max_tokens, "temperature": self.gen_temperature, "seed": self.seed}
        text = self.prompt(request)
        if self.endpoint == "chat":
            body: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": text}], **sampling}
        else:
            body = {"model": self.model, "prompt": text, **sampling}
        what = f"request {request.request_id}"
        data = self.client.post(body, what)
        try:
            first = data["choices"][0]
            raw = first["message"]["content"] if self.endpoint == "chat" else first["text"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(
                f"server {self.client.shown} answered {what} without choices[0]"
                f"{'.message.content' if self.endpoint == 'chat' else '.text'}: {self.client.scrub(str(data))}"
            ) from None
        return decision(raw, request)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return in_flight(self._one, list(requests), self.concurrency)


def from_openai_spec(rest: str, opts: Mapping[str, str]) -> GenerateDecider:
    """``openai:MODEL@BASE_URL`` with ``decide=generate`` (the options in the module docstring)."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown option {', '.join(unknown)} with decide=generate (known: {', '.join(OPTIONS)})")
    if opts.get("decide") != "generate":
        raise ModelError(f"model option decide={opts.get('decide')!r}: use scores (the default) or generate")
    model, url = _spec(rest)
    retries = opts.get("max_retries", "5")
    if not retries.isdigit():
        raise ModelError(f"model option max_retries={retries!r}: must be a whole number, 0 or more")
    seed = opts.get("seed", "0")
    if not seed.lstrip("-").isdigit():
        raise ModelError(f"model option seed={seed!r}: must be a whole number")
    try:
        gen_t = float(opts.get("gen_temperature", "0"))
        wait = float(opts.get("retry_wait", "0.5"))
    except ValueError:
        raise ModelError("model options gen_temperature and retry_wait must be numbers") from None
    if not (gen_t >= 0 and wait >= 0):
        raise ModelError("model options gen_temperature and retry_wait must be 0 or more")
    return GenerateDecider(
        model,
        url,
        endpoint=opts.get("endpoint", "completions"),
        max_tokens=positive(opts, "max_tokens", int, 8),
        seed=int(seed),
        gen_temperature=gen_t,
        concurrency=positive(opts, "concurrency", int, 4),
        timeout=positive(opts, "timeout", float, 120.0),
        max_retries=int(retries),
        retry_wait=wait,
        api_key_env=opts.get("api_key_env", "OPENAI_API_KEY"),
        params=param_count(opts),
        family=family(opts),
    )


def is_generate(opts: Mapping[str, str]) -> bool:
    """Whether ``--model-opt decide=…`` asks for generated decisions (``scores`` is the default)."""
    return opts.get("decide", "scores") != "scores"


__all__ = ["GenerateDecider", "from_openai_spec", "is_generate"]
