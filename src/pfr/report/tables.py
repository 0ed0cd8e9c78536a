"""The paper's tables (Table 1, 2, 4 and the interval/test/decomposition companions) in
text, Markdown, LaTeX, CSV and JSON.

A :class:`Table` is format-free (cells already formatted as percent with one decimal, a bold
flag and an interval tooltip); the writers below only lay it out, and the HTML template reuses it.
CSV and JSON are not layouts but data: one row/object per setting, fractions at full precision.
"""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pfr.analysis.bootstrap import Interval
from pfr.analysis.metrics import DELTA_OF, METRICS
from pfr.analysis.stats_tests import TESTED
from pfr.report.render import Report, Setting

POLICY_PREFIXES = ("policy", "boundary")
_DECOMP = ("c2w", "w2c", "w2w")


@dataclass(frozen=True)
class Cell:
    """One formatted cell: ``bold`` marks a Holm-significant Δ, ``title`` carries its interval."""

    text: str
    bold: bool = False
    title: str = ""
    numeric: bool = True


@dataclass(frozen=True)
class Column:
    name: str
    group: str = ""
    latex: str = ""


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    note: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def pp(x: float) -> str:
    """A signed change in percentage points (``+0.0`` for none)."""
    v = 100 * x
    return f"{0.0 if abs(v) < 0.05 else v:+.1f}"


def pval(p: float) -> str:
    if p < 1e-300:  # below double precision's reliable range (and an exact 0.0 after underflow)
        return "< 1e-300"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def interval_title(iv: Interval, signed: bool = False) -> str:
    f = pp if signed else pct
    return f"95% CI [{f(iv.lo)}, {f(iv.hi)}]"


def _stub(settings: Sequence[Setting]) -> list[str]:
    """Label columns: model and dataset always; panel and design only where they vary."""
    cols = ["model", "dataset"]
    for attr in ("panel", "design"):
        if len({getattr(s, attr) for s in settings}) > 1:
            cols.append(attr)
    return cols


def _stub_cells(s: Setting, stub: Sequence[str]) -> list[Cell]:
    return [Cell(str(getattr(s, c)), numeric=False) for c in stub]


_GROUP_LATEX = {"A+": r"$A_{+}$", "A−": r"$A_{-}$", "F+": r"$F_{+}$", "J": r"$J$"}


def show(metric: str) -> str:
    """Display name of a metric key (``A-`` → ``A−``)."""
    return metric.replace("-", "−") if metric.startswith("A-") else metric


def table1(settings: Sequence[Setting]) -> Table:
    """Table 1: A+, A−, F+, J under U and C with Δ, DR-R, DR-F, P4 (percent); bold Δ: Holm p < .05."""
    stub = _stub(settings)
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$")]
    for g in ("A+", "A-", "F+", "J"):
        cols += [Column("U", show(g)), Column("C", show(g)), Column("Δ", show(g), r"$\Delta$")]
    cols += [Column("DR-R"), Column("DR-F"), Column("P4", latex="$P_4$")]
    rows = []
    for s in settings:
        row = [*_stub_cells(s, stub), Cell(str(s.n))]
        for g in ("A+", "A-", "F+", "J"):
            u, c, d = s.metrics[f"{g}_U"], s.metrics[f"{g}_C"], s.delta[g]
            bold = g in TESTED and s.test(g).reject
            row += [
                Cell(pct(u.value), title=interval_title(u)),
                Cell(pct(c.value), title=interval_title(c)),
                Cell(pp(d.value), bold=bold, title=interval_title(d, signed=True)),
            ]
        for m in ("DR_R", "DR_F", "P4"):
            row.append(Cell(pct(s.metrics[m].value), title=interval_title(s.metrics[m])))
        rows.append(tuple(row))
    return Table(
        "table1",
        "Table 1. PFR results (%)",
        "U/C: union/complement; Δ = C − U (pp); bold (text: *) Δ of A−/F+: Holm-adjusted exact McNemar "
        "p < .05; 95% paired text-bootstrap intervals in the next table.",
        tuple(cols),
        tuple(rows),
    )


