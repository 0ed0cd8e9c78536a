"""The HTML viewer: a card per text, in ``pfr report -f html`` and in ``pfr compare -f html``.

Every card is server-rendered, so the page reads with scripts off: the text, its quad (R/F × U/C)
under each version, the gold, and a collapsed table of the options offered with each request's
scores. What a filter selects is decided here, from the per-text indicator rows of the analysis code
(the rows the JSON metrics and the comparison's ``newly_broken`` / ``newly_fixed`` come from), and
written into each card as ``data-kinds`` tokens: the page's script only counts, hides and shows
cards, so no definition is ever derived a second time in JavaScript.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from pfr.analysis.compare import Comparison
from pfr.analysis.metrics import QUAD
from pfr.design.invalid import answered, picks
from pfr.errors import PfrError
from pfr.report.model import Report
from pfr.run.store import StoredResult

#: cards per setting (panel order); a larger setting says how many it left out (docs/report.md)
MAX_CARDS = 1000
#: filter → (name, what it selects); each is a per-text flag of :func:`kind_flags`
KINDS = {
    "fail": ("not P4", "not correct on all four requests"),
    "missed-fallback": ("missed fallback", "a gold-fallback request (FU or FC) did not pick the fallback"),
    "false-fallback": ("over-used fallback", "a gold-regular request (RU or RC) picked the fallback"),
    "wrong-regular": ("wrong regular", "a gold-regular request picked another regular option"),
    "disagreement": ("U/C flip", "the decisions under U and C differ for R or F (DR-R or DR-F)"),
    "invalid": ("invalid answer", "at least one of the four answers names no option"),
}
#: the comparison's filters: the texts of its JSON lists ``newly_broken`` and ``newly_fixed``
CHANGES = {
    "newly-broken": ("newly broken", "P4 in BASE, not in CAND"),
    "newly-fixed": ("newly fixed", "P4 in CAND, not in BASE"),
}
VERSIONS = ("base", "cand")

SCRIPT = """
(function () {
  function $(id) { return document.getElementById(id); }
  var ds = $('f-dataset'), st = $('f-setting'), q = $('f-search'), side = $('f-side'), count = $('f-count');
  var radios = Array.prototype.slice.call(document.querySelectorAll('input[name="f-kind"]'));
  var cards = Array.prototype.slice.call(document.querySelectorAll('article.card'));
  var hay = cards.map(function (el) {
    return (el.dataset.tid + ' ' + el.querySelector('.text').textContent).toLowerCase();
  });
  var kinds = cards.map(function (el) { return el.dataset.kinds.split(' '); });
  function token(r) { return r.dataset.sided && side ? side.value + ':' + r.value : r.value; }
  function apply() {
    var want = q.value.trim().toLowerCase(), counts = radios.map(function () { return 0; });
    var pick = 0, shown = 0;
    radios.forEach(function (r, j) { if (r.checked) { pick = j; } });
    var tokens = radios.map(token);
    cards.forEach(function (el, i) {
      var inScope = (!ds.value || el.dataset.dataset === ds.value) &&
                    (!st.value || el.dataset.setting === st.value) && (!want || hay[i].indexOf(want) >= 0);
      var hit = tokens.map(function (t) { return !t || kinds[i].indexOf(t) >= 0; });
      if (inScope) { hit.forEach(function (h, j) { if (h) { counts[j] += 1; } }); }
      el.hidden = !(inScope && hit[pick]);
      if (!el.hidden) { shown += 1; }
    });
    radios.forEach(function (r, j) { r.parentNode.querySelector('.n').textContent = counts[j]; });
    count.textContent = shown + ' of ' + cards.length + ' shown';
  }
  function openHash() {
    var id = decodeURIComponent(location.hash.slice(1)), el = id ? $(id) : null;
    if (!el || !el.classList.contains('card')) { return; }
    if (el.hidden) {
      ds.value = ''; st.value = ''; q.value = ''; radios[0].checked = true; apply();
    }
    el.querySelector('details').open = true;
    el.scrollIntoView({block: 'start'});
  }
  [ds, st, side].concat(radios).forEach(function (el) { if (el) { el.addEventListener('change', apply); } });
  q.addEventListener('input', apply);
  window.addEventListener('hashchange', openHash);
  apply();
  openHash();
})();
"""
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode("ascii")


def kind_flags(x: Any) -> dict[str, Any]:
    """Each filter of :data:`KINDS` as a flag per text, from indicator rows: a frame gives arrays,
    one row (a Series) gives bools."""
    wrong = [(x[f"R{d}_ok"] < 0.5) & (x[f"R{d}_fb"] < 0.5) & (x[f"R{d}_inv"] < 0.5) for d in ("U", "C")]
    return {
        "fail": x["P4"] < 0.5,
        "missed-fallback": (x["FU_fb"] < 0.5) | (x["FC_fb"] < 0.5),
        "false-fallback": (x["RU_fb"] > 0.5) | (x["RC_fb"] > 0.5),
        "wrong-regular": wrong[0] | wrong[1],
        "disagreement": (x["DR_R"] > 0.5) | (x["DR_F"] > 0.5),
        "invalid": x["INV"] > 0,
    }


def failure_kinds(row: Any) -> tuple[str, ...]:
    """Why a text fails (a row of the indicator matrix): the kinds of :data:`KINDS` but ``fail``."""
    return tuple(k for k, v in kind_flags(row).items() if k != "fail" and bool(v))


@dataclass(frozen=True)
class Decision:
    """One answer: right or wrong, and what was chosen (an invalid answer with its raw text)."""

    ok: bool
    text: str
    version: str = ""


@dataclass(frozen=True)
class OptionRow:
    """One option slot: its label under R (and under F where that differs) and a cell per column:
    (score or ``●`` for a label-only pick, CSS classes ``ch`` chosen / ``ex`` expected)."""

    symbol: str
    label: str
    f_label: str
    fallback: bool
    gold: bool
    cells: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Card:
    """One text of one setting, everything server-rendered; ``kinds`` are the filter tokens it matches
    (``base:``/``cand:`` prefixed in a comparison), ``badges`` what its header shows."""

    anchor: str
    text_id: str
    setting: str
    dataset: str
    text: str
    show_text: bool
    gold: str
    supplied: str
    kinds: tuple[str, ...]
    badges: tuple[tuple[str, str], ...]
    quad: dict[str, tuple[Decision, ...]]
    options: tuple[OptionRow, ...]
    scored: bool


@dataclass(frozen=True)
class Filter:
    """One radio button: its token, label, definition (tooltip) and count over the whole page; a
    ``sided`` filter reads the version the page's *kinds of* selector names."""

    key: str
    name: str
    title: str
    count: int
    sided: bool


