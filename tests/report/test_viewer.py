"""The HTML viewer (a card per text) of `pfr report -f html` and `pfr compare -f html`, in headless Chromium.

Two real stores on TREC (the first texts of the main panel, `direct` and `membership` designs): BASE is the
fickle decision function of conftest.py, CAND a Python function that also answers with labels only (no
scores) and with a label that names no option (an invalid answer). Every filter is clicked with a real
mouse event and the counts the page shows are checked against counts computed here, in plain Python, from
`pfr export` of each store and the `newly_broken` / `newly_fixed` lists of `pfr compare -f json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pfr import api
from pfr.design.types import Design

from .browser import CHROMIUM, Browser

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (apt-get install chromium)")

LIMIT = 40
DRAWS = 200
Cli = Callable[..., Any]

#: CAND: correct except on hash buckets of texts: an invalid answer under C, a label-only answer
#: (correct, or the fallback's symbol), a missed fallback under U, the fallback or a wrong regular
#: option for gold-regular requests
MIXED = """
import hashlib


def _bucket(text_id):
    return int(hashlib.sha256(("mixed" + text_id).encode()).hexdigest()[:8], 16) % 12


def score(req):
    k = len(req.options)
    fb = req.fallback_index
    b = _bucket(req.text_id)
    if b == 0 and req.definition == "C":
        return "no such option"
    if b == 1:
        return req.options[req.expected].label
    if b == 2:
        return req.options[fb].symbol
    scores = [-3.0 - 0.25 * i for i in range(k)]
    regular = [i for i in range(k) if i != fb]
    target = req.expected
    if req.assignment == "F" and b in (3, 4) and req.definition == "U":
        target = regular[0]
    if req.assignment == "R" and b == 5:
        target = fb
    if req.assignment == "R" and b == 6 and req.definition == "C":
        target = next(i for i in regular if i != req.expected)
    scores[target] = -0.5
    return scores