def table_intervals(settings: Sequence[Setting], draws: int) -> Table:
    """Every Δ with its paired 95 % percentile interval (pp)."""
    stub = _stub(settings)
    cols = [Column(c) for c in stub] + [
        Column(f"Δ{show(k)}", latex=rf"$\Delta$ {_GROUP_LATEX.get(show(k), k)}") for k in DELTA_OF
    ]
    rows = []
    for s in settings:
        cells = []
        for k in DELTA_OF:
            iv = s.delta[k]
            bold = k in TESTED and s.test(k).reject
            cells.append(Cell(f"{pp(iv.value)} [{pp(iv.lo)}, {pp(iv.hi)}]", bold=bold))
        rows.append((*_stub_cells(s, stub), *cells))
    return Table(
        "intervals",
        "Paired intervals of Δ = C − U (pp)",
        f"95% percentile intervals, {draws:,} paired text-bootstrap draws (texts resampled with their four "
        "requests; compact tasks within coarse-category quotas). B = (A+ + A−)/2.",
        tuple(cols),
        tuple(rows),
    )


def table_tests(settings: Sequence[Setting], family: str = "all") -> Table:
    """One row per McNemar test: discordant counts, exact p, Holm-adjusted p, reject."""
    stub = _stub(settings)
    cols = [Column(c) for c in stub] + [
        Column("test", latex="test"), Column("b (U only)", latex="$b$"), Column("c (C only)", latex="$c$"),
        Column("p", latex="$p$"), Column("p Holm", latex=r"$p_{\mathrm{Holm}}$"), Column("reject"),
    ]  # fmt: skip
    rows = []
    for s in settings:
        for t in s.tests:
            rows.append(
                (
                    *_stub_cells(s, stub),
                    Cell(show(t.metric), numeric=False),
                    Cell(str(t.b)),
                    Cell(str(t.c)),
                    Cell(pval(t.p)),
                    Cell("—" if math.isnan(t.p_holm) else pval(t.p_holm), bold=t.reject),
                    Cell("—" if math.isnan(t.p_holm) else "yes" if t.reject else "no", numeric=False),
                )
            )
    n = sum(1 for s in settings for t in s.tests if not math.isnan(t.p_holm))
    return Table(
        "tests",
        "Exact McNemar tests of U vs C",
        f"Two-sided exact McNemar; A−: fallback picked on gold-fallback requests, F+: on gold-regular requests; "
        f"b/c: texts with the event under U only / C only; Holm over the {n} tests of the family {family!r}, "
        "α = .05; — : outside the family (descriptive).",
        tuple(cols),
        tuple(rows),
    )


def table_decomposition(settings: Sequence[Setting]) -> Table:
    """U→C decision changes per assignment: correct→wrong, wrong→correct, wrong→wrong (counts)."""
    stub = _stub(settings)
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$")]
    for name in ("gold-regular", "gold-fallback"):
        cols += [Column(k.replace("2", "→"), name, k.replace("2", r"$\to$")) for k in _DECOMP]
    rows = []
    for s in settings:
        cells = [Cell(str(s.decomposition[a][k])) for a in ("R", "F") for k in _DECOMP]
        rows.append((*_stub_cells(s, stub), Cell(str(s.n)), *cells))
    return Table(
        "decomposition",
        "Decision changes from U to C (texts)",
        "c→w: correct under U, wrong under C; w→c: the reverse; w→w: a different wrong decision. "
        "Their sum is the disagreement count (DR × n).",
        tuple(cols),
        tuple(rows),
    )


