"""``openai:… --model-opt decide=generate`` and ``decide=choice``: the parse rule, invalid answers through store,
metrics and report, against a scripted completions server and llama.cpp's real server (no mocks of HTTP)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.decide import parse_answer
from pfr.models.openai.text import CHOICE_HINT
from pfr.models.registry import load_model
from pfr.run.store import Store

from .completions import Completions


@pytest.fixture(scope="module")
def demo() -> list[Any]:
    return pfr.build("demo", panel="main", limit=4)


def test_the_parse_rule(demo: list[Any]) -> None:
    r = demo[0]
    b = r.options[1]
    assert parse_answer("B", r) == 1 and parse_answer(" B", r) == 1 and parse_answer("B.", r) == 1
    assert parse_answer("**B)** whatever", r) == 1 and parse_answer("(B)", r) == 1
    assert parse_answer(f"B {b.label}", r) == 1 and parse_answer(f"b {b.label}", r) is None  # symbols are exact
    assert parse_answer(b.label.upper() + ".", r) == 1  # a label, ignoring case and a final full stop
    fb = r.fallback_index
    assert parse_answer(r.options[fb].label, r) == fb
    assert parse_answer("B\nA", r) == 1  # only the first line counts
    for invalid in ("", "   ", "Banana", "The answer is B", "B because", "Z9"):
        assert parse_answer(invalid, r) is None, invalid


@pytest.fixture
def completions() -> Iterator[Any]:
    servers: list[Completions] = []

    def start(reply: Any) -> Completions:
        servers.append(Completions(reply))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _reply_for(prompt: str) -> str:
    """The fallback's letter under the union rule; no valid answer under the complement rule."""
    if "none of" in prompt.split("Rule:")[-1]:
        return "I cannot tell"
    for line in prompt.splitlines():
        if line.endswith(". Other"):
            return " " + line.split(".")[0]
    return "???"


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_invalid_answers_are_stored_counted_wrong_and_reported(completions: Any, demo: list[Any], tmp_path: Path,
                                                               pfr_cli: Any, endpoint: str) -> None:  # fmt: skip
    srv = completions(_reply_for)
    store = tmp_path / "gen"
    opts = {"decide": "generate", "endpoint": endpoint, "seed": "7"}
    pfr.run(f"openai:scripted@{srv.url}", demo, store, options=opts, progress=False)
    assert all(p["temperature"] == 0 and p["seed"] == 7 for p in srv.prompts)
    with Store(store, create=False) as st:
        results = list(st.results())
    assert len(results) == len(demo)
    for r in results:
        raw = r.meta["raw"]
        assert raw == _reply_for(pfr.load_model(f"openai:scripted@{srv.url}", opts).prompt(r.request))
        if r.request.definition == "C":  # every C answer is invalid: choice -1, never an option
            assert r.meta["invalid"] is True and r.choice == -1 and r.label_only
        else:
            assert r.meta["invalid"] is False and r.choice == r.request.fallback_index
    proc = pfr_cli("report", str(store), "--format", "json", "--draws", "100")
    assert proc.returncode == 0, proc.stderr
    (s,) = json.loads(proc.stdout)["settings"]
    assert s["invalid"] == {"all": 0.5, "RU": 0.0, "RC": 1.0, "FU": 0.0, "FC": 1.0}
    # always the fallback under U; invalid under C: wrong everywhere, never a fallback pick (docs/method.md §6.1)
    assert (s["A+_U"]["value"], s["A-_U"]["value"], s["F+_U"]["value"]) == (0.0, 1.0, 1.0)
    assert (s["A+_C"]["value"], s["A-_C"]["value"], s["F+_C"]["value"], s["J_C"]["value"]) == (0.0, 0.0, 0.0, 0.0)
    assert (s["P4"]["value"], s["DR_R"]["value"], s["DR_F"]["value"], s["INV"]["value"]) == (0.0, 1.0, 1.0, 0.5)
    for fmt in ("text", "markdown", "latex", "html"):
        out = pfr_cli("report", str(store), "--format", fmt, "--draws", "100").stdout
        assert "50.0% invalid answers" in out and "RC 100.0%" in out, fmt
    csv_out = pfr_cli("report", str(store), "--format", "csv", "--draws", "100").stdout.splitlines()
    assert csv_out[0].endswith("invalid,invalid_RU,invalid_RC,invalid_FU,invalid_FC")
    assert csv_out[1].endswith(",0.5,0.0,1.0,0.0,1.0")
    assert pfr_cli("export", str(store), "--out", str(tmp_path / "e.jsonl")).returncode == 0
    rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert {row["meta"]["raw"] for row in rows} >= {"I cannot tell"}


