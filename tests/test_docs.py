"""The docs stay reference: option tables match each backend's declaration, no citation leaves the repository."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _option_docs():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("option_docs", ROOT / "scripts" / "option_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_option_tables_match_the_declarations() -> None:
    assert _option_docs().problems() == []


def test_a_table_that_drifts_from_its_declaration_is_rewritten() -> None:
    """The check is live: a table missing one of the declared options, or listing one that is gone, is drift."""
    od = _option_docs()
    names = [row[0] for row in od.declared_rows("hf")]
    assert names[-1] == "gen_temperature", "the hf backend declares the decide options last"
    text = (ROOT / "docs" / "backends-hf.md").read_text(encoding="utf-8")
    block = od.BLOCK.search(text)
    assert block is not None and block.group(2) == "hf"
    row = next(line for line in block.group(3).splitlines() if line.startswith(f"| `{names[-1]}`"))
    dropped = text.replace(row + "\n", "")
    assert od.render(dropped)[0] == text  # a declared option missing from the table comes back
    extra = text.replace(row, row + "\n| `no_such_option` | 1 | gone |")
    assert od.render(extra)[0] == text


@pytest.mark.parametrize("path", sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]), ids=lambda p: p.name)
def test_docs_cite_nothing_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"DESIGN §|shared/spec|\.\./shared/(?!data)", text), path


def test_method_has_every_section_the_code_cites() -> None:
    """Every ``method.md §N`` / ``DESIGN §N`` a source or test file cites is a heading of docs/method.md."""
    headings = set(re.findall(r"^#{2,3} §(\d+(?:\.\d+)?) ", (ROOT / "docs" / "method.md").read_text(), re.M))
    cited = set()
    for f in [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for m in re.finditer(r"(?:DESIGN|method\.md) §(\d+(?:\.\d+)?)(?:[–-](\d+(?:\.\d+)?))?", f.read_text()):
            cited.update(x for x in m.groups() if x)
    assert cited - headings == set()


@pytest.mark.parametrize(
    "path", sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_relative_links_resolve(path: Path) -> None:
    """A link to another file of the repository points at a file that exists (moved docs break none)."""
    text = path.read_text(encoding="utf-8")
    missing = [
        target
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)
        if "://" not in target and not (path.parent / target).exists()
    ]
    assert missing == []


def test_declared_backends_get_their_table_from_the_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A declared backend's table is written from its declaration: a changed default or help shows."""
    from dataclasses import replace

    from pfr.models import registry
    from pfr.models.simple.baselines import BACKEND

    seed = replace(BACKEND.options[0], default=7, help="a new meaning")
    monkeypatch.setitem(registry._DECLARED, "baseline", replace(BACKEND, options=(seed, *BACKEND.options[1:])))
    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    new = _option_docs().render(text)[0]
    assert "| `seed` | 7 | a new meaning |" in new and "| `seed` | 0 |" not in new


def test_the_plugin_example_in_the_docs_is_the_whole_file() -> None:
    """docs/backends.md shows the example plug-in as it is (the test in tests/models/test_plugins.py runs it)."""
    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    for name, lang in (("pfr_echo.py", "python"), ("pyproject.toml", "toml")):
        source = (ROOT / "examples" / "echo-backend" / name).read_text(encoding="utf-8")
        assert f"```{lang}\n{source}```" in text, name


_LAB_NOTES = re.compile(
    r"load average|\bload (?:at the start |≈ ?)?\d|\bnot yet\b|\bso far\b|\b20\d\d-\d\d-\d\d\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? 20\d\d\b",
    re.I,
)


def test_performance_md_is_reference_size() -> None:
    assert (ROOT / "docs" / "performance.md").stat().st_size < 12 * 1024


@pytest.mark.parametrize("path", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: p.name)
def test_docs_are_reference_not_lab_notes(path: Path) -> None:
    """No load averages, dates or "not yet run" in the user guides (dated runs live in benchmarks/results
    and CHANGELOG.md); a date inside code (an example value such as ``version=2026-12-01``) is allowed."""
    text = re.sub(r"```.*?```|`[^`\n]*`", "", path.read_text(encoding="utf-8"), flags=re.S)
    found = [m.group(0) for m in _LAB_NOTES.finditer(text)]
    assert found == [], f"{path.name}: {found}"


def test_the_http_table_is_written_from_its_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/deployed.md's ``http:`` options table comes from the declaration in pfr.models.http.backend."""
    from dataclasses import replace

    from pfr.models import registry
    from pfr.models.http.backend import BACKEND

    timeout = next(o for o in BACKEND.options if o.name == "timeout")
    changed = tuple(replace(o, default=9, help="a new meaning") if o is timeout else o for o in BACKEND.options)
    monkeypatch.setitem(registry._DECLARED, "http", replace(BACKEND, options=changed))
    text = (ROOT / "docs" / "deployed.md").read_text(encoding="utf-8")
    assert "| `timeout` | 30 | seconds per call |" in text
    new = _option_docs().render(text)[0]
    assert "| `timeout` | 9 | a new meaning |" in new and "| `timeout` | 30 |" not in new