def table_reference(settings: Sequence[Setting]) -> Table | None:
    """The classify-then-map reference (accuracy, J, DR, F+) and the reference-correct subsets."""
    chosen = [s for s in settings if s.accuracy is not None or s.subset is not None]
    if not chosen:
        return None
    cols = (
        Column("model"), Column("dataset"), Column("panel"), Column("design"), Column("n", latex="$n$"),
        Column("accuracy"), Column("A+_U", latex=r"$A_{+}^U$"), Column("A+_C", latex=r"$A_{+}^C$"),
        Column("A−_U", latex=r"$A_{-}^U$"), Column("A−_C", latex=r"$A_{-}^C$"), Column("F+_U", latex=r"$F_{+}^U$"),
        Column("F+_C", latex=r"$F_{+}^C$"), Column("J_U", latex="$J_U$"), Column("J_C", latex="$J_C$"),
        Column("DR-R"), Column("DR-F"),
    )  # fmt: skip
    rows = []
    for s in chosen:
        acc = Cell(pct(s.accuracy.value), title=interval_title(s.accuracy)) if s.accuracy is not None else Cell("")
        cells = [Cell(pct(s.metrics[m].value), title=interval_title(s.metrics[m]))
                 for m in ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "J_U", "J_C", "DR_R", "DR_F")]  # fmt: skip
        rows.append((Cell(s.model, numeric=False), Cell(s.dataset, numeric=False), Cell(s.panel, numeric=False),
                     Cell(s.design, numeric=False), Cell(str(s.n)), acc, *cells))  # fmt: skip
    return Table(
        "reference",
        "Classify-then-map reference and reference-correct texts (%)",
        "task=classify-then-map: one full-inventory classification per text, mapped by g_S onto the main quads "
        "(DR = 0 and J = accuracy by construction); [reference-correct]: the direct setting restricted to the "
        "texts its model's reference classifies correctly.",
        cols,
        tuple(rows),
    )


def table_pooled(pooled: Sequence[Setting]) -> Table | None:
    """Pooled settings: each text's indicators averaged over a comparison's variants before the bootstrap."""
    if not pooled:
        return None
    cols = [Column("model"), Column("dataset"), Column("panel"), Column("design"), Column("variants"),
            Column("n", latex="$n$")]  # fmt: skip
    for g in ("A+", "A-", "F+", "J"):
        cols += [Column("U", show(g)), Column("C", show(g)), Column("Δ [95% CI]", show(g), r"$\Delta$ [95\% CI]")]
    cols += [Column("DR-R"), Column("DR-F"), Column("P4", latex="$P_4$")]
    rows = []
    for s in pooled:
        row = [Cell(s.model, numeric=False), Cell(s.dataset, numeric=False), Cell(s.panel, numeric=False),
               Cell(s.design, numeric=False), Cell(str(len(s.members))), Cell(str(s.n))]  # fmt: skip
        for g in ("A+", "A-", "F+", "J"):
            u, c, d = s.metrics[f"{g}_U"], s.metrics[f"{g}_C"], s.delta[g]
            row += [Cell(pct(u.value), title=interval_title(u)), Cell(pct(c.value), title=interval_title(c)),
                    Cell(f"{pp(d.value)} [{pp(d.lo)}, {pp(d.hi)}]")]  # fmt: skip
        for m in ("DR_R", "DR_F", "P4"):
            row.append(Cell(pct(s.metrics[m].value), title=interval_title(s.metrics[m])))
        rows.append(tuple(row))
    return Table(
        "pooled",
        "Pooled settings (%)",
        "Each text's indicators averaged over the variants of a comparison (wording templates, hash-seeded "
        "mappings, or choice set × position) before the paired bootstrap; texts scored under every variant; "
        "descriptive (no tests).",
        tuple(cols),
        tuple(rows),
    )


