"""The paper's tables (Table 1, 2, 4 and the interval/test/decomposition companions) built from a
report's settings as format-free :class:`~pfr.report.cells.Table` values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pfr.analysis.metrics import DECOMPOSITION, DELTA_OF, INVALID_METRICS, QUAD
from pfr.analysis.stats_tests import TESTED
from pfr.report.cells import GROUP_LATEX, Cell, Column, Table, interval_title, pct, pp, pval, show
from pfr.report.model import Report, Setting

POLICY_PREFIXES = ("policy", "boundary")
DECOMP = DECOMPOSITION
#: decomposition column heads that are not ``a2b``
_DECOMP_NAME = {"inv": "invalid"}


def _stub(settings: Sequence[Setting]) -> list[str]:
    """Label columns: model and dataset always; panel and design only where they vary."""
    cols = ["model", "dataset"]
    for attr in ("panel", "design"):
        if len({getattr(s, attr) for s in settings}) > 1:
            cols.append(attr)
    return cols


def _stub_cells(s: Setting, stub: Sequence[str]) -> list[Cell]:
    return [Cell(str(getattr(s, c)), numeric=False) for c in stub]



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
        Column(f"Δ{show(k)}", latex=rf"$\Delta$ {GROUP_LATEX.get(show(k), k)}") for k in DELTA_OF
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
        f"Two-sided exact McNemar; A−: fallback picked on gold-fallback requests, F+: on gold-regular requests "
        "(an invalid answer picks nothing); "
        f"b/c: texts with the event under U only / C only; Holm over the {n} tests of the family {family!r}, "
        "α = .05; — : outside the family (descriptive).",
        tuple(cols),
        tuple(rows),
    )


def table_decomposition(settings: Sequence[Setting]) -> Table:
    """U→C decision changes per assignment: correct→wrong, wrong→correct, wrong→wrong, and changes that
    involve an invalid answer (counts)."""
    stub = _stub(settings)
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$")]
    for name in ("gold-regular", "gold-fallback"):
        cols += [Column(_DECOMP_NAME.get(k, k.replace("2", "→")), name, k.replace("2", r"$\to$")) for k in DECOMP]
    rows = []
    for s in settings:
        cells = [Cell(str(s.decomposition[a][k])) for a in ("R", "F") for k in DECOMP]
        rows.append((*_stub_cells(s, stub), Cell(str(s.n)), *cells))
    return Table(
        "decomposition",
        "Decision changes from U to C (texts)",
        "c→w: correct under U, wrong under C; w→c: the reverse; w→w: a different wrong decision; invalid: "
        "an invalid answer under U or C (or both), which is never the same decision. Their sum is the "
        "disagreement count (DR × n).",
        tuple(cols),
        tuple(rows),
    )


def table_invalid(settings: Sequence[Setting]) -> Table | None:
    """Invalid answers (docs/method.md §6.1), where there are any: INV over all requests and per
    request kind, with intervals (they are wrong everywhere and never a fallback pick)."""
    chosen = [s for s in settings if s.metrics["INV"].value > 0]
    if not chosen:
        return None
    stub = _stub(chosen)
    cols = [Column(c) for c in stub] + [Column("n", latex="$n$"), Column("INV")]
    cols += [Column(c, "per request kind") for c in QUAD]
    rows = []
    for s in chosen:
        cells = [Cell(pct(s.metrics[m].value), title=interval_title(s.metrics[m])) for m in INVALID_METRICS]
        rows.append((*_stub_cells(s, stub), Cell(str(s.n)), *cells))
    return Table(
        "invalid",
        "Invalid answers (%)",
        "INV: the share of requests whose answer names no option (unparseable, a label that is no option, a "
        "letter and a label that disagree). An invalid answer is wrong, never a fallback pick, and never the "
        "same decision as another answer.",
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
    """A boundary panel (docs/method.md §4.3): all four requests require Fast, so its slots are two costs."""
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
        vals = [*ok, sum(c[f"{q}_fb"] for q in QUAD), c["P4"]]  # an invalid answer is no Defer
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
    tables += [t for t in (table_invalid([*s, *report.pooled]), table_reference(s), table_pooled(report.pooled),
                           table2(s), table4(s), table_boundary(s))
               if t is not None]
    return tables

