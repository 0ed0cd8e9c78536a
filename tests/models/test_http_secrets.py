"""No secret of an ``http:`` URL in any output (issue 31 item 6): query values (``?code=`` of an Azure
Function, ``?pwd=``, ``?session=``, ``?jwt=``), user info and a key-like path segment (a webhook's
key) never reach the store, an export, a report
in any format, JUnit, the GitHub step summary or a message; a hash of the whole URL still tells two
keys apart; ``http:env:VAR`` reads the URL from the environment; ``name=`` labels the setting.

Real services on 127.0.0.1 started here (tests/models/test_http_service.py's ``Service``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from pfr.errors import ModelError
from pfr.models.registry import load_model

from .test_http_service import Answer, Service, _json, label_service

SECRETS = {"code": "c0de-AzFn-91xq", "pwd": "pw-Hunter2-zz", "session": "sess-77aa-e1", "jwt": "eyJhbGciOi.jwt-b0dy"}
USER, PASSWORD = "alice-usr-k9", "pa55-w0rd-q3"
PATH_KEY = "hK3y-20261207-x9Qv"  # 16+ characters, letters and digits: a key in the path (key_like)
ALL = [*SECRETS.values(), USER, PASSWORD, PATH_KEY]


def _url(svc: Service, **change: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {**SECRETS, **change}.items())
    return f"http://{USER}:{PASSWORD}@127.0.0.1:{svc.port}/hooks/{PATH_KEY}/decide?{query}"


def _clean(text: str | bytes, where: str) -> None:
    raw = text.encode() if isinstance(text, str) else text
    for secret in ALL:
        assert secret.encode() not in raw, f"{secret} in {where}"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_query_value_or_user_info_in_any_output(service: Any, tmp_path: Path, pfr_cli: Any) -> None:
    def echoing(body: Any, headers: dict[str, str]) -> Answer:  # a 500 that echoes what it was called with
        return _json({"error": f"failed: {SECRETS['code']} {SECRETS['pwd']} {SECRETS['session']} {SECRETS['jwt']}",
                      "url": f"/hooks/{PATH_KEY}/decide?code={SECRETS['code']}&jwt={SECRETS['jwt']}"},
                     500)  # fmt: skip

    svc = service(label_service)
    store = tmp_path / "store"
    outputs: list[tuple[str, str]] = []

    def cli(*args: str, ok: int | None = 0, **kw: Any) -> Any:
        proc = pfr_cli(*args, **kw)
        outputs.append((" ".join(args[:2]), proc.stdout + proc.stderr))
        if ok is not None:
            assert proc.returncode == ok, proc.stderr
        return proc

    run = ["run", "-d", "demo", "--limit", "2", "-s", str(store), "--progress-every", "0"]
    cli(*run, "-m", f"http:{_url(svc)}", "--model-opt", "name=router-v2")
    # the same service with another key: another setting under the same name, never merged
    cli(*run, "-m", f"http:{_url(svc, code='c0de-other-key')}", "--model-opt", "name=router-v2")
    # the URL from the environment: the same identity as the URL given, the value never recorded
    cli(*run, "-m", "http:env:PFR_TEST_ROUTER_URL", "--model-opt", "name=router-v2",
        env={"PFR_TEST_ROUTER_URL": _url(svc)})  # fmt: skip
    cli("run", "-d", "demo", "--limit", "2", "-s", str(tmp_path / "dry"), "--dry-run", "-m", f"http:{_url(svc)}")
    assert not (tmp_path / "dry").exists()

    report = json.loads(cli("report", str(store), "--format", "json", "--draws", "100").stdout)
    labels = sorted({s["model"] for s in report["settings"]})
    assert len(labels) == 2 and all(label.startswith("router-v2 [http ") for label in labels), labels
    for fmt in ("text", "markdown", "csv", "latex", "html"):
        text = cli("report", str(store), "--format", fmt, "--draws", "100").stdout
        assert "router-v2" in text, fmt
    html = tmp_path / "report.html"
    cli("report", str(store), "--format", "html", "--draws", "100", "--out", str(html))
    cli("export", str(store), "--out", str(tmp_path / "e.jsonl"))
    summary = tmp_path / "step-summary.md"
    cli("check", str(store), "--max", "DR-F=1", "--on", "point", "--junit", str(tmp_path / "junit.xml"),
        "--draws", "100", env={"GITHUB_STEP_SUMMARY": str(summary)})  # fmt: skip
    assert "router-v2" in summary.read_text() and "router-v2" in (tmp_path / "junit.xml").read_text()

    # error paths: a 500 that echoes the secrets, a service that is not there
    bad = service(echoing)
    err = cli("run", "-d", "demo", "--limit", "1", "-s", str(tmp_path / "bad"), "-m", f"http:{_url(bad)}",
              "--model-opt", "max_retries=0", ok=2)  # fmt: skip
    assert "HTTP 500" in err.stderr and "code=***" in err.stderr, err.stderr
    gone = (f"http://{USER}:{PASSWORD}@127.0.0.1:{_closed_port()}/hooks/{PATH_KEY}/decide?code={SECRETS['code']}"
            f"&jwt={SECRETS['jwt']}")  # fmt: skip
    err = cli("run", "-d", "demo", "--limit", "1", "-s", str(tmp_path / "gone"), "-m", f"http:{gone}",
              "--model-opt", "max_retries=0", ok=2)  # fmt: skip
    assert "cannot reach" in err.stderr and "/hooks/***/decide?code=***" in err.stderr, err.stderr
    err = cli("run", "-d", "demo", "--limit", "1", "-s", str(tmp_path / "unset"), "-m", "http:env:PFR_NO_SUCH_URL",
              ok=2)  # fmt: skip
    assert len(err.stderr.strip().splitlines()) == 1, err.stderr
    assert "PFR_NO_SUCH_URL is not set" in err.stderr and "Traceback" not in err.stderr, err.stderr

    for where, text in outputs:
        _clean(text, where)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "results.sqlite" for p in files)
    for f in files:
        _clean(f.read_bytes(), str(f))


def test_identity_hides_every_query_value_and_tells_keys_apart() -> None:
    base = "http://u-ser:p-ass@127.0.0.1:9/decide?code=AAAA-1111&region=eu"
    one, two = load_model(f"http:{base}").identity, load_model(f"http:{base.replace('AAAA', 'BBBB')}").identity
    assert one["url"] == two["url"] == "http://127.0.0.1:9/decide?code=***&region=***"
    assert one["url_hash"] != two["url_hash"]
    _clean(json.dumps(one), "identity")
    plain = load_model("http:http://127.0.0.1:9/decide").identity
    assert "url_hash" not in plain  # a URL that hides nothing keeps the identity it always had
    named = load_model(f"http:{base}", {"name": "router-v2"}).identity
    assert named["name"] == "router-v2" and named["url_hash"] == one["url_hash"]


def test_a_key_in_the_path_is_hidden_and_tells_keys_apart() -> None:
    """A webhook-style URL whose key is a path segment: shown and recorded as ``***``, from the
    environment as given; two keys are two settings by the hash; ordinary segments stay."""
    from pfr.models.http.client import key_like, safe_url

    url = f"http://127.0.0.1:9/services/T0001/B0002/{PATH_KEY}"
    one, two = load_model(f"http:{url}").identity, load_model(f"http:{url.replace('x9Qv', 'x9Qw')}").identity
    assert one["url"] == two["url"] == "http://127.0.0.1:9/services/T0001/B0002/***"
    assert one["url_hash"] != two["url_hash"] and one["name"] == "http:http://127.0.0.1:9/services/T0001/B0002/***"
    _clean(json.dumps([one, two]), "identity")
    assert safe_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    assert safe_url("http://h/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/sendMessage") == "http://h/***/sendMessage"
    assert not key_like("completions-endpoint") and not key_like("v2") and key_like("a1b2c3d4e5f6g7h8")


def test_an_ipv6_host_keeps_its_brackets_and_a_fragment_is_a_secret() -> None:
    """``http://[::1]:8000/…`` is shown as that URL, not as ``http://::1:8000/…``; a fragment is never
    shown, and its value is scrubbed from a message that echoes the URL."""
    from pfr.models.http.client import safe_url, scrub_text, url_secrets

    assert safe_url("http://[::1]:8000/decide?key=abcd") == "http://[::1]:8000/decide?key=***"
    assert load_model("http:http://[::1]:8000/decide").identity["url"] == "http://[::1]:8000/decide"
    url = "http://127.0.0.1:9/decide#token=Fr4gment-Secret"
    assert safe_url(url) == "http://127.0.0.1:9/decide"
    assert "Fr4gment-Secret" in url_secrets(url)
    said = scrub_text(f"POST {url} failed: connection refused", url_secrets(url))
    assert "Fr4gment" not in said and said.startswith("POST http://127.0.0.1:9/decide#token=***"), said


def test_http_env_reads_the_url_and_an_unset_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://127.0.0.1:9/decide?code=from-env-secret"
    monkeypatch.setenv("PFR_TEST_URL", url)
    assert load_model("http:env:PFR_TEST_URL").identity == load_model(f"http:{url}").identity
    with pytest.raises(ModelError, match=r"^http:env:PFR_NOT_SET_URL: the environment variable PFR_NOT_SET_URL"):
        load_model("http:env:PFR_NOT_SET_URL")
    monkeypatch.setenv("PFR_TEST_URL", "ftp://x/y?code=from-env-secret")
    with pytest.raises(ModelError) as exc:
        load_model("http:env:PFR_TEST_URL")
    assert "from-env-secret" not in str(exc.value) and "env:PFR_TEST_URL" in str(exc.value)


def test_openai_base_url_secrets_and_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from pfr.models.base import no_contact

    port = _closed_port()
    base = f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/{PATH_KEY}/v1?code={SECRETS['code']}"
    with pytest.raises(ModelError) as exc:  # nothing listens: the message names the URL, hides the secrets
        load_model(f"openai:m@{base}", {"max_retries": "0"})
    assert f"cannot reach http://127.0.0.1:{port}/***/v1?code=***" in str(exc.value)
    _clean(str(exc.value), "openai error")
    with no_contact():  # identities without a server (a dry run)
        one = load_model(f"openai:m@{base}", {"scoring": "top_k", "name": "chat-v1"}).identity
        two = load_model(f"openai:m@{base.replace('AzFn', 'AzFm')}", {"scoring": "top_k", "name": "chat-v1"}).identity
        gen = load_model(f"openai:m@{base}", {"decide": "generate"}).identity
        monkeypatch.setenv("PFR_TEST_BASE", base)
        from_env = load_model("openai:m@env:PFR_TEST_BASE", {"scoring": "top_k", "name": "chat-v1"}).identity
    assert one["name"] == "chat-v1" and one["model"] == "m" and one["url_hash"] != two["url_hash"]
    assert from_env == one and gen["url"] == f"http://127.0.0.1:{port}/***/v1?code=***" and "url_hash" in gen
    _clean(json.dumps([one, two, gen]), "openai identities")
    with pytest.raises(ModelError, match="PFR_NO_BASE is not set"):
        load_model("openai:m@env:PFR_NO_BASE")
