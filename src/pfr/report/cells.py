"""The report's tables as data: cells already formatted (percent with one decimal, a bold flag,
an interval tooltip), free of any output format. :mod:`pfr.report.tables` fills them,
:mod:`pfr.report.writers` and the HTML page lay them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pfr.analysis.bootstrap import Interval


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



#: metric group labels as LaTeX column heads
GROUP_LATEX = {"A+": r"$A_{+}$", "A−": r"$A_{-}$", "F+": r"$F_{+}$", "J": r"$J$"}


def show(metric: str) -> str:
    """Display name of a metric key (``A-`` → ``A−``)."""
    return metric.replace("-", "−") if metric.startswith("A-") else metric



def column_groups(columns: Sequence[Column]) -> list[tuple[str, int, int]]:
    """Runs of adjacent columns with the same group label: (label, start, end)."""
    out: list[tuple[str, int, int]] = []
    for i, c in enumerate(columns):
        if out and out[-1][0] == c.group and c.group:
            out[-1] = (c.group, out[-1][1], i + 1)
        else:
            out.append((c.group, i, i + 1))
    return out
