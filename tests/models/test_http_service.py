"""The ``http:URL`` backend against real HTTP services on 127.0.0.1 started here (no mocks of HTTP)."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.registry import load_model
from pfr.run.store import Store
from pfr.testing import check_backend

Answer = tuple[int, dict[str, str], bytes]
Handler = Callable[[Any, dict[str, str]], Answer]
SECRET = "s3cret-router-token-7f1e"


def _json(obj: Any, status: int = 200, **headers: str) -> Answer:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(obj).encode()


def choice_of(body: dict[str, Any]) -> int:
    """The service's decision rule: a fixed function of the request (every option gets chosen)."""
    return sum(map(ord, body["request_id"])) % len(body["options"])


def probs_of(body: dict[str, Any]) -> list[float]:
    n = len(body["options"])
    raw = [1.0 + ((sum(map(ord, body["request_id"])) * (i + 3)) % 7) for i in range(n)]
    return [x / sum(raw) for x in raw]


def label_service(body: Any, headers: dict[str, str]) -> Answer:
    return _json({"label": body["options"][choice_of(body)]["label"], "id": body["request_id"]})


class Service:
    """A decision service on 127.0.0.1 in a thread: ``handler`` answers each POSTed JSON body.

    ``bodies`` keeps every body received (in arrival order); ``stop_after=K`` makes the service go
    away (its socket closed) after answering K calls, as a killed service does.
    """

    def __init__(self, handler: Handler, port: int = 0, stop_after: int | None = None) -> None:
        self.handler, self.stop_after = handler, stop_after
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        service = self

        class Handle(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                with service.lock:
                    if service.stop_after is not None and len(service.bodies) >= service.stop_after:
                        self.close_connection = True
                        return  # gone: no answer
                    service.bodies.append(body)
                    service.headers.append(hdrs)
                    last = service.stop_after is not None and len(service.bodies) >= service.stop_after
                status, extra, out = service.handler(body, hdrs)
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                if last:
                    threading.Thread(target=service.close, daemon=True).start()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handle)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/decide"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.server.shutdown()
            self.server.server_close()

    def ids(self) -> list[str]:
        return [b["request_id"] for b in self.bodies]


@pytest.fixture(scope="module")
def demo() -> list[Any]:
    return pfr.build("demo", panel="main", limit=6)


def _rows(store: Path) -> list[tuple[str, str, str, int, str]]:
    with sqlite3.connect(store / "results.sqlite") as con:
        return list(con.execute("SELECT q.request_id, r.logits, r.logprobs, r.choice, r.meta FROM results r "
                                "JOIN requests q ON q.request_key = r.request_key"))  # fmt: skip


# ----------------------------------------------------------------------------------- label-only answers


