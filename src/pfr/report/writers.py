"""The report in text, Markdown, LaTeX, CSV and JSON.

The layouts only arrange the format-free tables of :mod:`pfr.report.tables`. CSV and JSON are not
layouts but data: one row/object per setting, fractions at full precision.
"""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Iterable, Sequence

from pfr.analysis.metrics import DELTA_OF, METRICS
from pfr.analysis.stats_tests import TESTED
from pfr.models.decide import INVALID_REASONS
from pfr.report.cells import GROUP_LATEX, Cell, Table, column_groups
from pfr.report.model import Report, Setting, json_safe
from pfr.report.tables import DECOMP, all_tables

# --------------------------------------------------------------------------------------------- text


def _layout_text(t: Table) -> str:
    cells = [[c.text + ("*" if c.bold else "") for c in row] for row in t.rows]
    widths = [len(c.name) for c in t.columns]
    for row in cells:
        widths = [max(w, len(x)) for w, x in zip(widths, row)]
    # widen a group's columns until the group label fits over them
    groups = column_groups(t.columns)
    for label, start, end in groups:
        if not label:
            continue
        span = sum(widths[start:end]) + 2 * (end - start - 1)
        if span < len(label):
            widths[end - 1] += len(label) - span
    sep = "  "

    numeric = [_numeric_col(t, i) for i in range(len(t.columns))]

    def line(values: Sequence[str]) -> str:
        out = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return sep.join(out).rstrip()

    lines = [t.title, ""]
    if any(c.group for c in t.columns):
        parts = []
        for label, start, end in groups:
            span = sum(widths[start:end]) + len(sep) * (end - start - 1)
            parts.append(label.center(span) if label else " " * span)
        lines.append(sep.join(parts).rstrip())
    lines.append(line([c.name for c in t.columns]))
    lines.append(sep.join("-" * w for w in widths))
    lines += [line(r) for r in cells]
    if not t.rows:
        lines.append("(none)")
    lines += ["", _wrap(t.note, 100)]
    return "\n".join(lines)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def _text(report: Report) -> str:
    if not report.settings:
        return "no complete quads (RU, RC, FU, FC) in " + ", ".join(report.stores)
    quads = sum(s.n for s in report.settings)
    head = (
        f"PFR report: {len(report.settings)} setting(s) over {distinct_texts(report)} distinct texts "
        f"({quads} quads of four requests); 95% paired text-bootstrap "
        f"intervals ({report.draws:,} draws, seed {report.seed}); exact McNemar tests; "
        f"{report.family.describe(report.n_tests)}."
    )
    from pfr.report.verdict import definitions_text, summary_text

    parts = [summary_text(report), _wrap(head, 100)]
    parts += [_layout_text(t) for t in all_tables(report)]
    parts.append(definitions_text())
    notes = setting_notes(report.settings)
    if notes:
        parts.append("Notes\n\n" + "\n".join(notes))
    return "\n\n\n".join(parts) + "\n"


def distinct_texts(report: Report) -> int:
    """The texts behind the report's quads, each once: a text scored by two models (or under two
    designs) is one text, not two."""
    index = report.indicators.index
    return len(set(zip(index.get_level_values("dataset"), index.get_level_values("text_id"))))


def setting_notes(settings: Iterable[Setting]) -> list[str]:
    out = []
    for s in settings:
        if s.incomplete:
            out.append(f"- {s.label}: {s.incomplete} text(s) without all four requests were left out")
        if s.censored:
            out.append(f"- {s.label}: {100 * s.censored:.1f}% of requests have a censored option score")
        if s.invalid.get("all"):
            kinds = ", ".join(f"{c} {100 * s.invalid[c]:.1f}%" for c in ("RU", "RC", "FU", "FC"))
            out.append(f"- {s.label}: {100 * s.invalid['all']:.1f}% invalid answers (INV: naming no option; wrong, "
                       f"never a fallback pick): {kinds}")  # fmt: skip
        if s.parses:
            bad = [r for r in s.parses if r in INVALID_REASONS]
            read = ", ".join(f"{r} {n}" for r, n in s.parses.items())
            out.append(f"- {s.label}: answers by parse reason (meta.parse): {read} "
                       f"({'invalid: ' + ', '.join(bad) if bad else 'none invalid'})")  # fmt: skip
        if s.label_only:
            out.append(f"- {s.label}: label-only, {100 * s.label_only:.1f}% of requests answered with a label and "
                       "no scores (margins, thresholds and calibration do not apply)")  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------- markdown


def _md_escape(text: str) -> str:
    out = text
    for ch in ("\\", "|", "*", "_", "`", "<", ">", "[", "]"):
        out = out.replace(ch, "\\" + ch)
    return out


def _layout_md(t: Table) -> str:
    names = [f"{c.group} {c.name}".strip() if c.name != "Δ" else f"Δ {c.group}" for c in t.columns]
    lines = [f"### {t.title}", "", "| " + " | ".join(_md_escape(n) for n in names) + " |"]
    lines.append("|" + "|".join("---:" if _numeric_col(t, i) else "---" for i in range(len(t.columns))) + "|")
    for row in t.rows:
        vals = [f"**{_md_escape(c.text)}**" if c.bold else _md_escape(c.text) for c in row]
        lines.append("| " + " | ".join(vals) + " |")
    lines += ["", _md_escape(t.note)]
    return "\n".join(lines)


