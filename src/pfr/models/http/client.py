"""A JSON-over-HTTP client for decision services: headers from the environment, timeouts, retries
with exponential backoff and jitter on 429, 5xx and connection errors (honouring ``Retry-After``),
bounded concurrency, and messages that never show a secret.

Secrets (header values, the URL's user info, every query value: ``?code=`` of an Azure Function
is as secret as ``?api_key=``, and every path segment that looks like a key, :func:`key_like`) are
replaced by ``***`` in every message; the URL shown or recorded anywhere is :func:`safe_url`, and
:func:`url_hash` tells URLs apart that differ only in a secret.
A dry run calls nothing: inside :func:`~pfr.models.base.no_contact` every POST here is refused unsent.
"""

from __future__ import annotations

import contextvars
import email.utils
import hashlib
import os
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import httpx

from pfr.errors import ModelError
from pfr.models.base import contact_allowed

T = TypeVar("T")
R = TypeVar("R")
#: a query value inside any text (an echoed URL): ``name=value`` after ``?`` or ``&``
_QUERY_VALUE = re.compile(r"([?&][^=&?#\s\"'<>]+=)[^&#\s\"'<>]+")
#: the longest wait a ``Retry-After`` may ask for
MAX_RETRY_AFTER_S = 60.0


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


#: the shortest path segment :func:`key_like` may take for a key
KEY_LENGTH = 16


def key_like(segment: str) -> bool:
    """Whether a URL path segment (percent-decoded) may be a key, as webhook and bot URLs carry one
    (``/services/T0/B0/XXXX…``, ``/bot123:AA…``): 16 characters or more, letters and digits mixed.
    Hiding a segment that is not one costs only its display; the URL's hash keeps settings apart."""
    return len(segment) >= KEY_LENGTH and any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment)


def _keys(path: str) -> list[str]:
    """The key-like segments of a URL path, as written (percent-encoded)."""
    return [seg for seg in path.split("/") if key_like(unquote(seg))]


def _path(path: str) -> str:
    keys = _keys(path)
    return "/".join("***" if seg in keys else seg for seg in path.split("/"))


def safe_url(url: str) -> str:
    """The URL without user info and fragment, every query value as ``***`` (``?code=***&v=***``; a
    bare ``?VALUE`` as ``?***``) and every key-like path segment as ``***``: the one form of a URL that
    identities, stores and messages show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        host = f"{host}:{port}"
    query = [f"{p.partition('=')[0]}=***" if "=" in p else "***" for p in parts.query.split("&") if p]
    return f"{parts.scheme}://{host}{_path(parts.path)}" + (f"?{'&'.join(query)}" if query else "")


def url_secrets(url: str) -> list[str]:
    """What :func:`safe_url` hides, as it may appear in a message (raw and percent-decoded): user
    info, query and fragment values of 4 characters or more (shorter ones would blank out ordinary
    words), and key-like path segments."""
    parts = urlsplit(url)
    found = [parts.username or "", parts.password or ""]
    found += [v for seg in _keys(parts.path) for v in (seg, unquote(seg))]
    for piece in [*parts.query.split("&"), *parts.fragment.split("&")]:
        value = piece.partition("=")[2] if "=" in piece else piece
        found += [value, unquote(value)]
    return sorted({v for v in found if len(v) >= 4}, key=len, reverse=True)


def url_hash(url: str) -> str:
    """A hash of the whole URL: two URLs that differ only in a key are two settings, and the key is
    never recorded."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def url_identity(url: str) -> dict[str, str]:
    """What an identity records of a URL: :func:`safe_url`, and :func:`url_hash` when the URL holds
    something hidden (user info, a query, a key-like path segment), so that two keys are two settings."""
    parts = urlsplit(url)
    hidden = bool(parts.username or parts.password or parts.query or _keys(parts.path))
    return {"url": safe_url(url), **({"url_hash": url_hash(url)} if hidden else {})}


def url_from_env(spec: str, what: str, env: Mapping[str, str] | None = None) -> str:
    """``env:VAR`` → the URL in the variable (read now, never recorded); anything else as it is.
    ``what`` names the spec in the one-line error for an unset or empty variable."""
    if not spec.startswith("env:"):
        return spec
    var = spec[4:]
    value = (os.environ if env is None else env).get(var, "").strip()
    if not var or not value:
        raise ModelError(f"{what}env:{var}: the environment variable {var or '(none named)'} is not set")
    return value


