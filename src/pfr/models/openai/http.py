"""HTTP for the ``openai:`` backend: one pooled client, retries with backoff, answers in one line,
and a bounded set of requests in flight; the API key never reaches a message."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from pfr.errors import ModelError

T = TypeVar("T")
R = TypeVar("R")


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment: what may appear in identities and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


class Client:
    """JSON over HTTP to one API root (``base_url``, e.g. ``…/v1``) and its server root (``root``,
    where vLLM and SGLang serve ``/tokenize``), retrying HTTP 429, 5xx, timeouts and dropped connections
    ``max_retries`` times with exponential backoff from ``retry_wait`` seconds (capped at 30 s, honouring
    ``Retry-After``)."""

    def __init__(
        self, base_url: str, key: str | None, *, timeout: float, pool: int, max_retries: int, retry_wait: float
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = safe_url(self.base_url)
        self.root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self._key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        #: HTTP attempts made and retried since construction (tests and benchmarks read these).
        self.stats = {"requests": 0, "retries": 0}

    def close(self) -> None:
        self.http.close()

    def scrub(self, text: str) -> str:
        text = one_line(text)
        return text.replace(self._key, "***") if self._key else text

    def owned_by(self) -> set[str]:
        """Fail fast, with one line, when nothing answers at the base URL (any HTTP answer will do);
        else who serves the model (``owned_by`` of ``GET /models``: ``vllm``, ``sglang``, …)."""
        try:
            resp = self.http.get(f"{self.base_url}/models", timeout=10.0)
        except httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {self.url}: {self.scrub(str(exc) or type(exc).__name__)}") from None
        try:
            entries = resp.json().get("data") or []
            return {str(e.get("owned_by", "")) for e in entries if isinstance(e, dict)}
        except (ValueError, AttributeError):
            return set()

    def post(self, path: str, body: dict[str, Any], request_id: str, root: bool = False) -> dict[str, Any]:
        """POST ``body`` to ``path`` (under ``root`` or the API root) and return the JSON object answered."""
        url = f"{self.root if root else self.base_url}{path}"
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.stats["retries"] += 1
            with self._lock:
                self.stats["requests"] += 1
            wait = min(self.retry_wait * 2**attempt, 30.0) * (0.5 + 0.5 * self._rng.random())
            try:
                resp = self.http.post(url, json=body)
            except httpx.TimeoutException as exc:
                problem = f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.url}: {self.scrub(str(exc) or type(exc).__name__)}"
            else:
                if resp.status_code == 429 or resp.status_code >= 500:
                    problem = f"HTTP {resp.status_code}: {self.scrub(resp.text)}"
                    after = resp.headers.get("retry-after", "")
                    if after.replace(".", "", 1).isdigit():
                        wait = min(float(after), 60.0)
                elif resp.status_code >= 400:
                    raise ModelError(
                        f"server at {self.url} rejected request {request_id} (HTTP {resp.status_code}): "
                        f"{self.scrub(resp.text)}"
                    )
                else:
                    try:
                        data = resp.json()
                    except ValueError:
                        raise ModelError(
                            f"server at {self.url} answered {path} with non-JSON: {self.scrub(resp.text)}"
                        ) from None
                    if not isinstance(data, dict):
                        raise ModelError(f"server at {self.url} answered {path} with a non-object JSON")
                    return data
            if attempt < self.max_retries:
                time.sleep(wait)
        if problem.startswith("cannot reach"):
            raise ModelError(f"{problem} (after {self.max_retries + 1} tries)")
        raise ModelError(f"server at {self.url} failed request {request_id} {self.max_retries + 1} times: {problem}")


def in_flight(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[Future[R]]:
    """``fn`` over ``items`` on ``workers`` daemon threads, at most ``workers`` calls in flight.

    Not a ThreadPoolExecutor: its exit (and the interpreter's) joins every worker, so Ctrl-C or a
    failed request would wait for each HTTP call still in flight, up to its timeout times its
    retries. Daemon workers are abandoned instead: a caller that stops reading the futures (an
    exception, KeyboardInterrupt) returns at once; nothing from the abandoned calls is kept.
    """
    futures: list[Future[R]] = [Future() for _ in items]
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
