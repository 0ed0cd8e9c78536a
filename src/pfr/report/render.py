"""The format switch of ``pfr report``: a :class:`~pfr.report.model.Report` as text, Markdown, LaTeX,
CSV, JSON (:mod:`pfr.report.writers`) or a self-contained HTML page (:mod:`pfr.report.html`)."""

from __future__ import annotations

from collections.abc import Sequence

from pfr.analysis.stats_tests import Family
from pfr.errors import PfrError
from pfr.report.model import Report, build_report, load_report

__all__ = ["FORMATS", "build_report", "load_report", "render", "render_report"]

FORMATS = ("text", "markdown", "latex", "csv", "json", "html")
_FORMAT_ALIASES = {"md": "markdown", "tex": "latex", "txt": "text", "htm": "html"}


def _normalise_format(fmt: str) -> str:
    f = _FORMAT_ALIASES.get(fmt.lower(), fmt.lower())
    if f not in FORMATS:
        raise PfrError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
    return f


def render_report(
    stores: Sequence[str], fmt: str = "text", draws: int = 10_000, seed: int = 0, family: str | Family | None = None
) -> str:
    """The report of ``stores`` as text, markdown, latex, csv, json or html (Holm over ``family``)."""
    f = _normalise_format(fmt)
    report = load_report(stores, draws=draws, seed=seed, family=family)
    return render(report, f)


def render(report: Report, fmt: str) -> str:
    """Format an already computed report (``fmt`` as in :func:`render_report`)."""
    f = _normalise_format(fmt)
    if f == "html":
        from pfr.report.html import render_html

        return render_html(report)
    from pfr.report.writers import render_tables

    return render_tables(report, f)