def _contradict(prompt: str) -> str:
    """Under the union rule the fallback's letter with another option's label ("A. mfa_setup": a contradiction);
    under the complement rule the fallback's letter with its own label ("A) Other": both)."""
    options = [line.split(". ", 1) for line in prompt.split("Options:")[1].split("Rule:")[0].strip().splitlines()]
    fallback = next(sym for sym, label in options if label == "Other")
    if "none of" in prompt.split("Rule:")[-1]:
        return f"{fallback}) Other"
    return f"{fallback}. " + next(label for _, label in options if label != "Other")


def test_a_letter_and_a_label_naming_two_options_are_invalid_and_counted(completions: Any, tmp_path: Path,
                                                                         pfr_cli: Any) -> None:  # fmt: skip
    srv = completions(_contradict)
    store = tmp_path / "chat"
    proc = pfr_cli("run", "-m", f"openai:scripted@{srv.url}", "--model-opt", "decide=generate", "--model-opt",
                   "endpoint=chat", "-d", "demo", "--limit", "2", "-s", str(store), "--no-progress")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert all("messages" in p for p in srv.prompts) and len(srv.prompts) == 8
    with Store(store, create=False) as st:
        results = list(st.results())
    for r in results:
        fb = r.request.fallback_index
        if r.request.definition == "U":  # "A. mfa_setup": the letter is Other, the label another option
            assert r.meta["raw"].startswith(r.request.options[fb].symbol + ". ") and not r.meta["raw"].endswith("Other")
            assert (r.choice, r.meta["invalid"], r.meta["parse"]) == (-1, True, "contradiction")
        else:
            assert (r.choice, r.meta["invalid"], r.meta["parse"]) == (fb, False, "both")
    proc = pfr_cli("report", str(store), "--format", "json", "--draws", "100")
    assert proc.returncode == 0, proc.stderr
    (s,) = json.loads(proc.stdout)["settings"]
    assert s["parses"] == {"both": 4, "contradiction": 4}
    assert s["invalid"] == {"all": 0.5, "RU": 1.0, "RC": 0.0, "FU": 1.0, "FC": 0.0}
    for fmt in ("text", "markdown", "latex", "html"):
        out = pfr_cli("report", str(store), "--format", fmt, "--draws", "100").stdout
        assert "both 4, contradiction 4 (invalid: contradiction)" in out and "50.0% invalid answers" in out, fmt