def test_label_answers_store_exactly_the_services_choices(service: Any, demo: list[Any], tmp_path: Path,
                                                          pfr_cli: Any) -> None:  # fmt: skip
    svc = service(label_service)
    store = tmp_path / "label"
    summary = pfr.run(f"http:{svc.url}", demo, store, options={"answer": "label"}, progress=False)
    assert summary.scored == len(demo) == len(svc.bodies)
    made = {b["request_id"]: choice_of(b) for b in svc.bodies}
    rows = _rows(store)
    assert {rid: choice for rid, _, _, choice, _ in rows} == made
    for _, logits, logprobs, _, meta in rows:  # label-only: no scores at all, and flagged
        assert json.loads(logits) == [] and json.loads(logprobs) == []
        assert json.loads(meta)["label_only"] is True
    # what the service received: the documented default body, without what gives the answer away
    first = svc.bodies[0]
    assert set(first) == {"request_id", "text", "instruction", "options", "categories", "design"}
    assert set(first["options"][0]) == {"symbol", "label", "category", "description", "fallback"}
    assert sum(o["fallback"] for o in first["options"]) == 1
    assert "assignment" not in first["design"] and "expected" not in json.dumps(first)

    out = {}
    for fmt in ("json", "csv", "text", "markdown", "latex", "html"):
        proc = pfr_cli("report", str(store), "--format", fmt, "--draws", "200")
        assert proc.returncode == 0, proc.stderr
        out[fmt] = proc.stdout
    settings = json.loads(out["json"])["settings"]
    assert settings and all(s["label_only"] == 1.0 for s in settings)
    header, row = (line.split(",") for line in out["csv"].splitlines()[:2])
    assert row[header.index("label_only")] == "1.0" and row[header.index("invalid")] == "0.0"
    for fmt in ("text", "markdown", "latex", "html"):
        assert "label-only" in out[fmt], fmt
    assert "score" in check_backend(load_model(f"http:{svc.url}", {"answer": "label"}), demo[:4])

    proc = pfr_cli("thresholds", "--dev", str(store), "--test", str(store))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "label-only" in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_symbol_and_index_answers_at_a_nested_path(service: Any, demo: list[Any], tmp_path: Path) -> None:
    def handler(body: Any, headers: dict[str, str]) -> Answer:
        i = choice_of(body)
        pick: Any = i if i % 2 else body["options"][i]["symbol"]
        return _json({"decision": {"option": pick}})

    svc = service(handler)
    pfr.run(f"http:{svc.url}", demo, tmp_path / "s", options={"answer": "decision.option"}, progress=False)
    made = {b["request_id"]: choice_of(b) for b in svc.bodies}
    assert {rid: c for rid, _, _, c, _ in _rows(tmp_path / "s")} == made


def test_probabilities_by_label_are_stored_as_their_logs(service: Any, demo: list[Any], tmp_path: Path) -> None:
    def handler(body: Any, headers: dict[str, str]) -> Answer:
        return _json({"scores": {o["label"]: p for o, p in zip(body["options"], probs_of(body))}})

    svc = service(handler)
    store = tmp_path / "p"
    pfr.run(f"http:{svc.url}", demo, store, options={"answer": "scores", "numbers": "prob"}, progress=False)
    sent = {b["request_id"]: probs_of(b) for b in svc.bodies}
    rows = _rows(store)
    assert len(rows) == len(demo)
    for rid, _, logprobs, choice, meta in rows:
        lp = json.loads(logprobs)
        assert lp == pytest.approx([math.log(p) for p in sent[rid]], abs=1e-9)
        assert choice == max(range(len(lp)), key=lambda i: (lp[i], -i))
        assert "label_only" not in json.loads(meta)
    with Store(store, create=False) as st:
        assert not any(r.label_only for r in st.results())
    backend = load_model(f"http:{svc.url}", {"answer": "scores", "numbers": "prob"})
    assert "score" in check_backend(backend, demo[:4])


def test_a_list_in_option_order_and_numbers_required(service: Any, demo: list[Any], tmp_path: Path) -> None:
    svc = service(lambda body, h: _json({"choices": [{"probs": [math.log(p) for p in probs_of(body)]}]}))
    pfr.run(f"http:{svc.url}", demo[:4], tmp_path / "l", options={"answer": "choices.0.probs", "numbers": "logprob"},
            progress=False)  # fmt: skip
    rid, _, logprobs, _, _ = _rows(tmp_path / "l")[0]
    body = next(b for b in svc.bodies if b["request_id"] == rid)
    assert json.loads(logprobs) == pytest.approx([math.log(p) for p in probs_of(body)], abs=1e-9)
    model = load_model(f"http:{svc.url}", {"answer": "choices.0.probs"})
    with pytest.raises(ModelError, match=r"numbers=logprob\|prob\|logit"):
        model.score(demo[:1])