def _numeric_col(t: Table, i: int) -> bool:
    return all(r[i].numeric for r in t.rows) if t.rows else True


def _markdown(report: Report) -> str:
    if not report.settings:
        return "No complete quads (RU, RC, FU, FC) in the stores.\n"
    head = (
        f"## PFR report\n\n{len(report.settings)} setting(s); 95% paired text-bootstrap intervals "
        f"({report.draws:,} draws, seed {report.seed}); exact McNemar tests; "
        f"{report.family.describe(report.n_tests)}."
    )
    from pfr.report.verdict import definitions_markdown, summary_markdown

    parts = [head, summary_markdown(report, _md_escape), *(_layout_md(t) for t in all_tables(report))]
    parts.append(definitions_markdown())
    notes = setting_notes(report.settings)
    if notes:
        parts.append("\n".join(_md_escape(n) for n in notes))
    return "\n\n".join(parts) + "\n"


# -------------------------------------------------------------------------------------------- latex

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$", "−": "$-$", "→": r"$\to$", "α": r"$\alpha$", "τ": r"$\tau$", "×": r"$\times$",
    "·": r"$\cdot$", "≤": r"$\le$", "≥": r"$\ge$", "…": r"\ldots{}", "—": "---", "–": "--",
    "<": "$<$", ">": "$>$", "|": r"\textbar{}",
}  # fmt: skip


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex_cell(c: Cell) -> str:
    text = latex_escape(c.text).replace("-", "$-$") if c.numeric else latex_escape(c.text)
    return rf"\textbf{{{text}}}" if c.bold else text


def _layout_latex(t: Table) -> str:
    spec = "".join("r" if _numeric_col(t, i) else "l" for i in range(len(t.columns)))
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\caption{{{latex_escape(t.title)}. {latex_escape(t.note)}}}",
        rf"\label{{tab:pfr-{t.key}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
    ]
    groups = column_groups(t.columns)
    if any(g for g, _, _ in groups):
        head, rules = [], []
        for label, start, end in groups:
            if label:
                head.append(rf"\multicolumn{{{end - start}}}{{c}}{{{GROUP_LATEX.get(label, latex_escape(label))}}}")
                rules.append(rf"\cmidrule(lr){{{start + 1}-{end}}}")
            else:
                head += [""] * (end - start)
        lines.append(" & ".join(head) + r" \\")
        lines.append(" ".join(rules))
    lines.append(" & ".join(c.latex or latex_escape(c.name) for c in t.columns) + r" \\")
    lines.append(r"\midrule")
    for row in t.rows:
        lines.append(" & ".join(_latex_cell(c) for c in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines)


def _latex(report: Report) -> str:
    if not report.settings:
        return "% no complete quads (RU, RC, FU, FC) in the stores\n"
    head = "% PFR report; needs \\usepackage{booktabs}. Percent; changes (Delta = C - U) in pp.\n"
    head += "".join(f"% {n[2:]}\n" for n in setting_notes(report.settings) if "label-only" in n or "invalid" in n)
    return head + "\n\n".join(_layout_latex(t) for t in all_tables(report)) + "\n"


# ---------------------------------------------------------------------------------------- csv, json


def csv_header() -> list[str]:
    cols = ["model", "dataset", "panel", "design", "n", "incomplete", "censored", "resampling"]
    for m in METRICS:
        cols += [m, f"{m}_lo", f"{m}_hi"]
    for k in DELTA_OF:
        cols += [f"delta_{k}", f"delta_{k}_lo", f"delta_{k}_hi"]
    cols += [f"{a}_{k}" for a in ("R", "F") for k in DECOMP]
    for metric in TESTED:
        cols += [f"{metric}_b", f"{metric}_c", f"{metric}_p", f"{metric}_p_holm", f"{metric}_reject"]
    return [*cols, "label_only", "invalid", *(f"invalid_{c}" for c in ("RU", "RC", "FU", "FC"))]


def _csv(report: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header())
    for s in report.settings:
        row: list[object] = [s.model, s.dataset, s.panel, s.design, s.n, s.incomplete, s.censored,
                             "stratified" if s.stratified else "texts"]  # fmt: skip
        for m in METRICS:
            iv = s.metrics[m]
            row += [iv.value, iv.lo, iv.hi]
        for k in DELTA_OF:
            iv = s.delta[k]
            row += [iv.value, iv.lo, iv.hi]
        row += [s.decomposition[a][k] for a in ("R", "F") for k in DECOMP]
        for metric in TESTED:
            t = s.test(metric)
            row += [t.b, t.c, t.p, "" if math.isnan(t.p_holm) else t.p_holm, t.reject]
        inv = [s.invalid.get(c, 0.0) for c in ("all", "RU", "RC", "FU", "FC")]
        w.writerow([*row, s.label_only, *inv])
    return buf.getvalue()


def render_tables(report: Report, fmt: str) -> str:
    """The report in ``fmt`` (text, markdown, latex, csv or json)."""
    if fmt == "json":
        from pfr.report.verdict import verdicts

        data = {"summary": [v.as_dict() for v in verdicts(report)], **report.as_dict()}
        return json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report)
    if fmt == "latex":
        return _latex(report)
    return _text(report)
