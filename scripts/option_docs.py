"""Keep the option tables of docs/backends*.md and docs/deployed.md in step with each backend's declaration.

A table sits between ``<!-- options:NAME -->`` and ``<!-- /options:NAME -->``; it is written whole from
the declaration of the backend ``NAME`` (:class:`pfr.models.declaration.Declaration`): each option's
name, default and help, in declaration order, the decide options last. A table whose name no backend
declares is left as written (and named).

    python scripts/option_docs.py            # rewrite the tables in place
    python scripts/option_docs.py --check    # exit 1 and name every table that drifted (tests/test_docs.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("backends*.md")), ROOT / "docs" / "deployed.md"]
HEADER = "| option | default | meaning |\n| --- | --- | --- |\n"
BLOCK = re.compile(r"(<!-- options:([\w.-]+) -->\n)(.*?)(<!-- /options:\2 -->)", re.S)


def declared_rows(name: str) -> list[tuple[str, str, str]] | None:
    """``(option, default, meaning)`` rows from the backend's declaration, or None when it has none."""
    from pfr.models import registry

    decl = registry.declaration(name)
    return None if decl is None else decl.rows()


def render(text: str) -> tuple[str, list[str]]:
    """The document with every marked table regenerated, and the names of tables left as written."""
    kept: list[str] = []

    def sub(m: re.Match[str]) -> str:
        rows = declared_rows(m.group(2))
        if rows is None:
            kept.append(m.group(2))
            return m.group(0)
        return m.group(1) + HEADER + "".join(f"| `{n}` | {d} | {h} |\n" for n, d, h in rows) + m.group(4)

    return BLOCK.sub(sub, text), kept


def problems() -> list[str]:
    """Every drifted table or table of no backend, one line each (empty when the docs match the declarations)."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        new, kept = render(text)
        rel = path.relative_to(ROOT)
        if new != text:
            out.append(f"{rel}: an option table differs from its declaration (run python scripts/option_docs.py)")
        out += [f"{rel}: options:{name} is the table of no declared backend" for name in kept]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report drift instead of rewriting")
    args = ap.parse_args()
    if args.check:
        found = problems()
        print("\n".join(found) or "option tables match the declarations")
        sys.exit(1 if found else 0)
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        new, kept = render(text)
        for name in kept:
            print(f"{path.relative_to(ROOT)}: no backend declares {name}; its table is left as written")
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
