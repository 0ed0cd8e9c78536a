"""``http:URL`` — a decision service over HTTP as a model (an intent router, a policy service).

Each request is POSTed as JSON (:mod:`pfr.models.http.body`: the default body, or ``body=FILE``, a
sandboxed Jinja2 template) and the decision is read from the JSON answer at ``answer=PATH``
(:mod:`pfr.models.http.answers`): a label, symbol or index is a *label-only* answer, stored as a
choice without scores; a list or object of per-option numbers is read as ``numbers=``. A label that
names no option (or an index out of range) is stored as an invalid answer, or stops the run under
``strict=true``.

Options: ``answer`` (dotted path, default ``label``), ``numbers`` (``logprob``, ``prob`` or
``logit``), ``body`` (template file), ``header`` (``Name:env:VAR`` or ``Name:VALUE``, several
separated by ``;``; values never recorded or shown), ``timeout`` (seconds per call, default 30),
``max_retries`` (default 5) and ``retry_wait`` (first backoff in seconds, default 0.5; doubled per
try, with jitter, capped at 30 s; ``Retry-After`` wins), ``concurrency`` (calls in flight, default
4), ``batch`` (requests per call as a JSON array, default 1: one object per call), ``version`` (a
name for what runs behind the URL), ``name`` (what reports call the setting, e.g. ``router-v2``),
``strict`` (an unknown label is an error, default false), ``temperature``, ``params`` and ``family``.

``http:env:VAR`` reads the URL from the environment variable ``VAR`` when the model is loaded. The
identity holds the URL with user info removed and every query value as ``***`` (``?code=***``), a
hash of the whole URL when anything was hidden (two keys are two settings; neither is recorded), the
template's hash, the answer path, how numbers are read, and ``version``: a service that changes
behind one URL is the same model to pfr until ``version`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.http.answers import NUMBERS, AnswerError, at_path, read_answer
from pfr.models.http.body import BodyTemplate, batch_body, request_body
from pfr.models.http.client import (
    Awaited,
    JsonClient,
    in_flight,
    one_line,
    parse_headers,
    scrub_text,
    url_from_env,
    url_identity,
    url_secrets,
)
from pfr.models.options import family, on_off, param_count, positive

OPTIONS = (
    "answer",
    "numbers",
    "body",
    "header",
    "timeout",
    "max_retries",
    "retry_wait",
    "concurrency",
    "batch",
    "version",
    "name",
    "strict",
    "temperature",
    "params",
    "family",
)


class HttpService:
    """A decision service reached by POSTing JSON to one URL (see the module docstring)."""

    calls_out = True  # a dry run never scores with it (pfr.models.base.no_contact)

    def __init__(
        self,
        url: str,
        *,
        answer: str = "label",
        numbers: str | None = None,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        concurrency: int = 4,
        batch: int = 1,
        version: str | None = None,
        name: str | None = None,
        strict: bool = False,
        temperature: float = 1.0,
        params: int | None = None,
        family: str | None = None,
    ) -> None:
        if numbers is not None and numbers not in NUMBERS:
            raise ModelError(f"model option numbers={numbers!r}: use one of {', '.join(NUMBERS)}")
        self.url, self.answer, self.numbers = url, answer, numbers
        self.template = BodyTemplate(body) if body else None
        self.concurrency, self.batch = concurrency, batch
        self.version, self.name, self.params, self.family = version, name, params, family
        self.strict = strict  # not in the identity: it decides whether a run stops, not what is stored
        self._temperature = temperature
        self.batch_size = concurrency * batch  # one store commit per round of calls in flight
        self.client = JsonClient(url, headers or {}, timeout=timeout, max_retries=max_retries, retry_wait=retry_wait)

    @property
    def identity(self) -> dict[str, Any]:
        url = url_identity(self.url)
        return {
            "backend": "http",
            "name": self.name or f"http:{url['url']}" + (f"@{self.version}" if self.version else ""),
            **url,
            "body": self.template.sha if self.template else "default",
            "answer": self.answer,
            "numbers": self.numbers,
            "batch": self.batch > 1,  # an array body is another request shape; its size is not
            "temperature": self._temperature,
            **({"version": self.version} if self.version else {}),
            **({"params": self.params} if self.params is not None else {}),
            **({"family": self.family} if self.family else {}),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str | None:
        return None  # the service reads the request's fields; the body is rebuilt from them

    def close(self) -> None:
        self.client.close()

    def awaited(self) -> Awaited | None:
        """The call waited on longest (a run says what it waits for when the service is slow)."""
        return self.client.retrying.awaited()

    def _read(self, data: Any, request: Request, what: str, raw: Any) -> Scores:
        try:
            value = at_path(data, self.answer)
            return read_answer(value, request, self.numbers, {"service": self.client.shown}, strict=self.strict)
        except AnswerError as exc:
            import json

            body = self.client.scrub(json.dumps(raw, ensure_ascii=False))
            raise ModelError(f"service {self.client.shown}, {what}: {exc} (answer={self.answer}): {body}") from None

    def _one(self, request: Request) -> Scores:
        what = f"request {request.request_id}"
        data = self.client.post(request_body(request, self.template), what)
        return self._read(data, request, what, data)

    def _many(self, requests: list[Request]) -> list[Scores]:
        what = f"the batch of {len(requests)} from request {requests[0].request_id}"
        data = self.client.post(batch_body(requests, self.template), what)
        if not isinstance(data, list) or len(data) != len(requests):
            got = f"{len(data)} answers" if isinstance(data, list) else "no JSON array"
            raise ModelError(
                f"service {self.client.shown}, {what}: {got} for {len(requests)} requests (batch={self.batch} "
                f"needs an array of answers in request order): {self.client.scrub(str(data))}"
            )
        return [self._read(item, r, f"request {r.request_id}", data) for item, r in zip(data, requests)]

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        reqs = list(requests)
        if self.batch <= 1:
            return in_flight(self._one, reqs, self.concurrency)
        chunks = [reqs[i : i + self.batch] for i in range(0, len(reqs), self.batch)]
        return [s for chunk in in_flight(self._many, chunks, self.concurrency) for s in chunk]


def from_spec(rest: str, opts: Mapping[str, str]) -> HttpService:
    """``http:URL`` with the options in the module docstring."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown http option {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    url = url_from_env(rest, "http:")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = rest if rest.startswith("env:") else scrub_text(rest, url_secrets(rest))
        raise ModelError(
            "http model spec must be http:URL or http:env:VAR (e.g. http:http://127.0.0.1:8000/decide), "
            f"got 'http:{one_line(shown, 80)}'"
        )
    retries = opts.get("max_retries", "5")
    if not retries.isdigit():
        raise ModelError(f"model option max_retries={retries!r}: must be a whole number, 0 or more")
    wait = opts.get("retry_wait", "0.5")
    try:
        retry_wait = float(wait)
    except ValueError:
        raise ModelError(f"model option retry_wait={wait!r}: not a number") from None
    if not retry_wait >= 0:
        raise ModelError(f"model option retry_wait={wait!r}: must be 0 or more")
    return HttpService(
        url,
        answer=opts.get("answer", "label"),
        numbers=opts.get("numbers"),
        body=opts.get("body") or None,
        headers=parse_headers(opts.get("header")),
        timeout=positive(opts, "timeout", float, 30.0),
        max_retries=int(retries),
        retry_wait=retry_wait,
        concurrency=positive(opts, "concurrency", int, 4),
        batch=positive(opts, "batch", int, 1),
        version=family(opts, "version"),
        name=opts.get("name") or None,
        strict=on_off(opts, "strict", False),
        temperature=positive(opts, "temperature", float, 1.0),
        params=param_count(opts),
        family=family(opts),
    )
