"""``pfr compare`` output: one table per setting (Δ = CAND − BASE) and the texts whose P4 changed."""

from __future__ import annotations

import html
import json

from pfr.analysis.compare import LOWER_IS_BETTER, Comparison, SettingChange, TextChange
from pfr.errors import PfrError
from pfr.report.model import json_safe

FORMATS = ("text", "markdown", "json", "html")
COLUMNS = ("metric", "BASE", "CAND", "Δ pp", "95% CI", "b", "c", "p", "p Holm", "MDE pp")


def _pp(x: float) -> str:
    return f"{100 * x:+.1f}"


def _rows(s: SettingChange) -> list[list[str]]:
    rows = []
    for name, m in s.metrics.items():
        floor = "*" if m.b + m.c == 0 else ""
        rows.append([name + (" ↓" if name in LOWER_IS_BETTER else ""), f"{100 * m.base:.1f}", f"{100 * m.cand:.1f}",
                     _pp(m.delta), f"[{_pp(m.low)}, {_pp(m.high)}]", str(m.b), str(m.c), f"{m.p:.3g}",
                     f"{m.p_holm:.3g}", f"{100 * m.mde:.1f}{floor}"])  # fmt: skip
    return rows


def _decisions(t: TextChange) -> str:
    return "; ".join(f"{c} {t.base[c]} → {t.cand[c]} (gold {t.expected[c]})" for c in t.base)


def _text_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*COLUMNS), *(fmt.format(*r) for r in rows)]


def _md_table(rows: list[list[str]]) -> list[str]:
    lines = [list(COLUMNS), ["---"] * len(COLUMNS), *rows]
    return ["| " + " | ".join(r) + " |" for r in lines]


def render_comparison(comp: Comparison, fmt: str = "text") -> str:
    """``comp`` as text, markdown, json or html (docs/usage.md, ``pfr compare``)."""
    if fmt not in FORMATS:
        raise PfrError(f"--format {fmt}: unknown compare format (known: {', '.join(FORMATS)})")
    if fmt == "json":
        return json.dumps(json_safe(comp.as_dict()), indent=2, ensure_ascii=False)
    if fmt == "html":
        return _html(comp)
    md = fmt == "markdown"
    head = "## " if md else ""
    tests = sum(len(s.metrics) for s in comp.settings)
    out = [
        f"{'# ' if md else ''}pfr compare: CAND − BASE, paired on the texts both scored",
        "",
        f"BASE: {comp.base} ({comp.base_model})",
        f"CAND: {comp.cand} ({comp.cand_model})",
        "",
        f"b = texts that pass in BASE and fail in CAND (regressions), c = the reverse; ↓ = lower is better "
        f"(pass = the event did not happen). p: exact McNemar; p Holm over {tests} "
        f"tests; 95% CI: paired bootstrap over texts ({comp.draws} draws, seed {comp.seed}); MDE: the smallest "
        f"Δ detected with 80% power at α = .05 (* no discordant text: floor p_d = 1/n).",
    ]  # fmt: skip
    for s in comp.settings:
        out += ["", f"{head}{s.dataset} · {s.panel} · {s.design} (n = {s.n} texts)", ""]
        table = _rows(s)
        out += _md_table(table) if md else _text_table(table)
        for title, texts in (("newly broken (P4 in BASE, not in CAND)", s.newly_broken),
                             ("newly fixed (P4 in CAND, not in BASE)", s.newly_fixed)):  # fmt: skip
            out += ["", f"{title}: {len(texts)}"]
            out += [f"{'- ' if md else '  '}{t.text_id} {t.text!r}: {_decisions(t)}" for t in texts]
        for who, ids in (("BASE", s.only_base), ("CAND", s.only_cand)):
            if ids:
                out += ["", f"texts scored only by {who}: {len(ids)} ({', '.join(ids)})"]
    for who, keys in (("BASE", comp.only_base), ("CAND", comp.only_cand)):
        if keys:
            out += ["", f"settings without a common text, scored by {who}: " + ", ".join(" · ".join(k) for k in keys)]
    return "\n".join(out)


STYLE = ("body{font:14px system-ui,sans-serif;margin:1.5em;max-width:80em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}"
         ".worse{background:#fdd}.better{background:#dfd}")  # fmt: skip


def _html(comp: Comparison) -> str:
    """One self-contained page (no script, no external URL): a table per setting and the changed texts."""
    e = html.escape
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>pfr compare {e(comp.base)} → {e(comp.cand)}</title><style>{STYLE}</style></head><body>",
           "<h1>pfr compare: CAND − BASE, paired on the texts both scored</h1>",
           f"<p>BASE: {e(comp.base)} ({e(comp.base_model)})<br>CAND: {e(comp.cand)} ({e(comp.cand_model)})</p>",
           "<p>b = texts that pass in BASE and fail in CAND (regressions), c = the reverse; ↓ = lower is better. "
           f"p: exact McNemar, Holm over the comparison; 95% CI: paired bootstrap ({comp.draws} draws, seed "
           f"{comp.seed}); MDE: the smallest Δ detected with 80% power at α = .05 (* floor p_d = 1/n).</p>",
           ]  # fmt: skip
    for s in comp.settings:
        out.append(f"<h2>{e(s.dataset)} · {e(s.panel)} · {e(s.design)} (n = {s.n} texts)</h2><table>")
        out.append("<tr>" + "".join(f"<th>{e(c)}</th>" for c in COLUMNS) + "</tr>")
        for (name, m), row in zip(s.metrics.items(), _rows(s)):
            worse = m.p_holm < 0.05 and (m.delta > 0) == (name in LOWER_IS_BETTER)
            cls = "" if m.p_holm >= 0.05 else (' class="worse"' if worse else ' class="better"')
            out.append(f"<tr{cls}>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>")
        out.append("</table>")
        for title, texts in (("Newly broken", s.newly_broken), ("Newly fixed", s.newly_fixed)):
            out.append(f"<h3>{title}: {len(texts)}</h3>")
            if texts:
                out.append("<table><tr><th>text</th>" + "".join(f"<th>{c}</th>" for c in texts[0].base) + "</tr>")
                for t in texts:
                    cells = "".join(f"<td>{e(t.base[c])} → {e(t.cand[c])}<br><small>gold {e(t.expected[c])}</small>"
                                    "</td>" for c in t.base)  # fmt: skip
                    out.append(f'<tr><td>{e(t.text)}<br><small>{e(t.text_id)}</small></td>'
                               f"{cells}</tr>")  # fmt: skip
                out.append("</table>")
        for who, ids in (("BASE", s.only_base), ("CAND", s.only_cand)):
            if ids:
                out.append(f"<p>Texts scored only by {who}: {len(ids)} ({e(', '.join(ids))})</p>")
    for who, keys in (("BASE", comp.only_base), ("CAND", comp.only_cand)):
        if keys:
            names = ", ".join(" · ".join(k) for k in keys)
            out.append(f"<p>Settings without a common text, scored by {who}: {e(names)}</p>")
    return "\n".join([*out, "</body></html>"])