"""
KINDS = ("fail", "missed-fallback", "false-fallback", "wrong-regular", "disagreement", "invalid")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, fickle_model: str, pfr_cli: Cli) -> dict[str, Any]:
    """The stores, both pages, the exports and the JSON of the report and the comparison."""
    root = tmp_path_factory.mktemp("viewer")
    (root / "mixed.py").write_text(MIXED, encoding="utf-8")
    designs = [
        api.build("trec", "main", d, data_dir=data_dir, limit=LIMIT) for d in (Design(), Design(membership=True))
    ]
    out: dict[str, Any] = {"root": root}
    for name, spec in (("base", fickle_model), ("cand", f"python:{root / 'mixed.py'}:score")):
        for reqs in designs:
            api.run(spec, reqs, store=root / name, progress=False)
        done = pfr_cli("export", str(root / name), "-o", str(root / f"{name}.jsonl"))
        assert done.returncode == 0, done.stderr
        out[f"{name}_rows"] = [json.loads(x) for x in (root / f"{name}.jsonl").read_text("utf-8").splitlines()]
    for args in (["report", str(root / "cand"), "-o", str(root / "run.html")],
                 ["report", str(root / "cand"), "-o", str(root / "run.json")],
                 ["compare", str(root / "base"), str(root / "cand"), "-o", str(root / "cmp.html")],
                 ["compare", str(root / "base"), str(root / "cand"), "-o", str(root / "cmp.json")]):  # fmt: skip
        done = pfr_cli(*args, "--draws", str(DRAWS))
        assert done.returncode == 0, done.stderr
    out["run_json"] = json.loads((root / "run.json").read_text("utf-8"))
    out["cmp_json"] = json.loads((root / "cmp.json").read_text("utf-8"))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def _kinds(rows: list[dict[str, Any]]) -> dict[str, dict[str, set[str]]]:
    """design → filter → text ids, from exported rows alone (docs/method.md §6, §6.1)."""
    quads: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        quads.setdefault((r["design"], r["text_id"]), {})[r["assignment"] + r["definition"]] = r
    out: dict[str, dict[str, set[str]]] = {}
    for (design, tid), q in quads.items():
        ch = {c: q[c]["choice"] for c in q}
        ok = {c: ch[c] == q[c]["expected"] for c in q}
        fb = {c: ch[c] >= 0 and ch[c] == q[c]["fallback_index"] for c in q}
        inv = {c: ch[c] < 0 for c in q}
        flags = {
            "fail": not all(ok.values()),
            "missed-fallback": not (fb["FU"] and fb["FC"]),
            "false-fallback": fb["RU"] or fb["RC"],
            "wrong-regular": any(not ok[c] and not fb[c] and not inv[c] for c in ("RU", "RC")),
            "disagreement": any(ch[u] != ch[c] or inv[u] or inv[c] for u, c in (("RU", "RC"), ("FU", "FC"))),
            "invalid": any(inv.values()),
        }
        for kind, hit in flags.items():
            out.setdefault(design, {k: set() for k in KINDS})
            if hit:
                out[design][kind].add(tid)
    return out


def test_cards_carry_the_flags_of_the_export(files: dict[str, Any]) -> None:
    """Without a browser: the server-rendered cards and counts (what a page shows with scripts off)."""
    html = (files["root"] / "run.html").read_text("utf-8")
    cards = re.findall(r'<article class="card" id="text-([0-9a-f]+)(?:--2)?" data-tid="\1" data-dataset="trec" '
                       r'data-setting="[^"]+ · (direct|membership)" data-kinds="([^"]*)">', html)  # fmt: skip
    assert len(cards) == html.count('<article class="card"') == 2 * LIMIT
    got: dict[str, dict[str, set[str]]] = {d: {k: set() for k in KINDS} for d in ("direct", "membership")}
    for tid, design, kinds in cards:
        for k in kinds.split():
            got[design][k].add(tid)
    assert got == _kinds(files["cand_rows"])
    counts = dict(re.findall(r'<input type="radio" name="f-kind" id="k-[\w-]+" value="([\w-]*)"[^>]*> [^<]+ '
                             r'<span class="n">(\d+)</span>', html))  # fmt: skip
    assert counts == {"": str(2 * LIMIT), **{k: str(len(got["direct"][k]) + len(got["membership"][k])) for k in KINDS}}


def _state(b: Browser) -> dict[str, Any]:
    """What the page shows: the count beside each filter, the 'N of M shown' line, the visible cards."""
    return b.js("""(function () {
        var n = {};
        document.querySelectorAll('input[name="f-kind"]').forEach(function (r) {
            n[r.value] = Number(r.parentNode.querySelector('.n').textContent);
        });
        var cards = Array.prototype.slice.call(document.querySelectorAll('article.card'));
        return {counts: n, line: document.getElementById('f-count').textContent,
                visible: cards.filter(function (el) { return el.offsetParent !== null; }).length,
                total: cards.length};
    })()""")


def _click(b: Browser, key: str) -> None:
    b.click(f"#k-{key or 'all'}")
    assert b.js(f"document.getElementById('k-{key or 'all'}').checked")


def _select(b: Browser, select: str, value: str) -> None:
    b.js(f"""(function () {{ var s = document.getElementById('{select}'); s.value = {json.dumps(value)};
             s.dispatchEvent(new Event('change')); }})()""")


def _check_filters(b: Browser, want: dict[str, int], total: int) -> None:
    """Click every filter; the counts beside the filters, the shown line and the visible cards agree with ``want``."""
    for key, n in want.items():
        _click(b, key)
        st = _state(b)
        assert st["counts"] == want, key
        assert st["line"] == f"{n} of {total} shown" and st["visible"] == n, (key, st)


def _settings(page: Browser) -> list[str]:
    return page.js("Array.prototype.slice.call(document.getElementById('f-setting').options, 1).map(o => o.value)")


@needs_chromium
def test_run_viewer_counts_match_the_export(files: dict[str, Any], browser: Browser) -> None:
    kinds = _kinds(files["cand_rows"])
    settings = files["run_json"]["settings"]
    label = {s["design"]: " · ".join((s["model"], s["dataset"], s["panel"], s["design"])) for s in settings}
    total = sum(s["n"] for s in settings)
    assert total == 2 * LIMIT
    for s in settings:  # the export agrees with the report's own JSON where that has the count
        assert len(kinds[s["design"]]["fail"]) == round(s["n"] * (1 - s["P4"]["value"]))
    want = {"": total, **{k: sum(len(kinds[d][k]) for d in kinds) for k in KINDS}}
    assert all(want.values()), want  # every filter selects some texts: no check passes on an empty list
    browser.open((files["root"] / "run.html").as_uri())
    assert _settings(browser) == [label["direct"], label["membership"]]
    _check_filters(browser, want, total)
    for design, name in label.items():  # one setting at a time
        _select(browser, "f-setting", name)
        _check_filters(browser, {"": LIMIT, **{k: len(kinds[design][k]) for k in KINDS}}, total)
    _select(browser, "f-setting", "")
    _click(browser, "")
    # the search box: texts that contain the words (case-insensitive), in both settings
    text = files["cand_rows"][0]["text"]
    words = " ".join(text.split()[:3]).upper()
    browser.js(f"""(function () {{ var q = document.getElementById('f-search'); q.value = {json.dumps(words)};
                  q.dispatchEvent(new Event('input')); }})()""")
    hits = {r["text_id"] for r in files["cand_rows"] if words.lower() in r["text"].lower()}
    assert _state(browser)["visible"] == 2 * len(hits) > 0


@needs_chromium
def test_comparison_viewer_counts_match_compare_json(files: dict[str, Any], browser: Browser) -> None:
    cmp = files["cmp_json"]
    exported = {"base": _kinds(files["base_rows"]), "cand": _kinds(files["cand_rows"])}
    n = {s["design"]: s["n"] for s in cmp["settings"]}
    total = sum(n.values())
    changes = {"newly-broken": sum(len(s["newly_broken"]) for s in cmp["settings"]),
               "newly-fixed": sum(len(s["newly_fixed"]) for s in cmp["settings"])}  # fmt: skip
    assert changes["newly-broken"] and changes["newly-fixed"]
    browser.open((files["root"] / "cmp.html").as_uri())
    assert _settings(browser) == [f"trec · main · {s['design']}" for s in cmp["settings"]]
    for side in ("cand", "base"):  # the kinds of either version, as the 'kinds of' select says
        _select(browser, "f-side", side)
        want = {"": total, **changes, **{k: sum(len(exported[side][d][k]) for d in n) for k in KINDS}}
        assert all(v for k, v in want.items() if (side, k) != ("base", "invalid")), want  # BASE has no invalid answer
        _check_filters(browser, want, total)
    # each listed changed text links to its card
    for s in cmp["settings"]:
        for tid in s["newly_broken"] + s["newly_fixed"]:
            anchor = f"text-{tid}" if s["design"] == "direct" else f"text-{tid}--2"
            assert browser.js(f"!!document.querySelector('a[href=\"#{anchor}\"]:not(.pl)')"), anchor


def _shown(b: Browser, anchor: str) -> dict[str, Any]:
    return b.js(f"""(function () {{
        var el = document.getElementById({json.dumps(anchor)}), r = el.getBoundingClientRect();
        return {{visible: el.offsetParent !== null, open: el.querySelector('details').open,
                 inView: r.top >= 0 && r.top < innerHeight}}; }})()""")


@needs_chromium
def test_a_link_opens_the_card(files: dict[str, Any], browser: Browser) -> None:
    cmp = files["cmp_json"]["settings"]
    broken = cmp[0]["newly_broken"][-1]
    fixed = cmp[1]["newly_fixed"][-1]
    page = (files["root"] / "cmp.html").as_uri()
    browser.open(f"{page}#text-{fixed}--2")  # a fresh load: the second setting's card of the text
    assert _shown(browser, f"text-{fixed}--2") == {"visible": True, "open": True, "inView": True}
    _click(browser, "newly-fixed")  # the broken text's card is filtered out …
    assert not _shown(browser, f"text-{broken}")["visible"]
    browser.js(f"""new Promise(function (done) {{ addEventListener('hashchange', function () {{ done(true); }},
                   {{once: true}}); location.hash = '#text-{broken}'; }})""")
    assert _shown(browser, f"text-{broken}") == {"visible": True, "open": True, "inView": True}  # … and shown
    st = _state(browser)
    assert st["visible"] == st["total"] and browser.js("document.getElementById('k-all').checked")


@needs_chromium
def test_cards_are_readable_with_scripts_off(files: dict[str, Any], browser: Browser) -> None:
    browser.send("Emulation.setScriptExecutionDisabled", value=True)
    try:
        browser.open((files["root"] / "run.html").as_uri())
        st = _state(browser)
    finally:
        browser.send("Emulation.setScriptExecutionDisabled", value=False)
    assert st["visible"] == st["total"] == 2 * LIMIT and st["line"] == f"{2 * LIMIT} of {2 * LIMIT} shown"
    kinds = _kinds(files["cand_rows"])
    assert st["counts"] == {"": 2 * LIMIT, **{k: sum(len(kinds[d][k]) for d in kinds) for k in KINDS}}
    # an invalid answer shows its raw text; a label-only card has no scores, ● marks its picks
    html = (files["root"] / "run.html").read_text("utf-8")
    assert "✗ invalid answer: &#39;no such option&#39;" in html
    label_only = [r["text_id"] for r in files["cand_rows"] if not r["scores"]]
    card = html.split(f'id="text-{label_only[0]}"', 1)[1].split("</article>", 1)[0]
    assert "<summary>options</summary>" in card and "●" in card


@needs_chromium
@pytest.mark.parametrize("width", [1280, 390])
def test_screenshots(files: dict[str, Any], browser: Browser, width: int, tmp_path: Path) -> None:
    browser.resize(width, 900)
    try:
        for page in ("run", "cmp"):
            browser.open((files["root"] / f"{page}.html").as_uri() + f"#text-{files['cand_rows'][0]['text_id']}")
            # nothing wider than the window: wide tables scroll inside their own box
            assert browser.js("document.documentElement.scrollWidth") <= width
            shot = tmp_path / f"{page}-{width}.png"
            browser.screenshot(shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            with Image.open(shot) as img:
                darkest = int(np.asarray(img.convert("L")).min())
                assert img.size[0] == width and darkest < 100  # dark text drawn
    finally:
        browser.resize(1280, 900)