def test_identity_records_sampling_and_options_are_checked(completions: Any) -> None:
    srv = completions(_reply_for)
    a = load_model(f"openai:m@{srv.url}", {"decide": "generate"}).identity
    b = load_model(f"openai:m@{srv.url}", {"decide": "generate", "seed": "1"}).identity
    assert a["sampling"] == {"temperature": 0.0, "seed": 0, "max_tokens": 8} and a != b
    assert a["decide"] == "generate" and a["parse_rule"] == 2
    with pytest.raises(ModelError, match="decide='guess'"):
        load_model(f"openai:m@{srv.url}", {"decide": "guess"})
    for scoring_only in ("top_k", "merge", "scoring", "temperature"):  # they would change nothing here
        with pytest.raises(ModelError, match=rf"^model option {scoring_only} applies to decide=scores only "
                                             r"\(not decide=generate\)$"):  # fmt: skip
            load_model(f"openai:m@{srv.url}", {"decide": "generate", scoring_only: "5"})
    with pytest.raises(ModelError, match="model option max_tokens=0: must be a whole number >= 1"):
        load_model(f"openai:m@{srv.url}", {"decide": "choice", "max_tokens": "0"})
    with pytest.raises(ModelError, match=r"cannot reach http://127\.0\.0\.1:9/v1"):
        load_model("openai:m@http://127.0.0.1:9/v1", {"decide": "choice", "max_retries": "0"})


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_choice_asks_for_a_strict_schema_of_the_symbols(completions: Any, demo: list[Any], endpoint: str) -> None:
    """The request carries the schema; the answer is read by the same rule after unwrapping, and an answer
    the schema does not allow (not one of the symbols) is invalid, never mapped to an option."""
    answers = iter(['{"answer": "B"}', '{ "answer" : "A" }', '{"answer": "ZZ"}', '{"answer": "'])
    srv = completions(lambda prompt: next(answers))
    b = load_model(f"openai:m@{srv.url}", {"decide": "choice", "endpoint": endpoint, "concurrency": "1"})
    assert b.identity["decide"] == "choice" and b.identity["name"] == "m [choice]"
    got = b.score(demo[:4])
    assert [(g.choice, g.meta["invalid"]) for g in got] == [(1, False), (0, False), (-1, True), (-1, True)]
    assert got[2].meta["raw"] == '{"answer": "ZZ"}' and got[3].meta["raw"] == '{"answer": "'  # cut by max_tokens
    for body, r in zip(srv.prompts, demo):
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["properties"]["answer"]["enum"] == [o.symbol for o in r.options]
        assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 0, 24)
        assert ("messages" in body) is (endpoint == "chat")


def test_a_server_that_ignores_the_schema_stops_the_run(completions: Any, demo: list[Any]) -> None:
    srv = completions(lambda prompt: " B. HUM:ind")
    b = load_model(f"openai:m@{srv.url}", {"decide": "choice"})
    with pytest.raises(ModelError, match=r"ignored response_format json_schema for request \w+ \(it answered "
                                         r"'B. HUM:ind'\); use decide=generate$"):  # fmt: skip
        b.score(demo[:1])


def test_llamacpp_server_refuses_choice_in_one_line(llama_server: str, llama_trec8: list[Any]) -> None:
    """llama_cpp.server's chat endpoint takes response_format json_object only (it answers a json_schema with
    HTTP 500); its completions endpoint ignores response_format."""
    for endpoint, says in (("chat", CHOICE_HINT + ")"), ("completions", "; use decide=generate")):
        b = load_model(f"openai:smollm2@{llama_server}", {"decide": "choice", "endpoint": endpoint, "max_retries": "0"})
        with pytest.raises(ModelError) as err:
            b.score(llama_trec8[:1])
        assert str(err.value).endswith(says) and "\n" not in str(err.value), str(err.value)


def test_llamacpp_server_completes_with_an_invalid_rate_per_setting(
    llama_server: str, llama_trec8: list[Any], tmp_path: Path, pfr_cli: Any
) -> None:
    store = tmp_path / "llama"
    summary = pfr.run(f"openai:smollm2@{llama_server}", llama_trec8, store, options={"decide": "generate"},
                      progress=False)  # fmt: skip
    assert summary.scored == 8
    with sqlite3.connect(store / "results.sqlite") as con:
        metas = [json.loads(m) for (m,) in con.execute("SELECT meta FROM results")]
    assert len(metas) == 8 and all(isinstance(m["raw"], str) and "invalid" in m for m in metas)
    proc = pfr_cli("report", str(store), "--format", "json", "--draws", "100")
    assert proc.returncode == 0, proc.stderr
    settings = json.loads(proc.stdout)["settings"]
    assert settings and all(set(s["invalid"]) == {"all", "RU", "RC", "FU", "FC"} for s in settings)
