"""Keep the option tables of docs/backends*.md and docs/deployed.md in step with each backend's declaration.

A table sits between ``<!-- options:NAME -->`` and ``<!-- /options:NAME -->``. A backend with a
declaration (:class:`pfr.models.declaration.Declaration`) gets its whole table written from it: each
option's name, default and help, in declaration order. For a backend not yet declared, rows are
rewritten in the order of its ``OPTIONS`` (sorted when ``OPTIONS`` is a set): an option's default and
meaning are kept from the row already there, a new option gets a ``TODO`` row to fill in, and a row
whose option is gone is dropped. A backend with neither keeps its table as written.

    python scripts/option_docs.py            # rewrite the tables in place
    python scripts/option_docs.py --check    # exit 1 and name every table that drifted (tests/test_docs.py)
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("backends*.md")), ROOT / "docs" / "deployed.md"]
HEADER = "| option | default | meaning |\n| --- | --- | --- |\n"
TODO = "TODO: describe"
#: table name → where its option names live, first found wins ("module:ATTRIBUTE"; the registry's
#: factory module is tried first, so a backend moved into a package needs no change here).
SOURCES: dict[str, tuple[str, ...]] = {
    "hf": ("pfr.models.hf:OPTIONS",),
    "vllm": ("pfr.models.vllm:OPTIONS",),
    "openai": ("pfr.models.openai:OPTIONS",),
    "llamacpp": ("pfr.models.llamacpp:OPTIONS",),
}
BLOCK = re.compile(r"(<!-- options:([\w.-]+) -->\n)(.*?)(<!-- /options:\2 -->)", re.S)


def declared_rows(name: str) -> list[tuple[str, str, str]] | None:
    """``(option, default, meaning)`` rows from the backend's declaration, or None when it has none."""
    from pfr.models import registry

    declaration = getattr(registry, "declaration", None)
    decl = declaration(name) if declaration is not None and name not in registry._FACTORIES else None
    return None if decl is None else decl.rows()


def option_names(name: str) -> list[str] | None:
    """The backend's option names, or None when it declares none."""
    from pfr.models import registry

    rows = declared_rows(name)
    if rows is not None:
        return [r[0] for r in rows]
    factory = getattr(registry, "_FACTORIES", {}).get(name, "")
    candidates = ([factory.partition(":")[0] + ":OPTIONS"] if factory else []) + list(SOURCES.get(name, ()))
    for cand in candidates:
        module, _, attr = cand.partition(":")
        try:
            value = getattr(importlib.import_module(module), attr, None)
        except ImportError:
            continue
        if value is not None:
            return list(value) if isinstance(value, (list, tuple)) else sorted(value)
    return None


def _rows(table: str) -> dict[str, str]:
    """Option name → its row, from a Markdown table whose first cell is `` `name` ``."""
    out = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if m:
            out[m.group(1)] = line
    return out


def table(names: Iterable[str], old: str) -> str:
    rows = _rows(old)
    return HEADER + "".join((rows.get(n) or f"| `{n}` | — | {TODO} |") + "\n" for n in names)


def render(text: str) -> tuple[str, list[str]]:
    """The document with every marked table regenerated, and the names of tables left as written."""
    kept: list[str] = []

    def sub(m: re.Match[str]) -> str:
        rows = declared_rows(m.group(2))
        if rows is not None:
            return m.group(1) + HEADER + "".join(f"| `{n}` | {d} | {h} |\n" for n, d, h in rows) + m.group(4)
        names = option_names(m.group(2))
        if names is None:
            kept.append(m.group(2))
            return m.group(0)
        return m.group(1) + table(names, m.group(3)) + m.group(4)

    return BLOCK.sub(sub, text), kept


def problems() -> list[str]:
    """Every drifted or unfinished table, one line each (empty when the docs match OPTIONS)."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        new, _ = render(text)
        rel = path.relative_to(ROOT)
        if new != text:
            out.append(f"{rel}: an option table differs from OPTIONS (run python scripts/option_docs.py)")
        out += [f"{rel}: option {n} has no description" for n in re.findall(rf"\| `([^`]+)` \| — \| {TODO} \|", new)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report drift instead of rewriting")
    args = ap.parse_args()
    if args.check:
        found = problems()
        print("\n".join(found) or "option tables match OPTIONS")
        sys.exit(1 if found else 0)
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        new, kept = render(text)
        for name in kept:
            print(f"{path.relative_to(ROOT)}: {name} declares no OPTIONS; its table is left as written")
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
