"""The self-contained HTML report: tables, embedded figures, and the failing inputs side by side.

One file, no external URL: CSS and a few lines of vanilla JS inline, figures as base64 PNGs.
Jinja2 runs with autoescape on, so every dataset or model string is escaped; data reach the
script only through escaped ``data-*`` attributes, and a Content-Security-Policy that allows
exactly the report's own script (by hash) keeps any injected markup inert.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from jinja2 import Environment, PackageLoader

from pfr.analysis.metrics import QUAD
from pfr.design.invalid import answered, picks
from pfr.report.cells import column_groups
from pfr.report.model import Report, Setting
from pfr.report.tables import all_tables
from pfr.report.writers import setting_notes
from pfr.run.store import StoredResult

#: failing inputs shown per setting (the JSON/CSV carry the full statistics)
MAX_CASES = 200
KINDS = {
    "missed-fallback": "missed fallback",
    "false-fallback": "false fallback",
    "wrong-regular": "wrong regular",
    "invalid": "invalid answer",
    "disagreement": "U/C disagreement",
}
_CELL_TITLE = {"RU": "gold-regular · union", "RC": "gold-regular · complement",
               "FU": "gold-fallback · union", "FC": "gold-fallback · complement"}  # fmt: skip

SCRIPT = """
(function () {
  var ds = document.getElementById('f-dataset'), kind = document.getElementById('f-kind');
  var st = document.getElementById('f-setting'), count = document.getElementById('f-count');
  var cases = document.querySelectorAll('.case');
  function apply() {
    var shown = 0;
    cases.forEach(function (el) {
      var ok = (!ds.value || el.dataset.dataset === ds.value) &&
               (!st.value || el.dataset.setting === st.value) &&
               (!kind.value || el.dataset.kinds.split(' ').indexOf(kind.value) >= 0);
      el.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + ' of ' + cases.length + ' shown';
  }
  [ds, kind, st].forEach(function (el) { el.addEventListener('change', apply); });
  apply();
})();
"""


@dataclass(frozen=True)
class OptionView:
    symbol: str
    label: str
    logprob: float
    fallback: bool
    chosen: bool
    expected: bool


@dataclass(frozen=True)
class RequestView:
    cell: str
    title: str
    ok: bool
    choice: str
    expected: str
    margin: float
    criterion: str
    censored: bool
    options: tuple[OptionView, ...]


@dataclass(frozen=True)
class Case:
    setting: str
    dataset: str
    text_id: str
    text: str
    show_text: bool
    gold: str
    supplied: str
    kinds: tuple[str, ...]
    requests: tuple[RequestView, ...]


def _request_view(cell: str, r: StoredResult, margin: float) -> RequestView:
    q = r.request
    lps = [float(v) for v in r.logprobs] + [float("nan")] * (len(q.options) - len(r.logprobs))
    opts = tuple(
        OptionView(o.symbol, o.label, lps[i], o.is_fallback, i == r.choice, i == q.expected)
        for i, o in enumerate(q.options)
    )
    pick = q.options[r.choice] if answered(r.choice) and r.choice < len(q.options) else None
    exp = q.options[q.expected]
    raw = r.meta.get("raw") if isinstance(r.meta, dict) else None
    invalid = f"no option (invalid answer{'' if raw is None else f': {str(raw)[:80]!r}'})"  # docs/method.md §6.1
    return RequestView(
        cell=cell,
        title=_CELL_TITLE[cell],
        ok=bool(picks(r.choice, q.expected)),
        choice=f"{pick.symbol} {pick.label}" if pick else invalid,
        expected=f"{exp.symbol} {exp.label}",
        margin=margin,
        criterion=q.criterion,
        censored=any(r.censored),
        options=opts,
    )


def failure_kinds(row: Any) -> tuple[str, ...]:
    """Why a text fails (a row of the indicator matrix): kinds from :data:`KINDS`."""
    kinds = []
    if row["FU_fb"] < 0.5 or row["FC_fb"] < 0.5:
        kinds.append("missed-fallback")
    if row["RU_fb"] > 0.5 or row["RC_fb"] > 0.5:
        kinds.append("false-fallback")
    if any(row[f"R{d}_ok"] < 0.5 and row[f"R{d}_fb"] < 0.5 and row[f"R{d}_inv"] < 0.5 for d in ("U", "C")):
        kinds.append("wrong-regular")
    if row["INV"] > 0:
        kinds.append("invalid")
    if row["DR_R"] > 0.5 or row["DR_F"] > 0.5:
        kinds.append("disagreement")
    return tuple(kinds)


def cases(report: Report, s: Setting, limit: int = MAX_CASES) -> tuple[list[Case], int]:
    """The setting's texts that are not correct on all four requests (first ``limit``), and their count."""
    ind, texts = report.block(s)
    failing = np.flatnonzero(ind["P4"].to_numpy() < 0.5)
    out = []
    for pos in failing[:limit]:
        row = ind.iloc[pos]
        cells = report.quads[(*s.key, str(ind.index[pos][-1]))]
        margins = {c: float(texts[f"m_{c}"].iloc[pos]) for c in QUAD}
        first = cells["RU"].request
        gold = next((c for c in first.inventory if c.id == first.y), None)
        out.append(
            Case(
                setting=s.label,
                dataset=s.dataset,
                text_id=first.text_id,
                text=first.text,
                show_text=first.show_text,
                gold=f"{first.y} — {gold.description}" if gold else first.y,
                supplied=f"{first.supplied.id} — {first.supplied.description}" if first.supplied else "",
                kinds=failure_kinds(row),
                requests=tuple(_request_view(c, cells[c], margins[c]) for c in QUAD),
            )
        )
    return out, len(failing)


def _env() -> Environment:
    env = Environment(loader=PackageLoader("pfr.report", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)  # fmt: skip
    env.filters["signed"] = lambda x: "n/a" if x != x else ("+∞" if x == float("inf") else f"{x:+.2f}")
    return env


def render_html(report: Report) -> str:
    """The whole report as one self-contained HTML page."""
    from pfr.report.figures import CAPTIONS, figures, png_bytes
    from pfr.report.verdict import DEFINITIONS, verdicts

    figs = []
    for name, fig in figures(report).items():
        figs.append({"name": name, "caption": CAPTIONS[name],
                     "src": "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")})  # fmt: skip
    per_setting = []
    all_cases: list[Case] = []
    for s in report.settings:
        shown, total = cases(report, s)
        all_cases += shown
        per_setting.append({"setting": s, "failing": total, "shown": len(shown)})
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode("ascii")
    return _env().get_template("report.html.j2").render(
        report=report,
        tables=all_tables(report) if report.settings else [],
        notes=setting_notes(report.settings),
        groups=column_groups,
        figures=figs,
        per_setting=per_setting,
        cases=all_cases,
        datasets=sorted({s.dataset for s in report.settings}),
        settings=[s.label for s in report.settings],
        kinds=KINDS,
        max_cases=MAX_CASES,
        script=SCRIPT,
        script_hash=script_hash,
        summary=verdicts(report),
        definitions=DEFINITIONS,
    )
