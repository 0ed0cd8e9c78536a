"""HTTP for the ``openai:`` backend: one pooled client whose retries are
:class:`pfr.models.http.client.Retrying`'s, answers in one line; neither the API key nor the base URL's
user info or query values ever reach a message (the URL shown is ``safe_url``'s)."""

from __future__ import annotations

from typing import Any

import httpx

from pfr.errors import ModelError
from pfr.models.base import contact_allowed
from pfr.models.http.client import Exhausted, Retrying, safe_url, scrub_text, url_secrets


class Client:
    """JSON over HTTP to one API root (``base_url``, e.g. ``…/v1``) and its server root (``root``,
    where vLLM and SGLang serve ``/tokenize``), retrying HTTP 429, 5xx, timeouts and dropped connections
    ``max_retries`` times with exponential backoff from ``retry_wait`` seconds (capped at 30 s, honouring
    ``Retry-After``)."""

    def __init__(
        self, base_url: str, key: str | None, *, timeout: float, pool: int, max_retries: int, retry_wait: float
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = safe_url(self.base_url).rstrip("/")
        self.root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self._secrets = sorted({*([key] if key else []), *url_secrets(base_url)}, key=len, reverse=True)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )
        self.retrying = Retrying(self.http, max_retries=max_retries, retry_wait=retry_wait, scrub=self.scrub)
        #: HTTP attempts made and retried since construction (tests and benchmarks read these).
        self.stats = self.retrying.stats

    def close(self) -> None:
        self.http.close()

    def scrub(self, text: str) -> str:
        return scrub_text(text, self._secrets)

    def owned_by(self) -> set[str]:
        """Fail fast, with one line, when nothing answers at the base URL (any HTTP answer will do);
        else who serves the model (``owned_by`` of ``GET /models``: ``vllm``, ``sglang``, …).
        Nobody is asked in a dry run (:func:`~pfr.models.http.client.no_contact`): an empty set."""
        if not contact_allowed():
            return set()
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
        try:
            resp = self.retrying.post(url, body)
        except Exhausted as exc:
            if exc.unreachable:
                raise ModelError(
                    f"cannot reach {self.url}: {exc.problem} (after {self.max_retries + 1} tries)"
                ) from None
            raise ModelError(
                f"server at {self.url} failed request {request_id} {self.max_retries + 1} times: {exc.problem}"
            ) from None
        if resp.status_code >= 400:
            raise ModelError(
                f"server at {self.url} rejected request {request_id} (HTTP {resp.status_code}): {self.scrub(resp.text)}"
            )
        try:
            data = resp.json()
        except ValueError:
            raise ModelError(f"server at {self.url} answered {path} with non-JSON: {self.scrub(resp.text)}") from None
        if not isinstance(data, dict):
            raise ModelError(f"server at {self.url} answered {path} with a non-object JSON")
        return data
