"""A report's verdict in words, and what each metric means.

A table of fourteen percentages does not tell a practitioner what went wrong; every report opens
with a few sentences per model × dataset that do (how many fallback inputs stay in a category, how
often two equivalent definitions disagree, how many inputs pass all four requests), and every
report but CSV, JSON and LaTeX defines the metrics it shows.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pfr.analysis.stats_tests import direct_form
from pfr.report.model import Report, Setting

#: every metric of the report and its meaning, in the order of Table 1
DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("A+", "accuracy on gold-regular requests (R): the share of inputs whose fitting category is offered "
           "that get exactly that category"),
    ("A−", "fallback recall on gold-fallback requests (F): the share of inputs whose category was swapped "
           "out that go to the fallback option, as they should"),
    ("F+", "false-fallback rate on gold-regular requests (R): the share of inputs with a fitting category "
           "that are sent to the fallback anyway"),
    ("J", "joint correctness of a text under one definition: both its R and its F request are right"),
    ("B", "balanced accuracy (A+ + A−) / 2 under one definition"),
    ("DR-R", "disagreement rate under R: the share of texts whose decision differs between the union (U) "
             "and the complement (C) statement of the same fallback rule"),
    ("DR-F", "disagreement rate under F: the same for the gold-fallback request"),
    ("P4", "the share of texts correct on all four requests (RU, RC, FU, FC): right and consistent"),
    ("INV", "invalid-answer rate: the share of requests whose answer names no option (per request kind: INV_RU, "
            "…); such an answer is wrong, never a fallback pick, and never the same decision as another"),
    ("Δ", "C − U: the complement statement's value minus the union statement's, in percentage points, "
          "with a paired 95 % bootstrap interval; U/C differences of A− and F+ are tested with exact "
          "McNemar tests, Holm-corrected over the report's family"),
    ("U / C", "the two equivalent statements of the fallback rule: U lists the categories that go to the "
              "fallback, C says 'none of the categories offered'"),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """The plain summary of one model × dataset (from its primary setting)."""

    model: str
    dataset: str
    setting: Setting
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    def as_dict(self) -> dict[str, object]:
        s = self.setting
        return {"model": self.model, "dataset": self.dataset, "panel": s.panel, "design": s.design,
                "summary": self.text}  # fmt: skip


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _one_in(rate: float) -> str:
    """0.33 → "one decision in three changes", 0.05 → "one decision in 20 changes"."""
    if rate <= 0:
        return "no decision changes"
    if rate > 0.75:
        return f"{_pct(rate)} of decisions change"
    n = round(1 / rate)
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    return f"one decision in {words.get(n, str(n))} changes"


def _fallback_name(design: str) -> str:
    for part in design.split(";"):
        if part.startswith("fallback="):
            return part.split("=", 1)[1]
    return "Other"


def primary(settings: Sequence[Setting]) -> Setting:
    """The setting a model × dataset is summarised by: direct on main, else a direct-form design
    on main, else its first setting."""
    plain = [s for s in settings if s.subset is None]
    for pick in (
        lambda s: s.panel == "main" and s.design == "direct",
        lambda s: s.panel == "main" and direct_form(s.design),
        lambda s: direct_form(s.design),
    ):
        found = [s for s in plain if pick(s)]
        if found:
            return found[0]
    return (plain or list(settings))[0]


def sentences(s: Setting) -> tuple[str, ...]:
    m = s.metrics
    other = _fallback_name(s.design)
    # an invalid answer (docs/method.md §6.1) misses the fallback without staying in a category
    miss_u, miss_c = 1 - m["A-_U"].value - m["INV_FU"].value, 1 - m["A-_C"].value - m["INV_FC"].value
    worse = "complement" if miss_c >= miss_u else "union"
    out = [
        f"Under the {worse} rule, {_pct(max(miss_u, miss_c))} of the inputs that should go to {other} stay in "
        f"a category ({_pct(min(miss_u, miss_c))} under the {'union' if worse == 'complement' else 'complement'} "
        "rule).",
    ]
    fp_u, fp_c = m["F+_U"].value, m["F+_C"].value
    if max(fp_u, fp_c) > 0:
        out.append(f"{_pct(max(fp_u, fp_c))} of the inputs with a fitting category are sent to {other} under the "
                   f"{'complement' if fp_c >= fp_u else 'union'} rule (F+).")  # fmt: skip
    if m["INV"].value > 0:
        out.append(f"{_pct(m['INV'].value)} of the answers name no option (INV); they count as wrong, never as "
                   f"sent to {other}.")  # fmt: skip
    dr_f = m["DR_F"].value
    out.append(f"{_one_in(dr_f).capitalize()} between two equivalent definitions of the rule "
               f"(DR-F {dr_f:.2f}); {_pct(m['P4'].value)} of the inputs pass all four requests (P4).")  # fmt: skip
    significant = [t for t in s.tests if t.reject]
    if significant:
        names = " and ".join("A−" if t.metric == "A-" else t.metric for t in significant)
        out.append(f"The U/C difference in {names} is significant after Holm correction.")
    out.append(f"({s.n} texts; {s.panel} panel, design {s.design}.)")
    return tuple(out)


def verdicts(report: Report) -> list[Verdict]:
    """One verdict per model × dataset, in report order."""
    groups: dict[tuple[str, str], list[Setting]] = {}
    for s in report.settings:
        groups.setdefault((s.model, s.dataset), []).append(s)
    out = []
    for (model, dataset), members in groups.items():
        s = primary(members)
        out.append(Verdict(model, dataset, s, sentences(s)))
    return out


def summary_text(report: Report, width: int = 100) -> str:
    lines = ["Summary"]
    for v in verdicts(report):
        lines += ["", *textwrap.wrap(f"{v.model} on {v.dataset}: {v.text}", width)]
    return "\n".join(lines)


def summary_markdown(report: Report, escape: Callable[[str], str] = str) -> str:
    lines = ["### Summary", ""]
    lines += [f"- **{escape(v.model)}** on **{escape(v.dataset)}**: {escape(v.text)}" for v in verdicts(report)]
    return "\n".join(lines)


def definitions_text(width: int = 100) -> str:
    """The definitions block of the text report: each metric's name, then its meaning, wrapped."""
    lines = ["Definitions", ""]
    pad = max(len(name) for name, _ in DEFINITIONS) + 2
    for name, meaning in DEFINITIONS:
        lines += textwrap.wrap(meaning, width, initial_indent=name.ljust(pad), subsequent_indent=" " * pad)
    return "\n".join(lines)


def definitions_markdown() -> str:
    lines = ["### Definitions", ""]
    lines += [f"- **{name}**: {meaning}" for name, meaning in DEFINITIONS]
    return "\n".join(lines)
