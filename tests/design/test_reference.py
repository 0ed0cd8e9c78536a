"""The classify-then-map reference requests (docs/method.md §4.2): one full-inventory request per text,
mapped by g_S onto exactly the quads of ``--task category``; the 62-symbol limit of letter scoring."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import pfr
from pfr.design.reference import g_s, mapped_quad
from pfr.design.types import SYMBOLS, Design, Request
from pfr.errors import ModelError, PfrError
from pfr.models.lm.prompt import render

REF = Design(task="classify-then-map")


@pytest.fixture(scope="module")
def trec_ref(data_dir: Path) -> list[Request]:
    return pfr.build("trec", "main", REF, data_dir=data_dir)


@pytest.fixture(scope="module")
def trec_main(data_dir: Path) -> list[Request]:
    return pfr.build("trec", "main", Design(), data_dir=data_dir)


def test_one_full_inventory_request_per_text(trec_ref: list[Request], trec_main: list[Request]) -> None:
    assert len(trec_ref) == 500
    assert [r.text_id for r in trec_ref] == [r.text_id for r in trec_main[::4]]
    assert [r.index for r in trec_ref] == list(range(500))
    inventory = sorted(c.id for c in trec_ref[0].inventory)
    assert len(inventory) == 50
    for r in trec_ref:
        assert [o.category for o in r.options] == inventory  # lexicographic, every category
        assert "".join(o.symbol for o in r.options) == SYMBOLS[:50]
        assert not any(o.is_fallback for o in r.options) and r.fallback_index == -1
        assert r.options[r.expected].category == r.y
        assert r.factors["task"] == "classify-then-map" and r.design == "task=classify-then-map"
    assert len({r.request_id for r in trec_ref}) == 500


def test_mapped_quads_are_the_category_quads(trec_ref: list[Request], trec_main: list[Request]) -> None:
    for i, ref in enumerate(trec_ref):
        built = trec_main[4 * i : 4 * i + 4]
        mapped = [q for q, _ in mapped_quad(ref, ref.y)]
        for a, b in zip(mapped, built):
            assert (a.assignment, a.definition, a.options, a.expected, a.fallback_index, a.criterion) == (
                b.assignment, b.definition, b.options, b.expected, b.fallback_index, b.criterion
            )  # fmt: skip


def test_g_s_by_hand(trec_ref: list[Request], trec_main: list[Request]) -> None:
    """Every prediction (gold, another regular option, a fallback member) maps as g_S says."""
    inventory = [o.category for o in trec_ref[0].options]
    for i, ref in enumerate(trec_ref[:120]):
        h = int(hashlib.sha256(ref.text_id.encode()).hexdigest(), 16)
        for pred in (ref.y, inventory[h % 50], inventory[(h // 50) % 50]):
            for q, choice in zip(trec_main[4 * i : 4 * i + 4], [c for _, c in mapped_quad(ref, pred)]):
                regular = [o.category for o in q.options if not o.is_fallback]
                want = next(j for j, o in enumerate(q.options) if o.category == pred) if pred in regular else None
                assert choice == (q.fallback_index if want is None else want)
                assert g_s(q, pred) == choice
    # gold under R is its own option; under F (gold replaced) the fallback
    ref = trec_ref[0]
    r_u, _, f_u, _ = (c for _, c in mapped_quad(ref, ref.y))
    q = trec_main[:4]
    assert r_u == q[0].expected and f_u == q[2].fallback_index


def test_other_factors_carry_over(data_dir: Path) -> None:
    """Seed, choice set, position and option count of the reference design are those of the quads."""
    design = Design(task="classify-then-map", k=8, choice_set=2, position=3, seed=5)
    ref = pfr.build("trec", "main", design, data_dir=data_dir, limit=6, seed=0)
    main = pfr.build("trec", "main", Design(k=8, choice_set=2, position=3, seed=5), data_dir=data_dir, limit=6)
    for i, r in enumerate(ref):
        assert [q.options for q, _ in mapped_quad(r, r.y)] == [q.options for q in main[4 * i : 4 * i + 4]]
    with pytest.raises(PfrError, match="options"):
        pfr.build("trec", "main", Design(task="classify-then-map", k=51), data_dir=data_dir, limit=2)


def test_inventory_over_62_symbols(data_dir: Path) -> None:
    clinc = pfr.build("clinc150", "main", REF, data_dir=data_dir, limit=3)
    r = clinc[0]
    symbols = [o.symbol for o in r.options]
    assert len(symbols) == 150 and len(set(symbols)) == 150
    assert "".join(symbols[:62]) == SYMBOLS and symbols[62:64] == ["63", "64"]
    with pytest.raises(ModelError, match=r"150 options, more than the 62 answer symbols"):
        render(r)
    render(pfr.build("trec", "main", REF, data_dir=data_dir, limit=1)[0])  # 50 options: fine


class _Models(BaseHTTPRequestHandler):
    """Answers the backend's start-up probe; counts completion calls (there must be none)."""

    posts = 0

    def do_GET(self) -> None:
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        type(self).posts += 1
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_letter_backend_refuses_with_one_line(pfr_cli, data_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An OpenAI-compatible (letter-scoring) backend refuses before any completion call; exit 2, one line."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        args = ["run", "--model", f"openai:m@{url}", "--dataset", "clinc150", "--task", "classify-then-map",
                "--limit", "2", "--store", str(tmp_path / "s"), "--data-dir", str(data_dir)]  # fmt: skip
        proc = pfr_cli(*args)
    finally:
        server.shutdown()
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "150 options, more than the 62 answer symbols" in lines[0], lines
    assert _Models.posts == 0
    assert not (tmp_path / "s").exists()  # nothing half-written


def test_python_model_has_no_symbol_limit(data_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    model.write_text("def score(req):\n    return [0.0 if o.category == req.y else -1.0 for o in req.options]\n")
    reqs = pfr.build("clinc150", "main", REF, data_dir=data_dir, limit=4)
    summary = pfr.run(f"python:{model}:score", reqs, tmp_path / "s", progress=False)
    assert summary.scored == 4
