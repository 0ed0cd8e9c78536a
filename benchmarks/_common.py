"""What the vLLM benchmark scripts share: the load average, offline defaults, and how two runs agree.

Imported by scripts run as ``python benchmarks/NAME.py`` (their folder is first on ``sys.path``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_average() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def offline_defaults() -> None:
    """No hub at run time; the data beside the checkout unless PFR_DATA_DIR says otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data"))


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Decisions two runs share and the largest |Δ| of their letter log-probs (``choices``, ``logits``)."""
    same = sum(x == y for x, y in zip(a["choices"], b["choices"]))
    diff = max(abs(x - y) for la, lb in zip(a["logits"], b["logits"]) for x, y in zip(la, lb))
    return {"same_decisions": same, "n": len(a["choices"]), "max_abs_diff": diff}
