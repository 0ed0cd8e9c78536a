"""The OpenAI-compatible backend against a real llama.cpp server (llama_cpp.server) on 127.0.0.1.

The server runs the same SmolLM2 GGUF as the in-process backend, so the two paths are compared on
the same requests. Retry, rejection and no-logprobs behaviour is checked through a small real HTTP
proxy in front of that server that answers the first calls with 503/429, a 400, or drops the
``logprobs`` field, the way overloaded, strict or logprob-less servers do.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pfr.api import build, run
from pfr.cli import main
from pfr.errors import ModelError
from pfr.models.base import native_choice, normalise_scores
from pfr.models.openai import OpenAIBackend
from pfr.models.registry import load_model
from pfr.run.store import Store

if os.environ.get("PFR_REQUIRE_LLAMACPP") != "1":  # under `make test` a missing wheel fails collection
    pytest.importorskip("llama_cpp")

pytestmark = [pytest.mark.slow, pytest.mark.llamacpp]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- a real HTTP proxy with scripted failures
class _Proxy:
    """Forwards POSTs to ``upstream``; ``plan`` holds what the next calls answer instead (FIFO)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.plan: list[Answer] = []
        self.drop_logprobs = False
        self.seen_auth: list[str | None] = []
        self.calls = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                r = httpx.get(proxy.upstream + self.path.removeprefix("/v1"), timeout=60)
                self._send(r.status_code, {}, r.content)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                proxy.seen_auth.append(self.headers.get("Authorization"))
                proxy.calls += 1
                if proxy.plan:
                    self._send(*proxy.plan.pop(0)())
                    return
                r = httpx.post(proxy.upstream + self.path.removeprefix("/v1"), content=body,
                               headers={"Content-Type": "application/json"}, timeout=600)  # fmt: skip
                data = r.json()
                if proxy.drop_logprobs:
                    for choice in data.get("choices", []):
                        choice.pop("logprobs", None)
                self._send(r.status_code, {}, json.dumps(data).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(llama_server: str) -> Iterator[_Proxy]:
    p = _Proxy(llama_server)
    yield p
    p.close()


Answer = Callable[[], tuple[int, dict[str, str], bytes]]


def _status(code: int, body: str = '{"error": "busy"}', **headers: str) -> Answer:
    return lambda: (code, dict(headers), body.encode())


# ---------------------------------------------------------------- completions: the main path
@pytest.fixture(scope="module")
def completions_run(llama_server: str, llama_trec8: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = tmp_path_factory.mktemp("openai") / "store"
    summary = run(f"openai:smollm2@{llama_server}", llama_trec8, store, options={"top_k": "20"}, progress=False)
    with Store(store, create=False) as st:
        results = list(st.results())
    return store, summary, results


def test_completions_scores_trec8_like_llamacpp_in_process(completions_run: Any, llama_trec8_run: Any) -> None:
    _, summary, served = completions_run
    assert summary.scored == 8
    local = {r.request.request_id: r for r in llama_trec8_run.results}
    agree = 0
    for s in served:
        ref = local[s.request.request_id]
        assert len(s.logits) == 16 and len(s.censored) == 16
        assert not all(s.censored)
        for lp, cen, exact in zip(s.logits, s.censored, ref.logits):
            if cen:  # censored: the K-th returned log-prob, an upper bound of the option's own
                assert exact <= lp + 1e-3
            else:  # same GGUF, same llama.cpp build: the same number
                assert abs(lp - exact) < 1e-3
        best = ref.choice
        if not s.censored[best]:
            assert s.choice == best
            agree += 1
    assert agree == len(served)  # the in-process winner is in the server's top 20 on every request here


def test_identity_has_no_key_and_names_the_host(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFR_TEST_SECRET_KEY", "sk-test-0123456789")
    b = load_model(f"openai:smollm2@{llama_server}", {"api_key_env": "PFR_TEST_SECRET_KEY", "endpoint": "chat"})
    ident = json.dumps(b.identity)
    assert "sk-test" not in ident
    assert b.identity["host"] == llama_server.split("//")[1].split("/")[0]
    assert (b.identity["endpoint"], b.identity["top_k"]) == ("chat", 20)
    assert b.identity["params"] is None and "family" not in b.identity  # a server cannot be asked its size
    sized = load_model(f"openai:smollm2@{llama_server}", {"params": "135M", "family": "smollm2"})
    assert (sized.identity["params"], sized.identity["family"]) == (135_000_000, "smollm2")
    with pytest.raises(ModelError, match="not a parameter count"):
        load_model(f"openai:smollm2@{llama_server}", {"params": "1.5X"})


def test_small_top_k_censors_and_the_store_keeps_the_flags(llama_server: str, llama_trec8: list[Any],
                                                          llama_trec8_run: Any, tmp_path: Path) -> None:  # fmt: skip
    reqs = llama_trec8[:4]
    run(f"openai:smollm2@{llama_server}", reqs, tmp_path / "s", options={"top_k": "2"}, progress=False)
    with Store(tmp_path / "s", create=False) as st:
        stored = list(st.results())
    local = {r.request.request_id: r for r in llama_trec8_run.results}
    assert len(stored) == 4
    for s in stored:
        assert any(s.censored), "with 2 returned tokens ('\\n' and end of text lead here) options must be censored"
        ref = local[s.request.request_id]
        floor = min(lp for lp, c in zip(s.logits, s.censored) if c)
        for lp, cen, exact in zip(s.logits, s.censored, ref.logits):
            assert math.isfinite(lp)
            if cen:
                assert lp == floor and exact <= lp + 1e-3
        assert s.meta["censored"] == sum(s.censored) and s.meta["returned"] >= 2


# ---------------------------------------------------------------- failures: retries, rejections, no logprobs
def test_retries_429_and_503_then_succeeds(proxy: _Proxy, llama_trec8: list[Any], monkeypatch: pytest.MonkeyPatch,
                                           completions_run: Any) -> None:  # fmt: skip
    monkeypatch.setenv("PFR_TEST_SECRET_KEY", "sk-test-0123456789")
    b = OpenAIBackend("smollm2", proxy.url, retry_wait=0.01, api_key_env="PFR_TEST_SECRET_KEY")
    proxy.plan = [_status(503), _status(429, **{"Retry-After": "0"}), _status(502)]
    (got,) = b.score(llama_trec8[:1])
    assert b.stats == {"calls": 4, "retries": 3}
    assert proxy.seen_auth == ["Bearer sk-test-0123456789"] * 4
    direct = {r.request.request_id: r for r in completions_run[2]}[llama_trec8[0].request_id]
    assert got.logits == pytest.approx(direct.logits, abs=1e-3)
    assert got.censored == direct.censored


def test_gives_up_after_max_retries(proxy: _Proxy, llama_trec8: list[Any]) -> None:
    b = OpenAIBackend("smollm2", proxy.url, retry_wait=0.01, max_retries=2)
    proxy.plan = [_status(503)] * 3
    with pytest.raises(ModelError, match=r"failed request \w+ 3 times: HTTP 503"):
        b.score(llama_trec8[:1])
    assert proxy.calls == 3


def test_4xx_is_not_retried_and_the_key_never_shows(proxy: _Proxy, llama_trec8: list[Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("PFR_TEST_SECRET_KEY", "sk-test-0123456789")
    b = OpenAIBackend("smollm2", proxy.url, retry_wait=0.01, api_key_env="PFR_TEST_SECRET_KEY")
    proxy.plan = [_status(400, '{"error": "bad key sk-test-0123456789\\nsecond line"}')]
    with pytest.raises(ModelError, match=r"rejected request \w+ \(HTTP 400\)") as err:
        b.score(llama_trec8[:1])
    assert "sk-test" not in str(err.value) and "***" in str(err.value) and "\n" not in str(err.value)
    assert proxy.calls == 1


def test_server_without_logprobs(proxy: _Proxy, llama_trec8: list[Any]) -> None:
    proxy.drop_logprobs = True
    b = OpenAIBackend("smollm2", proxy.url)
    with pytest.raises(ModelError, match=r"server at http://127\.0\.0\.1:\d+/v1 returned no logprobs"):
        b.score(llama_trec8[:1])


def test_end_of_text_first_gives_the_documented_error(llama_server: str) -> None:
    # llama_cpp.server reports no logprobs when the greedy first token is end-of-text; this prompt does that.
    b = OpenAIBackend("smollm2", llama_server, top_k=5)
    body = {"model": "smollm2", "prompt": "Question: is the sky blue? Options: A. yes B. no\nAnswer:",
            "max_tokens": 1, "temperature": 0, "logprobs": 5}  # fmt: skip
    data = b._post("/completions", body, "toy")
    with pytest.raises(ModelError, match="ended its answer at once"):
        b._top_logprobs(data, "toy")


def test_openai_keeps_the_backend_contract(llama_server: str, llama_trec8: list[Any]) -> None:
    """Both endpoints against the real llama.cpp server (top-K scores with censoring)."""
    from pfr.testing import check_backend

    for endpoint in ("completions", "chat"):
        backend = load_model(f"openai:smollm2@{llama_server}", {"endpoint": endpoint, "top_k": "20"})
        assert "batch independence" in check_backend(backend, llama_trec8[:4], atol=1e-3)
        assert backend.client.http.is_closed


# ---------------------------------------------------------------- unreachable server and bad specs
def test_unreachable_server() -> None:
    port = _free_port()
    with pytest.raises(ModelError, match=rf"cannot reach http://127\.0\.0\.1:{port}/v1"):
        load_model(f"openai:smollm2@http://127.0.0.1:{port}/v1")


def test_bad_specs_and_options() -> None:
    with pytest.raises(ModelError, match="openai:MODEL@BASE_URL"):
        load_model("openai:smollm2")
    with pytest.raises(ModelError, match="openai:MODEL@BASE_URL"):
        load_model("openai:@http://127.0.0.1:1/v1")
    with pytest.raises(ModelError, match="unknown openai option"):
        load_model("openai:m@http://127.0.0.1:1/v1", {"logprobs": "5"})
    with pytest.raises(ModelError, match="endpoint"):
        load_model("openai:m@http://127.0.0.1:1/v1", {"endpoint": "embeddings"})


def test_cli_unreachable_server_exits_2_and_keeps_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    run("baseline:oracle", build("demo", limit=2), store, progress=False)
    with Store(store, create=False) as st:
        before = st.count()
    port = _free_port()
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--model", f"openai:smollm2@http://127.0.0.1:{port}/v1", "--dataset", "demo",
              "--limit", "2", "--store", str(store), "--no-progress"])  # fmt: skip
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pfr: error: cannot reach http://127.0.0.1:{port}/v1")
    with Store(store, create=False) as st:
        assert st.count() == before == 8


# ---------------------------------------------------------------- chat endpoint (last: its prompts share no
# prefix with the plain ones, so it would cost the server's prefix cache for the tests above)
def test_chat_endpoint_matches_in_process_chat_template(llama_server: str, llama_gguf: Path,
                                                        llama_trec8: list[Any]) -> None:  # fmt: skip
    from pfr.models.llamacpp import LlamaCppModel

    reqs = llama_trec8[:2]
    served = load_model(f"openai:smollm2@{llama_server}", {"endpoint": "chat", "top_k": "20"}).score(reqs)
    local = LlamaCppModel(llama_gguf, n_ctx=2048, chat_template=True).score(reqs)
    for s, ref in zip(served, local):
        assert sum(not c for c in s.censored) >= 8
        for lp, cen, exact in zip(s.logits, s.censored, ref.logits):
            if not cen:  # the server renders the GGUF's chat template as the in-process backend does
                assert abs(lp - exact) < 1e-3
        best = native_choice(normalise_scores(ref.logits))
        assert s.censored[best] or native_choice(normalise_scores(s.logits)) == best