def test_a_positive_log_probability_is_refused_in_one_line(
    service: Any, demo: list[Any], tmp_path: Path, pfr_cli: Any
) -> None:
    """numbers=logprob: a number above 0 (logits sent under the wrong name) stops the run; rounding
    just above 0 (≤ 1e-6) is accepted."""
    svc = service(lambda body, h: _json({"scores": [0.7, *([-1.0] * (len(body["options"]) - 1))]}))
    proc = pfr_cli("run", "-m", f"http:{svc.url}", "--model-opt", "answer=scores", "--model-opt", "numbers=logprob",
                   "-s", str(tmp_path / "x"), "-d", "demo", "--limit", "1", "--no-progress")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "log-probability 0.7 is above 0 (numbers=logprob)" in lines[0] and "numbers=logit" in lines[0], lines[0]
    assert not (tmp_path / "x").exists()

    rounded = service(lambda body, h: _json({"scores": [5e-7, *([-2.0] * (len(body["options"]) - 1))]}))
    got = load_model(f"http:{rounded.url}", {"answer": "scores", "numbers": "logprob"}).score(demo[:1])
    assert got[0].logits[0] == 5e-7
    logits = service(lambda body, h: _json({"scores": [0.7, *([-1.0] * (len(body["options"]) - 1))]}))
    assert len(load_model(f"http:{logits.url}", {"answer": "scores", "numbers": "logit"}).score(demo[:1])) == 1


# ---------------------------------------------------------------------------------- faults and retries


def test_503_503_then_200_is_retried_to_success(service: Any, demo: list[Any], tmp_path: Path) -> None:
    calls: dict[str, int] = {}

    def handler(body: Any, headers: dict[str, str]) -> Answer:
        n = calls[body["request_id"]] = calls.get(body["request_id"], 0) + 1
        return _json({"error": "warming up"}, 503) if n <= 2 else label_service(body, headers)

    svc = service(handler)
    model = load_model(f"http:{svc.url}", {"retry_wait": "0.01", "concurrency": "2"})
    pfr.run(model, demo, tmp_path / "r", progress=False)
    assert all(n == 3 for n in calls.values()) and len(calls) == len(demo)
    assert len(_rows(tmp_path / "r")) == len(demo)
    assert model.client.stats == {"calls": 3 * len(demo), "retries": 2 * len(demo)}  # type: ignore[attr-defined]


def test_retry_after_is_honoured_over_the_backoff(service: Any, demo: list[Any]) -> None:
    seen: list[float] = []

    def handler(body: Any, headers: dict[str, str]) -> Answer:
        seen.append(time.monotonic())
        return _json({}, 429, **{"Retry-After": "1"}) if len(seen) == 1 else label_service(body, headers)

    svc = service(handler)
    model = load_model(f"http:{svc.url}", {"retry_wait": "0.001"})
    assert model.score(demo[:1])[0].label_only
    assert seen[1] - seen[0] >= 0.95


def test_gives_up_with_one_line_after_the_retries(service: Any, demo: list[Any]) -> None:
    svc = service(lambda body, h: _json({"error": "overloaded " * 50}, 500))
    model = load_model(f"http:{svc.url}", {"max_retries": "2", "retry_wait": "0.01"})
    with pytest.raises(ModelError) as err:
        model.score(demo[:1])
    msg = str(err.value)
    assert "3 times" in msg and "HTTP 500" in msg and "\n" not in msg and len(msg) < 400
    assert len(svc.bodies) == 3


def test_4xx_is_not_retried(service: Any, demo: list[Any]) -> None:
    svc = service(lambda body, h: _json({"detail": "bad field"}, 422))
    with pytest.raises(ModelError, match=r"refused request .* \(HTTP 422\): .*bad field"):
        load_model(f"http:{svc.url}", {"retry_wait": "0.01"}).score(demo[:1])
    assert len(svc.bodies) == 1