def scrub_text(text: str, secrets: Sequence[str], limit: int = 200) -> str:
    """``text`` on one line with every secret and every query value of a URL in it as ``***``
    (secrets first, so a cut never leaves half of one)."""
    for s in secrets:
        text = text.replace(s, "***")
    return one_line(_QUERY_VALUE.sub(r"\1***", text), limit)


def parse_headers(spec: str | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``Name:VALUE`` or ``Name:env:VAR`` pairs separated by ``;`` → headers. ``env:VAR`` reads the
    variable now (the value is never recorded); a missing variable is an error naming it."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    for part in (spec or "").split(";"):
        if not part.strip():
            continue
        name, sep, value = part.partition(":")
        name = name.strip()
        if not sep or not name or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
            raise ModelError(f"model option header={one_line(name or part, 40)}:…: must be Name:VALUE or Name:env:VAR")
        value = value.strip()
        if value.startswith("env:"):
            var = value[4:]
            if var not in env:
                raise ModelError(f"model option header={name}:env:{var}: the environment variable {var} is not set")
            value = env[var]
        out[name] = value
    return out


class Exhausted(Exception):
    """Every try of a POST failed in a way worth retrying; ``problem`` says how the last one did
    (``unreachable``: the connection itself failed, and ``problem`` is its error)."""

    def __init__(self, problem: str, unreachable: bool) -> None:
        super().__init__(problem)
        self.problem, self.unreachable = problem, unreachable


@dataclass(frozen=True)
class Awaited:
    """The call waited on longest: where (:func:`safe_url`), since when (``time.monotonic()``), which
    try of how many, and the timeout of each try; what a run says while a service does not answer."""

    url: str
    since: float
    attempt: int
    tries: int
    timeout: float | None

    def describe(self, now: float | None = None) -> str:
        """``waiting for URL — 30 s so far (try 1 of 6, timeout 30 s per try)``."""
        waited = (time.monotonic() if now is None else now) - self.since
        so_far = f"{waited:.1f}" if waited < 10 else f"{waited:.0f}"
        timeout = f", timeout {self.timeout:g} s per try" if self.timeout else ""
        return f"waiting for {self.url} — {so_far} s so far (try {self.attempt} of {self.tries}{timeout})"


class Retrying:
    """The retry loop every HTTP client here shares: POST until an answer not worth retrying comes
    (any status but 429 and 5xx), waiting ``retry_wait × 2^attempt`` seconds (capped at 30 s) times a
    jitter in [0.5, 1), or what ``Retry-After`` asks (seconds or an HTTP date, at most
    :data:`MAX_RETRY_AFTER_S`) after 429, 5xx, timeouts and dropped connections. :meth:`awaited`
    names the call waited on longest, for a run to say what it waits for."""

    def __init__(
        self,
        http: httpx.Client,
        *,
        max_retries: int,
        retry_wait: float,
        scrub: Callable[[str], str],
        seed: int | None = 0,
    ) -> None:
        self.http, self.max_retries, self.retry_wait, self.scrub = http, max_retries, retry_wait, scrub
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        #: HTTP attempts made and retried since construction (tests and benchmarks read these)
        self.stats = {"calls": 0, "retries": 0}
        self._waiting: dict[int, Awaited] = {}  # per call in flight (a thread's id), since its first try

    def awaited(self) -> Awaited | None:
        """The call in flight that has waited longest (its retries included), or None."""
        with self._lock:
            return min(self._waiting.values(), key=lambda a: a.since, default=None)

    def wait_s(self, attempt: int, resp: httpx.Response | None) -> float:
        after = resp.headers.get("retry-after", "").strip() if resp is not None else ""
        if after:
            if after.replace(".", "", 1).isdigit():
                return min(float(after), MAX_RETRY_AFTER_S)
            when = email.utils.parsedate_to_datetime(after) if "," in after else None
            if when is not None:
                return min(max(when.timestamp() - time.time(), 0.0), MAX_RETRY_AFTER_S)
        with self._lock:
            jitter = 0.5 + 0.5 * self._rng.random()
        return min(self.retry_wait * 2**attempt, 30.0) * jitter

    def post(self, url: str, body: Any) -> httpx.Response:
        """The first answer to ``body`` not worth retrying; :class:`Exhausted` after the last try."""
        if not contact_allowed():
            raise ModelError(f"a dry run contacts nothing, yet a request to {safe_url(url)} was about to be sent")
        me, since = threading.get_ident(), time.monotonic()
        try:
            return self._post(url, body, me, since)
        finally:
            with self._lock:
                self._waiting.pop(me, None)

    def _post(self, url: str, body: Any, me: int, since: float) -> httpx.Response:
        problem, unreachable = "", False
        timeout = self.http.timeout.read
        for attempt in range(self.max_retries + 1):
            with self._lock:
                self.stats["calls"] += 1
                self.stats["retries"] += attempt > 0
                self._waiting[me] = Awaited(safe_url(url), since, attempt + 1, self.max_retries + 1, timeout)
            resp: httpx.Response | None = None
            try:
                resp = self.http.post(url, json=body)
            except httpx.TimeoutException as exc:
                problem, unreachable = f"timed out ({type(exc).__name__})", False
            except httpx.TransportError as exc:
                problem, unreachable = self.scrub(str(exc) or type(exc).__name__), True
            else:
                if resp.status_code != 429 and resp.status_code < 500:
                    return resp
                problem, unreachable = f"HTTP {resp.status_code}: {self.scrub(resp.text)}", False
            if attempt < self.max_retries:
                time.sleep(self.wait_s(attempt, resp))
        raise Exhausted(problem, unreachable)


class JsonClient:
    """POSTs JSON to one URL and returns the parsed answer, retrying what is worth retrying."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        retry_wait: float = 0.5,
        seed: int | None = None,
    ) -> None:
        self.url = url
        self.shown = safe_url(url)
        self.max_retries, self.retry_wait = max_retries, retry_wait
        self._secrets = [v for v in headers.values() if len(v) >= 4]
        self._secrets += [v.split(" ", 1)[1] for v in self._secrets if " " in v]  # the token of "Bearer TOKEN"
        self._secrets = sorted({*self._secrets, *url_secrets(url)}, key=len, reverse=True)
        self._client = httpx.Client(headers=dict(headers), timeout=httpx.Timeout(timeout), follow_redirects=False)
        self.retrying = Retrying(self._client, max_retries=max_retries, retry_wait=retry_wait,
                                 scrub=self.scrub, seed=seed)  # fmt: skip
        self.stats = self.retrying.stats

    def close(self) -> None:
        self._client.close()

    def scrub(self, text: str, limit: int = 200) -> str:
        """``text`` on one line without any secret (:func:`scrub_text`)."""
        return scrub_text(text, self._secrets, limit)

    def post(self, body: Any, what: str) -> Any:
        """The parsed JSON answer to ``body``; ``what`` names the request(s) in messages."""
        try:
            resp = self.retrying.post(self.url, body)
        except Exhausted as exc:
            problem = f"cannot reach it ({exc.problem})" if exc.unreachable else exc.problem
            raise ModelError(f"service {self.shown} failed {what} {self.max_retries + 1} times: {problem}") from None
        if resp.status_code >= 300:
            raise ModelError(f"service {self.shown} refused {what} (HTTP {resp.status_code}): {self.scrub(resp.text)}")
        try:
            return resp.json()
        except ValueError:
            raise ModelError(
                f"service {self.shown} answered {what} with non-JSON: {self.scrub(resp.text) or '(empty)'}"
            ) from None


def in_flight(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``fn`` over ``items`` with at most ``workers`` calls in flight, results in order.

    Daemon threads, not a ThreadPoolExecutor: a failure (or Ctrl-C) returns at once instead of
    joining every call still waiting on its timeout and retries; the first failure stops new calls
    and is raised.
    """
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    futures: list[Future[R]] = [Future() for _ in items]
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    failed = threading.Event()

    def work() -> None:
        while not failed.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            if not futures[i].set_running_or_notify_cancel():
                continue
            try:
                futures[i].set_result(fn(items[i]))
            except BaseException as exc:  # handed to the reader
                futures[i].set_exception(exc)
                failed.set()

    for n in range(min(workers, len(items))):  # each thread in a copy of this context (a dry run's no_contact)
        threading.Thread(target=contextvars.copy_context().run, args=(work,), name=f"pfr-http-{n}", daemon=True).start()
    wait(futures, return_when=FIRST_EXCEPTION)  # all done, or the first failure (later calls never start)
    for fut in futures:
        if fut.done() and fut.exception() is not None:
            fut.result()
    return [fut.result() for fut in futures]
