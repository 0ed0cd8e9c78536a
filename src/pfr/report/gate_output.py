"""What a gate writes: its table (text, Markdown, JSON), JUnit XML for CI test reporters, and the
Markdown summary a GitHub Actions step shows on its run page (``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from pfr.errors import OutputError, PfrError
from pfr.files import atomic_write
from pfr.report.gate import CheckResult, display
from pfr.report.regression import Limited, MissingSetting, NewSetting, RegressionResult

#: a ``--min``/``--max`` check or a ``--max-drop``/``--max-rise`` one (or one whose setting CAND or BASE
#: lacks): all are written alike
Result = CheckResult | Limited

HEADER = ("model", "dataset", "panel", "design", "n", "check", "value [95% interval]", "bound", "verdict")


def rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in results:
        s = r.setting
        bound = "point" if r.on == "point" else ("lower" if r.threshold.kind == "min" else "upper")
        shown = f"{r.bound:.3f} ({bound})" if isinstance(r, (CheckResult, RegressionResult)) else "—"
        verdict = "not checked" if isinstance(r, NewSetting) else "pass" if r.passed else "FAIL"
        out.append((s.model, s.dataset, s.panel, s.design, str(s.n), r.name, r.describe(), shown, verdict))
    return out


def verdict_line(results: Sequence[Result]) -> str:
    """The gate's verdict over the checks it made; limits on settings only CAND scored are counted apart."""
    skipped = sum(isinstance(r, NewSetting) for r in results)
    checked = len(results) - skipped
    failed = sum(not r.passed for r in results)
    line = f"PFR gate: all {checked} checks pass." if not failed else f"PFR gate: {failed} of {checked} checks FAIL."
    if skipped:
        line += f" {skipped} not checked: a setting only CAND scored has no baseline to regress from."
    return line


def unpaired_notes(results: Sequence[Result]) -> list[str]:
    """One line per setting checked on fewer texts than BASE scored: the texts only BASE scored are
    outside its checks (a candidate run on part of the panel is checked on that part only)."""
    seen: dict[tuple[str, ...], str] = {}
    for r in results:
        if isinstance(r, RegressionResult) and r.base_only and r.setting.key not in seen:
            s = r.setting
            seen[s.key] = (f"{' · '.join(s.key)}: checked on the {s.n} texts both scored; {r.base_only} text(s) "
                           f"BASE scored were not scored by CAND and are not checked")  # fmt: skip
    return list(seen.values())


def render_text(results: Sequence[Result]) -> str:
    table = [HEADER, *rows(results)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = [verdict_line(results), "", *lines]
    notes = unpaired_notes(results)
    if notes:
        out += ["", *(f"note: {n}" for n in notes)]
    for r in results:
        if r.failing:
            out += ["", f"{_title(r)}: {r.n_failing} {_what_fails(r, 'failing input(s)')}; the first {len(r.failing)}:"]
            out += [f"  {line}" for line in _input_lines(r)]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    for ch in ("\\", "|", "*", "_", "`", "<", ">", "[", "]"):
        text = text.replace(ch, "\\" + ch)
    return text


def render_markdown(results: Sequence[Result]) -> str:
    lines = [f"### {verdict_line(results)}", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows(results):
        cells = [_md(c) for c in row]
        if cells[-1] == "FAIL":
            cells[-1] = "**FAIL**"
        lines.append("| " + " | ".join(cells) + " |")
    notes = unpaired_notes(results)
    if notes:
        lines += ["", *(f"- note: {_md(n)}" for n in notes)]
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[Result]) -> str:
    data = {"passed": all(r.passed for r in results), "checks": [r.as_dict() for r in results]}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_checks(results: Sequence[Result], fmt: str = "text") -> str:
    if fmt not in ("text", "markdown", "md", "json"):
        raise PfrError(f"--format {fmt!r}: pfr check writes text, markdown or json")
    if fmt == "json":
        return render_json(results)
    if fmt in ("markdown", "md"):
        return render_markdown(results)
    return render_text(results)


def _what_fails(r: Result, inputs: str) -> str:
    """What a failed check lists: the inputs against its threshold, or the texts a candidate regressed on."""
    if not isinstance(r, RegressionResult):
        return inputs
    if r.threshold.metric == "P4":
        return "text(s) newly broken (P4 in BASE, not in CAND)"
    return f"text(s) regressed on {display(r.threshold.metric)} (passing it in BASE, not in CAND)"


def _title(r: Result) -> str:
    return f"{' · '.join(r.setting.key)}: {r.name}"


def _input_lines(r: Result) -> list[str]:
    out = []
    for f in r.failing:
        text = f.text if len(f.text) <= 200 else f.text[:199] + "…"
        choices = "; ".join(f"{cell} chose {chosen} (expected {expected})" for cell, chosen, expected in f.choices)
        out.append(f"{text!r} — {choices}")
    return out


def junit_xml(results: Sequence[Result], name: str = "pfr-check") -> bytes:
    """One ``testsuite`` with one ``testcase`` per check; a failed check is a ``failure`` whose message
    names the metric, the interval and the bound, and whose text lists up to five failing inputs."""
    failed = sum(not r.passed for r in results)
    skipped = sum(isinstance(r, NewSetting) for r in results)
    suite = ET.Element("testsuite", name=name, tests=str(len(results)), failures=str(failed), errors="0",
                       skipped=str(skipped))  # fmt: skip
    for r in results:
        s = r.setting
        case = ET.SubElement(
            suite, "testcase", classname=f"pfr.{s.model}.{s.dataset}", name=f"{s.panel} · {s.design}: {r.name}"
        )
        if isinstance(r, NewSetting):
            ET.SubElement(case, "skipped", message=r.skip_message())
        elif not r.passed:
            msg = r.failure_message()
            fail = ET.SubElement(case, "failure", message=msg, type="threshold")
            body = [msg, f"{r.n_failing} {_what_fails(r, 'input(s) work against it')}; the first {len(r.failing)}:",
                    *_input_lines(r)] if not isinstance(r, MissingSetting) else [msg]  # fmt: skip
            fail.text = "\n".join(body)
    root = ET.Element("testsuites", tests=str(len(results)), failures=str(failed))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(results: Sequence[Result], path: str | os.PathLike[str]) -> None:
    atomic_write(path, [junit_xml(results).decode("utf-8")])


def publish(
    results: Sequence[Result], junit: str | os.PathLike[str] | None, step_summary: str | os.PathLike[str] | None
) -> None:
    """Where ``pfr check`` and a study's ``[check]`` report beyond their table: JUnit XML and the step summary."""
    if junit is not None:
        write_junit(results, junit)
    if step_summary:
        append_step_summary(results, step_summary)


def append_step_summary(results: Sequence[Result], path: str | os.PathLike[str]) -> None:
    """Append the Markdown table to a GitHub Actions step summary file (created if missing)."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(render_markdown(results) + "\n")
    except OSError as exc:
        why = exc.strerror or exc
        raise OutputError(f"{path}: cannot append the step summary ($GITHUB_STEP_SUMMARY; {why})") from None