def table2(settings: Sequence[Setting]) -> Table | None:
    """Table 2: each intervention design against ``direct`` on the same model × dataset × panel."""
    groups: dict[tuple[str, str, str], list[Setting]] = {}
    for s in settings:
        groups.setdefault((s.model, s.dataset, s.panel), []).append(s)
    rows = []
    for members in groups.values():
        base = next((s for s in members if s.design == "direct"), None)
        others = [s for s in members if s.design != "direct" and s.subset is None]  # a subset has other texts
        if base is None or not others:
            continue
        rows.append(_t2_row(base, None))
        rows += [_t2_row(s, base) for s in others]
    if not rows:
        return None
    cols = (
        Column("model"), Column("dataset"), Column("panel"), Column("design"), Column("n", latex="$n$"),
        Column("J_U", latex="$J_U$"), Column("J_C", latex="$J_C$"), Column("DR-F"),
    )  # fmt: skip
    return Table(
        "table2",
        "Table 2. Interventions against Direct (%)",
        "J_U, J_C: joint correctness under U/C; DR-F: gold-fallback U/C disagreement; "
        "parentheses: change from Direct on the same model, dataset and panel (pp).",
        cols,
        tuple(rows),
    )


def _t2_row(s: Setting, base: Setting | None) -> tuple[Cell, ...]:
    cells = [Cell(s.model, numeric=False), Cell(s.dataset, numeric=False), Cell(s.panel, numeric=False),
             Cell(s.design, numeric=False), Cell(str(s.n))]  # fmt: skip
    for m in ("J_U", "J_C", "DR_F"):
        v = s.metrics[m]
        text = pct(v.value) if base is None else f"{pct(v.value)} ({pp(v.value - base.metrics[m].value)})"
        cells.append(Cell(text, title=interval_title(v)))
    return tuple(cells)


def is_policy(s: Setting) -> bool:
    return any(name.lower().startswith(POLICY_PREFIXES) for name in (s.panel, s.design))


def is_boundary(s: Setting) -> bool:
    """A boundary panel (DESIGN §4.3): all four requests require Fast, so its slots are two costs."""
    return s.panel.lower().startswith("boundary")


def table4(settings: Sequence[Setting]) -> Table | None:
    """Table 4: policy decisions as counts out of n (R = Fast required, F = Defer required;
    U = gain criterion, C = utility-complement criterion). Boundary panels have their own table."""
    chosen = [s for s in settings if is_policy(s) and not is_boundary(s)]
    if not chosen:
        return None
    stub = _stub(chosen)
    if "panel" not in stub:
        stub.append("panel")
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$")]
    cols += [Column("Gain", "Fast req."), Column("Util.", "Fast req.")]
    cols += [Column("Gain", "Defer req."), Column("Util.", "Defer req.")]
    cols += [Column("Fast", "DR"), Column("Defer", "DR")]
    cols += [Column("Gain", "J"), Column("Util.", "J"), Column("P4", latex="$P_4$")]
    rows = []
    for s in chosen:
        c = s.counts
        vals = [c["RU_ok"], c["RC_ok"], c["FU_ok"], c["FC_ok"], c["DR_R"], c["DR_F"], c["J_U"], c["J_C"], c["P4"]]
        rows.append((*_stub_cells(s, stub), Cell(str(s.n)), *(Cell(str(v)) for v in vals)))
    return Table(
        "table4",
        "Table 4. Policy decisions (counts out of n texts)",
        "Correct decisions by required action (Fast: gold-regular, Defer: gold-fallback) under the gain (U) "
        "and utility-complement (C) criteria; DR: decisions that differ between the criteria; J: both "
        "policies correct; P4: all four requests correct.",
        tuple(cols),
        tuple(rows),
    )


def table_boundary(settings: Sequence[Setting]) -> Table | None:
    """Boundary conditions (paper App. D): every request requires Fast; the quad's slots are the
    costs c = 0.10 (R) and c = 0.20 (F). A wrong decision there is an unnecessary Defer."""
    chosen = [s for s in settings if is_boundary(s)]
    if not chosen:
        return None
    stub = _stub(chosen)
    if "panel" not in stub:
        stub.append("panel")
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$")]
    cols += [Column("Gain", "c = 0.10"), Column("Util.", "c = 0.10"), Column("Gain", "c = 0.20")]
    cols += [Column("Util.", "c = 0.20"), Column("Defers"), Column("All four", latex="$P_4$")]
    rows = []
    for s in chosen:
        c = s.counts
        ok = [c["RU_ok"], c["RC_ok"], c["FU_ok"], c["FC_ok"]]
        vals = [*ok, 4 * s.n - sum(ok), c["P4"]]
        rows.append((*_stub_cells(s, stub), Cell(str(s.n)), *(Cell(str(v)) for v in vals)))
    return Table(
        "table_boundary",
        "Boundary conditions (counts out of n texts; Fast is required on every request)",
        "Fast chosen under the gain (Gain) and utility-complement (Util.) criteria at each cost; Defers: "
        "unnecessary deferrals over the 4n requests; All four: texts with Fast chosen on all four requests.",
        tuple(cols),
        tuple(rows),
    )


