"""``pfr compare`` output: one table per setting (Δ = CAND − BASE) and the texts whose P4 changed; in HTML
also a card per common text (:mod:`pfr.report.viewer`)."""

from __future__ import annotations

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


def _html(comp: Comparison) -> str:
    """One self-contained page: a table per setting, the changed texts, and a card per common text."""
    from pfr.report.html import html_env
    from pfr.report.viewer import SCRIPT_HASH, compare_viewer

    settings = []
    for s in comp.settings:
        classes = []
        for name, m in s.metrics.items():
            worse = (m.delta > 0) == (name in LOWER_IS_BETTER)
            classes.append("" if not m.p_holm < 0.05 else ("worse" if worse else "better"))
        settings.append((s, _rows(s), classes))
    template = html_env().get_template("compare.html.j2")
    return template.render(comp=comp, settings=settings, columns=COLUMNS, v=compare_viewer(comp),
                           script_hash=SCRIPT_HASH, zip=zip)  # fmt: skip
