"""Every report opens with a verdict in words; Markdown and HTML define every metric; a figure that
compares models is left out when there is one model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pfr.report.figures import figures
from pfr.report.render import Report, load_report, render
from pfr.report.verdict import DEFINITIONS, verdicts


@pytest.fixture(scope="module")
def fickle_report(trec_stores: dict[str, Path]) -> Report:
    return load_report([str(trec_stores["fickle"])], draws=300)


def test_verdict_numbers_are_the_metrics(fickle_report: Report) -> None:
    [v] = verdicts(fickle_report)  # one model × dataset, though it has two designs
    s = v.setting
    assert s.design == "direct" and s.panel == "main"
    m = s.metrics
    miss_c = round(100 * (1 - m["A-_C"].value))
    assert f"Under the complement rule, {miss_c} % of the inputs that should go to Other stay in a category" in v.text
    assert f"(DR-F {m['DR_F'].value:.2f})" in v.text
    assert f"{round(100 * m['P4'].value)} % of the inputs pass all four requests (P4)" in v.text
    assert f"{round(100 * m['F+_C'].value)} % of the inputs with a fitting category are sent to Other" in v.text
    # the fickle model's C misses the fallback on half the texts: a Holm-significant A− difference
    assert s.test("A-").reject and "The U/C difference in A−" in v.text
    assert re.search(r"One decision in (two|three|four|five|\d+) changes", v.text)


def test_every_format_opens_with_the_summary(fickle_report: Report) -> None:
    [v] = verdicts(fickle_report)
    text = render(fickle_report, "text")
    assert text.startswith("Summary\n\nfickle") or text.startswith("Summary\n\npython:")
    assert " ".join(text.split("\n\n\n")[0].split()).endswith(v.text)
    md = render(fickle_report, "markdown")
    assert md.index("### Summary") < md.index("### Table 1")
    data = json.loads(render(fickle_report, "json"))
    assert next(iter(data)) == "summary" and data["summary"][0]["summary"] == v.text
    html = render(fickle_report, "html")
    assert html.index('id="summary"') < html.index('id="tables"')
    assert "Holm family &#39;primary&#39;" in html or "Holm family 'primary'" in html


def test_definitions_in_markdown_and_html(fickle_report: Report) -> None:
    md = render(fickle_report, "markdown")
    html = render(fickle_report, "html")
    for name, _ in DEFINITIONS:
        assert f"- **{name}**:" in md
        assert f"<dt>{name}</dt>" in html
    for metric in ("A+", "A−", "F+", "J", "DR-R", "DR-F", "P4", "Δ"):
        assert metric in {n for n, _ in DEFINITIONS}


def test_size_figure_needs_several_models(fickle_report: Report, trec_stores: dict[str, Path]) -> None:
    assert "recall_size" not in figures(fickle_report)
    both = load_report([str(trec_stores["fickle"]), str(trec_stores["oracle"])], draws=100)
    assert "recall_size" in figures(both)


def test_the_text_header_counts_each_text_once(fickle_report: Report, trec_stores: dict[str, Path]) -> None:
    """Two models (or two designs) on the same 96 texts are 96 texts, not 192 or 288."""
    both = load_report([str(trec_stores["fickle"]), str(trec_stores["oracle"])], draws=100)
    assert len(both.settings) == 3 and sum(s.n for s in both.settings) == 3 * 96
    head = " ".join(render(both, "text").split("\n\n\n")[1].split())
    assert head.startswith("PFR report: 3 setting(s) over 96 distinct texts (288 quads of four requests);"), head
    head = " ".join(render(fickle_report, "text").split("\n\n\n")[1].split())
    assert head.startswith("PFR report: 2 setting(s) over 96 distinct texts (192 quads of four requests);"), head


def test_definitions_in_text(fickle_report: Report) -> None:
    """The text report ends its tables with the same definitions as Markdown and HTML, one per name."""
    text = render(fickle_report, "text")
    block = next(part for part in text.split("\n\n\n") if part.startswith("Definitions\n"))
    starts = [line.split("  ")[0] for line in block.splitlines()[2:] if not line.startswith(" ")]
    assert starts == [name for name, _ in DEFINITIONS]
    assert {"A+", "A−", "F+", "J", "B", "DR-R", "DR-F", "P4", "Δ", "INV"} <= set(starts)
    words = " ".join(block.split())
    for name, meaning in DEFINITIONS:
        assert f"{name} {' '.join(meaning.split())}" in words
    assert text.index("Definitions\n") > text.index("Decision changes from U to C")
