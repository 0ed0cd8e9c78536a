"""``http:URL`` — a decision service over HTTP as a model (an intent router, a policy service).

Each request is POSTed as JSON (:mod:`pfr.models.http.body`: the default body, or ``body=FILE``, a
sandboxed Jinja2 template) and the decision is read from the JSON answer at ``answer=PATH``
(:mod:`pfr.models.http.answers`): a label, symbol or index is a *label-only* answer, stored as a
choice without scores; a list or object of per-option numbers is read as ``numbers=``. A label that
names no option (or an index out of range) is stored as an invalid answer, or stops the run under
``strict=true``.

The options, with their defaults, are :data:`BACKEND`'s (``header`` values are never recorded or
shown; ``strict`` is not in the identity).

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
from pfr.models.declaration import Declaration, Option
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
from pfr.models.options import NAME, PARAMS
from pfr.options import POSITIVE, POSITIVE_INT, TEMPERATURE, Number, Switch


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


class Headers:
    """``header=``: ``Name:VALUE`` or ``Name:env:VAR`` pairs separated by ``;``
    (:func:`pfr.models.http.client.parse_headers`, whose one-line errors it keeps)."""

    def allowed(self) -> str:
        return "Name:VALUE or Name:env:VAR, several separated by ;"

    def parse(self, name: str, value: object) -> dict[str, str]:
        return parse_headers(str(value))


def from_spec(rest: str, opts: Mapping[str, Any]) -> HttpService:
    """``http:URL`` or ``http:env:VAR`` with the options of :data:`BACKEND`, parsed."""
    url = url_from_env(rest, "http:")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = rest if rest.startswith("env:") else scrub_text(rest, url_secrets(rest))
        raise ModelError(
            "http model spec must be http:URL or http:env:VAR (e.g. http:http://127.0.0.1:8000/decide), "
            f"got 'http:{one_line(shown, 80)}'"
        )
    kwargs = {k: v for k, v in opts.items() if k != "header"}
    return HttpService(
        url, **{**kwargs, "body": opts["body"] or None, "name": opts["name"] or None}, headers=opts["header"]
    )


#: ``http:URL`` (docs/deployed.md); ``numbers`` is checked by :class:`HttpService`, ``body`` when its
#: template is read
BACKEND = Declaration(
    "http",
    from_spec,
    options=(
        Option("answer", "label", "dotted path to the decision in the JSON answer"),
        Option("numbers", None, "`logprob`, `prob` or `logit`: how to read per-option numbers"),
        Option("body", None, "a Jinja2 template file (sandboxed) that renders the JSON body; absent: the default body"),
        Option(
            "header",
            None,
            "`Name:env:VAR` (the value is read from the environment variable) or `Name:VALUE`; several separated "
            "by `;`",
            Headers(),
        ),
        Option("timeout", 30.0, "seconds per call", POSITIVE),
        Option(
            "max_retries",
            5,
            "retries of a call on HTTP 429, 5xx, a timeout or a connection error",
            Number(whole=True, low=0),
        ),
        Option(
            "retry_wait",
            0.5,
            "first backoff in seconds, doubled per retry, capped at 30 s, times a random factor in [0.5, 1] "
            "(jitter); a `Retry-After` header (seconds or a date, at most 60 s) replaces it",
            Number(low=0),
        ),
        Option("concurrency", 4, "calls in flight", POSITIVE_INT),
        Option("batch", 1, "requests per call (a JSON array); 1 sends one object per call", POSITIVE_INT),
        Option("version", None, "a name for what runs behind the URL (see below)", NAME),
        Option(
            "name",
            None,
            "what reports, tables and `pfr check` call the setting, e.g. `router-v2`; absent: `http:URL` (see below)",
        ),
        Option(
            "strict",
            False,
            "`true`: a label that names no option (or an index out of range) stops the run with one line, exit 2, "
            "instead of being stored as an invalid answer",
            Switch(),
        ),
        Option("temperature", 1.0, "score temperature T", TEMPERATURE),
        Option("params", None, "the model's parameter count (`135M`, `1.5B`, `7e9`), in the identity", PARAMS),
        Option("family", None, "the model family, joining sizes by a line in the recall-against-size figure", NAME),
    ),
)
