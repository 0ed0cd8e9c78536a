"""The self-contained HTML report: tables, embedded figures, and a card per text (:mod:`pfr.report.viewer`).

One file, no external URL: CSS and a few lines of vanilla JS inline, figures as base64 PNGs.
Jinja2 runs with autoescape on, so every dataset or model string is escaped; data reach the
script only through escaped ``data-*`` attributes, and a Content-Security-Policy that allows
exactly the report's own script (by hash) keeps any injected markup inert.
"""

from __future__ import annotations

import base64

from jinja2 import Environment, PackageLoader

from pfr.analysis.metrics import QUAD
from pfr.report.cells import column_groups
from pfr.report.model import Report
from pfr.report.tables import all_tables
from pfr.report.viewer import SCRIPT_HASH, failure_kinds, run_viewer
from pfr.report.writers import setting_notes

__all__ = ["failure_kinds", "html_env", "render_html"]


def html_env() -> Environment:
    """The templates of the HTML pages (autoescape on)."""
    env = Environment(loader=PackageLoader("pfr.report", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)  # fmt: skip
    env.filters["signed"] = lambda x: "n/a" if x != x else ("+∞" if x == float("inf") else f"{x:+.2f}")
    env.globals["quad"] = QUAD
    return env


def render_html(report: Report) -> str:
    """The whole report as one self-contained HTML page."""
    from pfr.report.figures import CAPTIONS, figures, png_bytes
    from pfr.report.verdict import DEFINITIONS, verdicts

    figs = []
    for name, fig in figures(report).items():
        figs.append({"name": name, "caption": CAPTIONS[name],
                     "src": "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")})  # fmt: skip
    template = html_env().get_template("report.html.j2")
    return template.render(
        report=report,
        tables=all_tables(report) if report.settings else [],
        notes=setting_notes(report.settings),
        groups=column_groups,
        figures=figs,
        v=run_viewer(report),
        script_hash=SCRIPT_HASH,
        summary=verdicts(report),
        definitions=DEFINITIONS,
    )
