"""Reports: tables in text, Markdown, LaTeX, CSV, JSON and a self-contained HTML page."""

from pfr.report.render import render_report

__all__ = ["render_report"]