@pytest.mark.parametrize(
    ("reply", "opts", "expect"),
    [
        ((200, {"Content-Type": "text/html"}, b"<html>" + b"x" * 400 + b"</html>"), {}, "non-JSON: <html>xxx"),
        ((200, {}, json.dumps({"decision": {"other": 1}, "pad": "y" * 400}).encode()), {"answer": "decision.label"},
         "no 'decision.label' in the answer"),
        ((200, {}, b'{"label": "Nonsense"}'), {"strict": "true"}, "'Nonsense' is neither the label nor the symbol"),
        ((200, {}, b'{"label": 7.5}'), {}, "the answer is 7.5: not a label"),  # a wrong type is no answer
        ((200, {}, b'{"scores": [0.5, 0.5]}'), {"answer": "scores", "numbers": "prob"}, "2 numbers for 16 options"),
    ],
)  # fmt: skip
def test_unreadable_answers_are_one_line_with_the_request_and_the_body(
    service: Any, demo: list[Any], tmp_path: Path, pfr_cli: Any, reply: Answer, opts: dict[str, str], expect: str
) -> None:
    svc = service(lambda body, h: reply)
    model_opts = [a for k, v in opts.items() for a in ("--model-opt", f"{k}={v}")]
    proc = pfr_cli("run", "-m", f"http:{svc.url}", *model_opts, "-s", str(tmp_path / "x"), "-d", "demo",
                   "--limit", "1", "--no-progress")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert any(f"request {rid}" in lines[0] for rid in svc.ids()) and expect in lines[0], lines[0]
    assert len(lines[0]) < 520  # the body is cut at 200 characters


@pytest.mark.parametrize(("answer", "bad", "reason"), [("label", "unknown_intent", "unknown-label"),
                                                       ("index", 16, "out-of-range")])  # fmt: skip
def test_a_label_outside_the_options_is_an_invalid_answer_and_the_run_finishes(
    service: Any, tmp_path: Path, pfr_cli: Any, answer: str, bad: Any, reason: str
) -> None:
    """One input answered with no option: stored invalid with the raw answer, reported; strict=true refuses it."""
    target = pfr.build("demo", panel="main", limit=2)[5]  # the second text's RC request

    def handler(body: Any, headers: dict[str, str]) -> Answer:
        i = choice_of(body)
        return _json({answer: bad} if body["request_id"] == target.request_id else
                     {"label": body["options"][i]["label"], "index": i})  # fmt: skip

    svc = service(handler)
    store = tmp_path / "s"
    args = ["run", "-m", f"http:{svc.url}", "--model-opt", f"answer={answer}", "-d", "demo", "--limit", "2",
            "--no-progress"]  # fmt: skip
    proc = pfr_cli(*args, "-s", str(store))
    assert proc.returncode == 0, proc.stderr
    rows = {rid: (choice, json.loads(meta)) for rid, _, _, choice, meta in _rows(store)}
    assert len(rows) == 8 and target.request_id in svc.ids()
    choice, meta = rows.pop(target.request_id)
    assert choice == -1 and meta["raw"] == bad and meta["invalid"] is True and meta["parse"] == reason
    assert meta["label_only"] is True and "service" in meta
    made = {b["request_id"]: choice_of(b) for b in svc.bodies}
    assert {rid: c for rid, (c, _) in rows.items()} == {rid: made[rid] for rid in rows}
    assert not any(m.get("invalid") for _, m in rows.values())

    (s,) = json.loads(pfr_cli("report", str(store), "--format", "json", "--draws", "100").stdout)["settings"]
    assert s["invalid"]["all"] == 1 / 8 and s["invalid"]["RC"] == 1 / 2 and s["parses"] == {reason: 1}
    for fmt in ("text", "markdown", "html"):
        out = pfr_cli("report", str(store), "--format", fmt, "--draws", "100").stdout
        assert "12.5% invalid answers" in out and f"{reason} 1 (invalid: {reason})" in out, fmt

    strict = pfr_cli(*args, "-s", str(tmp_path / "strict"), "--model-opt", "strict=true")
    assert strict.returncode == 2, strict.stderr
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in strict.stderr and f"request {target.request_id}" in lines[0]
    assert ("is neither the label nor the symbol" if reason == "unknown-label" else "out of range") in lines[0]