@dataclass(frozen=True)
class Viewer:
    """All cards of one page and its filters (``versions`` is empty for one run)."""

    cards: tuple[Card, ...]
    filters: tuple[Filter, ...]
    datasets: tuple[str, ...]
    settings: tuple[tuple[str, int, int], ...]  # label, texts, cards
    versions: tuple[str, ...]
    limit: int

    def anchor(self, setting: str, text_id: str) -> str:
        """The element id of a text's card in ``setting`` (``""`` when the card was left out)."""
        return self._anchors.get((setting, text_id), "")

    @cached_property
    def _anchors(self) -> dict[tuple[str, str], str]:
        return {(c.setting, c.text_id): c.anchor for c in self.cards}

    @property
    def columns(self) -> list[tuple[str, str]]:
        return [(c, v) for c in QUAD for v in (self.versions or ("",))]

    @property
    def script(self) -> str:
        """The page's one script (the CSP allows it by :data:`SCRIPT_HASH`)."""
        return SCRIPT


def _decision(r: StoredResult, version: str) -> Decision:
    q = r.request
    if bool(answered(r.choice)) and r.choice < len(q.options):
        o = q.options[r.choice]
        return Decision(bool(picks(r.choice, q.expected)), f"{o.symbol} {o.label}", version)
    raw = r.meta.get("raw") if isinstance(r.meta, dict) else None
    return Decision(False, "invalid answer" + ("" if raw is None else f": {str(raw)[:80]!r}"), version)  # §6.1


def _cell(r: StoredResult, i: int) -> tuple[str, str]:
    chosen = r.choice == i and bool(answered(r.choice))
    cls = ("ch " if chosen else "") + ("ex" if i == r.request.expected else "")
    if i < len(r.logprobs):
        return f"{float(r.logprobs[i]):.2f}", cls.strip()
    return ("●" if chosen else ""), cls.strip()


def _options(sides: Sequence[Mapping[str, StoredResult]]) -> tuple[OptionRow, ...]:
    first = sides[0]
    r_opts, f_opts = first["RU"].request.options, first["FU"].request.options
    rows = []
    for i in range(max(len(r_opts), len(f_opts))):
        ro = r_opts[i] if i < len(r_opts) else None
        fo = f_opts[i] if i < len(f_opts) else None
        shown = ro or fo
        assert shown is not None
        f_label = fo.label if fo is not None and (ro is None or fo.label != ro.label) else ""
        cells = tuple(_cell(side[c], i) for c in QUAD for side in sides)
        rows.append(OptionRow(shown.symbol, ro.label if ro else "", f_label, shown.is_fallback,
                              i == first["RU"].request.expected, cells))  # fmt: skip
    return tuple(rows)


