"""The format switch of ``pfr report``: a :class:`~pfr.report.model.Report` as text, Markdown, LaTeX,
CSV, JSON (:mod:`pfr.report.writers`) or a self-contained HTML page (:mod:`pfr.report.html`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from pfr.analysis.stats_tests import Family
from pfr.errors import PfrError
from pfr.report.model import Report, build_report, load_report

__all__ = ["FORMATS", "build_report", "format_for", "load_report", "render", "render_report"]

FORMATS = ("text", "markdown", "latex", "csv", "json", "html")
_FORMAT_ALIASES = {"md": "markdown", "tex": "latex", "txt": "text", "htm": "html"}


def _normalise_format(fmt: str) -> str:
    f = _FORMAT_ALIASES.get(fmt.lower(), fmt.lower())
    if f not in FORMATS:
        raise PfrError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
    return f


#: an output file's suffix → its report format (``pfr report --out`` without ``--format``)
SUFFIX_FORMATS = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".tex": "latex", ".csv": "csv",
                  ".json": "json", ".html": "html", ".htm": "html"}  # fmt: skip


def format_for(out: str | None, fmt: str | None) -> str:
    """The report format: ``fmt`` when given, else the suffix of the file ``out`` (text on stdout);
    a suffix that names no format is an error, so an HTML file never receives text."""
    if fmt is not None:
        return _normalise_format(fmt)
    if out is None or out == "-":
        return "text"
    suffix = PurePath(out).suffix.lower()
    if suffix not in SUFFIX_FORMATS:
        known = ", ".join(dict.fromkeys(SUFFIX_FORMATS))
        raise PfrError(f"--out {out}: {f'the suffix {suffix}' if suffix else 'no suffix'} names no report format; "
                       f"give --format ({', '.join(FORMATS)}) or a file ending in {known}")  # fmt: skip
    return SUFFIX_FORMATS[suffix]


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
