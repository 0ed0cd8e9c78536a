"""The package's shape: no import cycle between pfr modules, and no module too long to read.

import-linter's layers contract (pyproject.toml, run by ``make lint``) checks that imports only go
down the layers; it does not see a cycle between two modules of the same layer. This test does,
on grimp's graph of every import statement, including those inside functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

grimp = pytest.importorskip("grimp")  # ships with import-linter (the dev extra)

SRC = Path(__file__).resolve().parents[1] / "src" / "pfr"  # the line limit reads this checkout
MAX_LINES = 450
#: modules still over MAX_LINES while their split is under way; an entry fails once it is no longer needed
_OVER_LIMIT: set[str] = set()


def _cycles(graph: object) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    mods = sorted(graph.modules)  # type: ignore[attr-defined]
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in mods}  # type: ignore[attr-defined]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in mods:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            if i < len(adj[v]):
                work.append((v, i + 1))
                w = adj[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _graph() -> object:
    """Every import between pfr modules, of the pfr this test session imports."""
    return grimp.build_graph("pfr", cache_dir=None)


def test_cycle_finder_sees_a_cycle() -> None:
    class Toy:
        modules = ("a", "b", "c", "d")
        edges: ClassVar[dict[str, set[str]]] = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m: str) -> set[str]:
            return self.edges[m]

    assert _cycles(Toy()) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    graph = _graph()
    found = []
    for comp in _cycles(graph):
        members = set(comp)
        edges = [
            f"{a} -> {b}"
            for a in comp
            for b in sorted(graph.find_modules_directly_imported_by(a))  # type: ignore[attr-defined]
            if b in members
        ]
        found.append(", ".join(edges))
    assert not found, "import cycles between pfr modules:\n" + "\n".join(found)


def test_no_module_over_the_line_limit() -> None:
    lengths = {p.relative_to(SRC).as_posix(): len(p.read_text("utf-8").splitlines()) for p in SRC.rglob("*.py")}
    over = sorted(f"{m} ({n} lines)" for m, n in lengths.items() if n > MAX_LINES and m not in _OVER_LIMIT)
    assert not over, f"modules over {MAX_LINES} lines: {over}"
    stale = sorted(m for m in _OVER_LIMIT if lengths.get(m, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove {stale} from _OVER_LIMIT"