def _card(
    anchor: str, setting: str, sides: Sequence[Mapping[str, StoredResult]], versions: Sequence[str],
    kinds: tuple[str, ...], badges: tuple[tuple[str, str], ...],
) -> Card:  # fmt: skip
    first = sides[0]["RU"].request
    gold = next((c for c in first.inventory if c.id == first.y), None)
    return Card(
        anchor=anchor,
        text_id=first.text_id,
        setting=setting,
        dataset=first.dataset,
        text=first.text,
        show_text=first.show_text,
        gold=f"{first.y} — {gold.description}" if gold else first.y,
        supplied=f"{first.supplied.id} — {first.supplied.description}" if first.supplied else "",
        kinds=kinds,
        badges=badges,
        quad={c: tuple(_decision(side[c], v) for side, v in zip(sides, versions or ("",))) for c in QUAD},
        options=_options(sides),
        scored=any(side[c].logprobs for side in sides for c in QUAD),
    )


class _Anchors:
    """Element ids: ``text-<id>`` for a text's first card, ``text-<id>--<n>`` for its n-th."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, text_id: str) -> str:
        n = self.seen[text_id] = self.seen.get(text_id, 0) + 1
        return f"text-{text_id}" if n == 1 else f"text-{text_id}--{n}"


def _flags(ind: pd.DataFrame) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=bool) for k, v in kind_flags(ind).items()}


def _filters(cards: Sequence[Card], keys: Mapping[str, tuple[str, str]], sided: bool) -> list[Filter]:
    out = []
    for key, (name, title) in keys.items():
        token = f"cand:{key}" if sided else key
        out.append(Filter(key, name, title, sum(token in c.kinds for c in cards), sided))
    return out


def run_viewer(report: Report, limit: int = MAX_CARDS) -> Viewer:
    """A card per text of every setting of ``report`` (the first ``limit`` per setting, panel order)."""
    anchors, cards, per_setting = _Anchors(), [], []
    for s in report.settings:
        ind, _ = report.block(s)
        flags = _flags(ind)
        n = min(len(ind), limit)
        for pos in range(n):
            tid = str(ind.index[pos][-1])
            kinds = tuple(k for k in KINDS if flags[k][pos])
            badges = tuple((k, KINDS[k][0]) for k in kinds if k != "fail")
            cards.append(_card(anchors(tid), s.label, [report.quads[(*s.key, tid)]], (), kinds, badges))
        per_setting.append((s.label, len(ind), n))
    all_texts = Filter("", "all texts", "every text", len(cards), False)
    return Viewer(tuple(cards), (all_texts, *_filters(cards, KINDS, False)),
                  tuple(sorted({s.dataset for s in report.settings})), tuple(per_setting), (), limit)  # fmt: skip


def compare_viewer(comp: Comparison, limit: int = MAX_CARDS) -> Viewer:
    """A card per common text of every compared setting, with both versions' decisions."""
    detail = comp.per_text
    if detail is None:
        raise PfrError("this comparison carries no per-text detail (make it with pfr.compare)")
    anchors, cards, per_setting = _Anchors(), [], []
    for s in comp.settings:
        key = (s.dataset, s.panel, s.design)
        label = " · ".join(key)
        xb, xc = detail.base[key], detail.cand[key]
        in_cand = set(map(str, xc.index))
        common = [t for t in map(str, xb.index) if t in in_cand]
        fb, fc = _flags(xb.loc[common]), _flags(xc.loc[common])
        broken = {t.text_id for t in s.newly_broken}
        fixed = {t.text_id for t in s.newly_fixed}
        for pos, tid in enumerate(common[:limit]):
            change = tuple(k for k, ids in (("newly-broken", broken), ("newly-fixed", fixed)) if tid in ids)
            kinds = (*change, *(f"base:{k}" for k in KINDS if fb[k][pos]), *(f"cand:{k}" for k in KINDS if fc[k][pos]))
            badges = (*((k, CHANGES[k][0]) for k in change),
                      *((k, f"CAND {KINDS[k][0]}") for k in KINDS if fc[k][pos] and k != "fail"))  # fmt: skip
            sides = [detail.base_quads[(*key, tid)], detail.cand_quads[(*key, tid)]]
            cards.append(_card(anchors(tid), label, sides, VERSIONS, kinds, badges))
        per_setting.append((label, len(common), min(len(common), limit)))
    all_texts = Filter("", "all texts", "every common text", len(cards), False)
    filters = (all_texts, *_filters(cards, CHANGES, False), *_filters(cards, KINDS, True))
    return Viewer(tuple(cards), filters, tuple(sorted({s.dataset for s in comp.settings})), tuple(per_setting),
                  VERSIONS, limit)  # fmt: skip