def all_tables(report: Report) -> list[Table]:
    s = report.settings
    tables = [table1(s), table_intervals(s, report.draws), table_tests(s, report.family.name), table_decomposition(s)]
    tables += [t for t in (table_reference(s), table_pooled(report.pooled), table2(s), table4(s), table_boundary(s))
               if t is not None]
    return tables


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


def column_groups(columns: Sequence[Column]) -> list[tuple[str, int, int]]:
    """Runs of adjacent columns with the same group label: (label, start, end)."""
    out: list[tuple[str, int, int]] = []
    for i, c in enumerate(columns):
        if out and out[-1][0] == c.group and c.group:
            out[-1] = (c.group, out[-1][1], i + 1)
        else:
            out.append((c.group, i, i + 1))
    return out


def _text(report: Report) -> str:
    if not report.settings:
        return "no complete quads (RU, RC, FU, FC) in " + ", ".join(report.stores)
    n_texts = sum(s.n for s in report.settings)
    head = (
        f"PFR report: {len(report.settings)} setting(s), {n_texts} texts; 95% paired text-bootstrap "
        f"intervals ({report.draws:,} draws, seed {report.seed}); exact McNemar, Holm over {report.n_tests} tests."
    )
    parts = [_wrap(head, 100)]
    parts += [_layout_text(t) for t in all_tables(report)]
    notes = setting_notes(report.settings)
    if notes:
        parts.append("Notes\n\n" + "\n".join(notes))
    return "\n\n\n".join(parts) + "\n"


def setting_notes(settings: Iterable[Setting]) -> list[str]:
    out = []
    for s in settings:
        if s.incomplete:
            out.append(f"- {s.label}: {s.incomplete} text(s) without all four requests were left out")
        if s.censored:
            out.append(f"- {s.label}: {100 * s.censored:.1f}% of requests have a censored option score")
        if s.invalid.get("all"):
            kinds = ", ".join(f"{c} {100 * s.invalid[c]:.1f}%" for c in ("RU", "RC", "FU", "FC"))
            out.append(f"- {s.label}: {100 * s.invalid['all']:.1f}% invalid answers (naming no option; counted wrong): "
                       f"{kinds}")  # fmt: skip
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
        f"({report.draws:,} draws, seed {report.seed}); exact McNemar tests, Holm over {report.n_tests} tests."
    )
    parts = [head, *(_layout_md(t) for t in all_tables(report))]
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
                head.append(rf"\multicolumn{{{end - start}}}{{c}}{{{_GROUP_LATEX.get(label, latex_escape(label))}}}")
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
    cols += [f"{a}_{k}" for a in ("R", "F") for k in _DECOMP]
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
        row += [s.decomposition[a][k] for a in ("R", "F") for k in _DECOMP]
        for metric in TESTED:
            t = s.test(metric)
            row += [t.b, t.c, t.p, "" if math.isnan(t.p_holm) else t.p_holm, t.reject]
        inv = [s.invalid.get(c, 0.0) for c in ("all", "RU", "RC", "FU", "FC")]
        w.writerow([*row, s.label_only, *inv])
    return buf.getvalue()


def render_tables(report: Report, fmt: str) -> str:
    """The report in ``fmt`` (text, markdown, latex, csv or json)."""
    if fmt == "json":
        from pfr.report.render import json_safe

        return json.dumps(json_safe(report.as_dict()), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report)
    if fmt == "latex":
        return _latex(report)
    return _text(report)