def test_a_service_killed_mid_run_exits_2_and_a_rerun_scores_each_request_once(
    service: Any, tmp_path: Path, pfr_cli: Any
) -> None:
    first = service(label_service, stop_after=9)
    port = first.port
    store = tmp_path / "killed"
    opts = ["--model-opt", "concurrency=1", "--model-opt", "max_retries=1", "--model-opt", "retry_wait=0.05"]
    args = ["run", "-m", f"http:{first.url}", *opts, "-s", str(store), "-d", "demo", "--limit", "6", "--no-progress"]
    proc = pfr_cli(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    stored = {rid for rid, *_ in _rows(store)}
    assert stored == set(first.ids()) and len(stored) == 9  # every answered request was committed

    second = service(label_service, port=port)
    proc = pfr_cli(*args)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(store)
    ids = [rid for rid, *_ in rows]
    assert len(ids) == len(set(ids)) == 24  # 6 texts × 4 requests, each stored once
    assert set(second.ids()) == set(ids) - stored and len(second.ids()) == 24 - 9  # nothing asked twice
    proc = pfr_cli(*args)
    assert proc.returncode == 0 and "0 scored now" in proc.stderr and len(second.ids()) == 15


# ----------------------------------------------------------------------------------- body, batch, identity


def test_headers_from_the_environment_never_leave_a_trace(service: Any, tmp_path: Path, pfr_cli: Any) -> None:
    def handler(body: Any, headers: dict[str, str]) -> Answer:
        if headers.get("authorization") != f"Bearer {SECRET}":
            return _json({"error": f"unauthorised: {headers.get('authorization')}"}, 401)
        return label_service(body, headers)

    svc = service(handler)
    store = tmp_path / "auth"
    env = {"ROUTER_TOKEN": f"Bearer {SECRET}"}
    base = ["run", "-m", f"http:{svc.url}", "--model-opt", "header=Authorization:env:ROUTER_TOKEN", "-s", str(store),
            "-d", "demo", "--limit", "2", "--no-progress"]  # fmt: skip
    proc = pfr_cli(*base, env=env)
    assert proc.returncode == 0, proc.stderr
    outputs = [proc.stdout + proc.stderr]
    for fmt in ("json", "text", "html"):
        outputs.append(pfr_cli("report", str(store), "--format", fmt, "--draws", "100").stdout)
    assert pfr_cli("export", str(store), "--out", str(tmp_path / "e.jsonl")).returncode == 0
    outputs.append((tmp_path / "e.jsonl").read_text())
    # a service that echoes the header in an error: the message shows *** instead
    bad = pfr_cli(*base[:5], "-s", str(tmp_path / "bad"), "-d", "demo", "--limit", "1", "--no-progress",
                  env={"ROUTER_TOKEN": f"Bearer {SECRET}x"})  # fmt: skip
    assert bad.returncode == 2 and "HTTP 401" in bad.stderr and "***" in bad.stderr, bad.stderr
    outputs.append(bad.stdout + bad.stderr)
    for text in outputs:
        assert SECRET not in text
    for f in store.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f


def test_a_missing_environment_variable_is_named() -> None:
    with pytest.raises(ModelError, match="NO_SUCH_TOKEN_VAR is not set"):
        load_model("http:http://127.0.0.1:9/decide", {"header": "Authorization:env:NO_SUCH_TOKEN_VAR"})


def test_body_template_and_batch(service: Any, demo: list[Any], tmp_path: Path) -> None:
    template = tmp_path / "body.j2"
    template.write_text('{"inputs": [{% for r in requests %}{"q": {{ r.text|tojson }}, "id": {{ r.request_id|tojson }},'
                        ' "n": {{ r.options|length }}}{% if not loop.last %},{% endif %}{% endfor %}]}')  # fmt: skip

    def handler(body: Any, headers: dict[str, str]) -> Answer:
        return _json([{"pick": sum(map(ord, x["id"])) % x["n"]} for x in body["inputs"]])

    svc = service(handler)
    opts = {"body": str(template), "batch": "4", "answer": "pick", "concurrency": "2"}
    pfr.run(f"http:{svc.url}", demo, tmp_path / "b", options=opts, progress=False)
    assert len(svc.bodies) == len(demo) // 4 and all(len(b["inputs"]) == 4 for b in svc.bodies)
    made = {x["id"]: sum(map(ord, x["id"])) % x["n"] for b in svc.bodies for x in b["inputs"]}
    assert {rid: c for rid, _, _, c, _ in _rows(tmp_path / "b")} == made


def test_body_template_is_sandboxed_and_must_render_json(service: Any, demo: list[Any], tmp_path: Path) -> None:
    svc = service(label_service)
    escape = tmp_path / "escape.j2"
    escape.write_text('{"x": "{{ request.__class__.__mro__[1].__subclasses__() }}"}')
    with pytest.raises(ModelError, match=r"escape\.j2.*rendering request"):
        load_model(f"http:{svc.url}", {"body": str(escape)}).score(demo[:1])
    plain = tmp_path / "plain.j2"
    plain.write_text("text={{ text }}")
    with pytest.raises(ModelError, match=r"plain\.j2: rendering request .* gave no JSON"):
        load_model(f"http:{svc.url}", {"body": str(plain)}).score(demo[:1])
    assert svc.bodies == []


def test_identity_has_no_credentials_and_follows_version_template_and_answer(tmp_path: Path) -> None:
    url = "http://user:pw-9q@127.0.0.1:9/decide?api_key=k-77z&region=eu"
    ident = load_model(f"http:{url}").identity
    blob = json.dumps(ident)
    assert "pw-9q" not in blob and "k-77z" not in blob and "user" not in blob
    assert ident["url"] == "http://127.0.0.1:9/decide?api_key=***&region=***"  # every query value hidden
    template = tmp_path / "t.j2"
    template.write_text('{"text": {{ text|tojson }}}')
    variants = [{}, {"version": "2026-12-01"}, {"answer": "decision.label"}, {"body": str(template)},
                {"answer": "scores", "numbers": "prob"}, {"timeout": "5", "concurrency": "9"}]  # fmt: skip
    keys = [json.dumps(load_model(f"http:{url}", v).identity, sort_keys=True) for v in variants]
    assert len(set(keys[:5])) == 5 and keys[5] == keys[0]  # timeouts and concurrency do not change decisions
    assert load_model(f"http:{url}", {"version": "v2"}).identity["name"].endswith("@v2")


@pytest.mark.parametrize(
    ("spec", "opts", "expect"),
    [
        ("http:ftp://x/y", {}, "http model spec must be http:URL"),
        ("http:http://127.0.0.1:9/", {"numbers": "odds"}, "numbers='odds'"),
        ("http:http://127.0.0.1:9/", {"retries": "3"}, "unknown http option retries"),
        ("http:http://127.0.0.1:9/", {"header": "no colon"}, "header="),
        ("http:http://127.0.0.1:9/", {"concurrency": "0"}, "concurrency"),
        ("http:http://127.0.0.1:9/", {"strict": "perhaps"}, "strict"),
        ("http:http://127.0.0.1:9/", {"body": "/no/such/body.j2"}, "body=/no/such/body.j2"),
    ],
)
def test_bad_specs_and_options_are_one_line(spec: str, opts: dict[str, str], expect: str) -> None:
    with pytest.raises(ModelError) as err:
        load_model(spec, opts)
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_a_slow_answer_times_out_and_is_retried(service: Any, demo: list[Any]) -> None:
    def handler(body: Any, headers: dict[str, str]) -> Answer:
        time.sleep(0.6)
        return label_service(body, headers)

    svc = service(handler)
    model = load_model(f"http:{svc.url}", {"timeout": "0.2", "max_retries": "1", "retry_wait": "0.01"})
    with pytest.raises(ModelError, match=r"failed request .* 2 times: timed out"):
        model.score(demo[:1])
    assert len(svc.bodies) == 2


def test_concurrency_bounds_the_calls_in_flight(service: Any, demo: list[Any]) -> None:
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def handler(body: Any, headers: dict[str, str]) -> Answer:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return label_service(body, headers)

    svc = service(handler)
    scores = load_model(f"http:{svc.url}", {"concurrency": "3"}).score(demo[:12])
    assert state["most"] == 3 and len(scores) == 12
    made = {b["request_id"]: choice_of(b) for b in svc.bodies}
    assert [s.choice for s in scores] == [made[r.request_id] for r in demo[:12]]  # answers in request order
