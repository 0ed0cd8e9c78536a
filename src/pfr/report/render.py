"""Render the metrics of one or more stores in a chosen format."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pfr import api
from pfr.errors import PfrError

_COLS = ["A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "J_U", "J_C", "DR_R", "DR_F", "P4"]


def render_report(stores: Sequence[str], fmt: str = "text", draws: int = 10_000, seed: int = 0) -> str:
    rows = api.metrics(*stores)
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "text":
        head = f"{'model':<28} {'dataset':<10} {'design':<10} {'n':>4} " + " ".join(f"{c:>6}" for c in _COLS)
        lines = [head]
        for r in rows:
            vals = " ".join(f"{100 * r[c]:6.1f}" for c in _COLS)
            lines.append(f"{r['model'][:28]:<28} {r['dataset']:<10} {r['design'][:10]:<10} {r['n']:>4} {vals}")
        return "\n".join(lines)
    raise PfrError(f"unknown report format {fmt!r}")
