"""The fixed-score selection-rule analyses of ``pfr thresholds``: read from two stores, rendered."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from pfr.analysis.thresholds import threshold_summary
from pfr.errors import PfrError
from pfr.options import ALPHA
from pfr.report.model import json_safe
from pfr.run.store import Store


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}"


def threshold_rows(
    dev: str | os.PathLike[str], test: str | os.PathLike[str], *, alpha: float = ALPHA, draws: int = 2000, seed: int = 0
) -> list[dict[str, Any]]:
    """The selection-rule analyses of every model × dataset × design scored in both stores: fitted
    on the development panel, tested on the other panels (one store may be given as both)."""
    with Store(dev, create=False) as d:
        dev_results = list(d.results())
    if os.path.realpath(dev) == os.path.realpath(test):
        test_results = dev_results
    else:
        with Store(test, create=False) as t:
            test_results = list(t.results())
    return threshold_summary(dev_results, test_results, alpha=alpha, draws=draws, seed=seed)


def render_thresholds(rows: Sequence[dict[str, Any]], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(json_safe(list(rows)), indent=2, default=float, allow_nan=False)
    if fmt != "text":
        raise PfrError(f"unknown format {fmt!r} for thresholds (use text or json)")
    lines = []
    for r in rows:
        if "skipped" in r:
            continue
        nat, dev, cal = r["native"], r["dev_threshold"], r["calibration"]
        lines += [
            f"{r['model']} · {r['dataset']} · {r['design']}  (test: {r['panel']} panel, n={r['n']}; "
            f"development: {r['dev_panel']} panel, n={r['n_dev']})",
            "                       A+_U  A+_C  A-_U  A-_C  F+_U  F+_C   B_U   B_C    P4",
            "  native (τ = 0)      " + " ".join(_pct(nat[k]) for k in _KEYS),
            f"  development τ={r['tau_dev']:+.3f} " + " ".join(_pct(dev[k]) for k in _KEYS),
            f"  four-request correct: individual oracle {r['oracle_individual']}, shared oracle "
            f"{r['oracle_shared']} (τ={r['oracle_shared_tau']:+.3f}), "
            f"development τ {r['dev_threshold_p4']} of {r['n']}",
            f"  one-sided calibration α={cal['alpha']:.2f}: τ_U={cal['tau_U']:+.3f}, τ_C={cal['tau_C']:+.3f}, "
            f"τ=max={cal['tau']:+.3f}; test F+_U={100 * cal['F+_U']:.1f}%, F+_C={100 * cal['F+_C']:.1f}% "
            f"(budget {100 * cal['alpha']:.0f}%)",
            f"  refits of τ: median change of mean B {100 * r['refit']['median_change_B']:+.1f} pp, "
            f"{100 * r['refit']['share_improving']:.0f}% of refits improve it",
            *(f"  note: {n}" for n in r["notes"]),
            "",
        ]
    lines += [f"note: {r['model']} · {r['dataset']} · {r['panel']} · {r['design']}: {r['skipped']}" for r in rows
              if "skipped" in r]  # fmt: skip
    return "\n".join(lines).rstrip("\n")


_KEYS = ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "B_U", "B_C", "P4")
