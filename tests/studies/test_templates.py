"""Prompt templates from a study file: the text template's wording, the structured-JSON renderer,
validation with errors naming the key, and the template recorded in the model identity."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.design.types import Design
from pfr.errors import DataError
from pfr.models.lm.prompt import PromptTemplate, render
from pfr.models.lm.templates import JsonTemplate, apply_template, template_from
from pfr.models.registry import load_model
from pfr.studies import load_study


@pytest.fixture(scope="module")
def reqs(data_dir: Path) -> list[Any]:
    return pfr.build("trec", "main", Design(), data_dir=data_dir, limit=2) + pfr.build(
        "trec", "main", Design(info="label"), data_dir=data_dir, limit=1
    )


def test_text_template_fields(reqs: list[Any]) -> None:
    t = template_from({"category-line": "* {id} means {description}", "answer_cue": "Choice:"}, "s.toml: template")
    assert isinstance(t, PromptTemplate) and not isinstance(t, JsonTemplate)
    text = render(reqs[0], t)
    first = reqs[0].inventory[0]
    assert f"* {first.id} means {first.description}\n" in text and text.endswith("Choice:")
    assert render(reqs[0]) != text and render(reqs[0]).endswith("Answer:")


def test_json_renderer(reqs: list[Any]) -> None:
    t = template_from({"renderer": "json"}, "s.toml: template")
    assert isinstance(t, JsonTemplate) and t.to_dict()["renderer"] == "json"
    body, cue = render(reqs[0], t).rsplit("\n", 1)
    assert cue == "Answer:"
    obj = json.loads(body)
    assert list(obj) == ["instruction", "categories", "input", "options", "rule"]
    r = reqs[0]
    assert obj["input"] == r.text and obj["rule"] == r.criterion
    assert obj["options"] == [{"symbol": o.symbol, "label": o.label} for o in r.options]
    assert [c["id"] for c in obj["categories"]] == [c.id for c in r.inventory]
    hidden = json.loads(render(reqs[-1], t).rsplit("\n", 1)[0])  # info = label: no text, the category supplied
    assert "input" not in hidden and hidden["category"]["id"] == reqs[-1].y
    bare = template_from({"renderer": "json", "answer-cue": ""}, "x")
    assert json.loads(render(r, bare))["rule"] == r.criterion


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"categry-line": "x"}, "unknown key 'categry-line' (valid keys: renderer, answer-cue, category-line"),
        ({"option-line": "{letter}. {label}"}, "option-line: bad placeholder 'letter' (allowed: {symbol}, {label})"),
        ({"renderer": "yaml"}, "renderer 'yaml' (use text or json)"),
        ({"renderer": "json", "option-line": "{symbol}"}, "the json renderer takes only instruction and answer-cue"),
    ],
)
def test_bad_templates(table: dict[str, str], message: str) -> None:
    with pytest.raises(DataError) as exc:
        template_from(table, "s.toml: template")
    assert str(exc.value).startswith("s.toml: template: ") and message in str(exc.value)


class _Probe(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"data": []}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_template_is_recorded_in_the_identity(reqs: list[Any], tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Probe)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = load_model(f"openai:m@http://127.0.0.1:{server.server_address[1]}/v1")
    finally:
        server.shutdown()
    before = backend.identity
    apply_template(backend, template_from({"renderer": "json"}, "t"))
    assert backend.identity["template"] == {"renderer": "json", "instruction": PromptTemplate().instruction,
                                            "answer_cue": "Answer:"}  # fmt: skip
    assert before["template"] != backend.identity["template"]  # a changed template is another model key
    assert json.loads(str(backend.prompt(reqs[0])).rsplit("\n", 1)[0])["input"] == reqs[0].text
    python = tmp_path / "m.py"
    python.write_text("def score(r):\n    return [0.0] * len(r.options)\n")
    with pytest.raises(DataError, match="needs an LM backend"):
        apply_template(load_model(f"python:{python}:score"), PromptTemplate())


def test_study_template_table(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[models]]\nmodel = "x"\n[[datasets]]\ndataset = "trec"\n[template]\nrenderer = "json"\n')
    assert isinstance(load_study(path).template, JsonTemplate)
    path.write_text('[[models]]\nmodel = "x"\n[[datasets]]\ndataset = "trec"\n[template]\ninstructon = "x"\n')
    with pytest.raises(DataError, match=rf"{path}: template: unknown key 'instructon'"):
        load_study(path)
