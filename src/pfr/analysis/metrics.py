"""PFR metrics (docs/method.md §6) from scored requests.

Every metric is a mean over texts of a per-text indicator, so the whole table of one setting is
``indicators.mean(axis=0)`` and a paired bootstrap is a weighted mean of the same matrix. A
*setting* is one model × dataset × panel × design; each text contributes its quad (RU, RC, FU, FC).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pfr.design.invalid import is_invalid, picks, same
from pfr.run.store import StoredResult

SETTING = ["model", "dataset", "panel", "design"]
QUAD = ("RU", "RC", "FU", "FC")

#: per-text indicator columns, in a fixed order
INDICATORS = [
    "RU_ok", "RC_ok", "FU_ok", "FC_ok",
    "RU_fb", "RC_fb", "FU_fb", "FC_fb",
    "J_U", "J_C", "DR_R", "DR_F", "P4",
    "R_c2w", "R_w2c", "R_w2w", "F_c2w", "F_w2c", "F_w2w",
    "RU_inv", "RC_inv", "FU_inv", "FC_inv", "INV", "R_inv", "F_inv",
]  # fmt: skip
#: the U→C decision changes of one assignment (``R_c2w`` …): ``inv`` is a change that involves an
#: invalid answer, so the four sum to DR × n (docs/method.md §6.1)
DECOMPOSITION = ("c2w", "w2c", "w2w", "inv")

#: reported metric → indicator column it is the mean of
METRIC_COLUMNS = {
    "A+_U": "RU_ok", "A+_C": "RC_ok",
    "A-_U": "FU_fb", "A-_C": "FC_fb",
    "F+_U": "RU_fb", "F+_C": "RC_fb",
    "J_U": "J_U", "J_C": "J_C",
    "DR_R": "DR_R", "DR_F": "DR_F", "P4": "P4",
    "INV": "INV", "INV_RU": "RU_inv", "INV_RC": "RC_inv", "INV_FU": "FU_inv", "INV_FC": "FC_inv",
}  # fmt: skip
DERIVED = ("B_U", "B_C")
DELTA_OF = ("A+", "A-", "F+", "J", "B")
#: the invalid rate: over a text's four requests, and per request kind
INVALID_METRICS = ("INV", *(f"INV_{c}" for c in QUAD))
METRICS = (*(m for m in METRIC_COLUMNS if m not in INVALID_METRICS), *DERIVED, *INVALID_METRICS)


def model_name(identity: dict[str, Any]) -> str:
    """A short readable name for a model identity (the full identity stays in the store)."""
    if identity.get("backend") == "python" and identity.get("function"):  # python:FILE:FUNCTION, as it was run
        return f"python:{Path(str(identity.get('target', ''))).name}:{identity['function']}"
    for key in ("name", "preset", "model", "path", "kind", "target"):
        if identity.get(key):
            value = str(identity[key])
            return f"baseline:{value}" if identity.get("backend") == "baseline" else value
    return json.dumps(identity, sort_keys=True)


_IDENTITY_KEYS: dict[int, tuple[dict[str, Any], str]] = {}


def identity_key(identity: dict[str, Any]) -> str:
    """The canonical JSON of a model identity. A store hands every result of one model the same
    identity object, so the key is computed once per object, not once per result (10^5 dumps)."""
    hit = _IDENTITY_KEYS.get(id(identity))
    if hit is not None and hit[0] is identity:
        return hit[1]
    key = json.dumps(identity, sort_keys=True)
    if len(_IDENTITY_KEYS) > 4096:
        _IDENTITY_KEYS.clear()
    _IDENTITY_KEYS[id(identity)] = (identity, key)  # holding the object keeps its id from being reused
    return key


def model_labels(results: Iterable[StoredResult]) -> dict[str, str]:
    """A unique readable label per model identity (keyed by :func:`identity_key`).

    Two identities with the same short name (the same GGUF through llama.cpp and transformers,
    chat template on and off) must never merge into one setting: their labels add the backend,
    then a short hash of the identity.
    """
    idents = {identity_key(r.model): r.model for r in results}
    by_name: dict[str, list[str]] = {}
    for key, ident in idents.items():
        by_name.setdefault(model_name(ident), []).append(key)
    labels: dict[str, str] = {}
    for name, keys in by_name.items():
        if len(keys) == 1:
            labels[keys[0]] = name
            continue
        backends = [str(idents[k].get("backend", "?")) for k in keys]
        for key, backend in zip(keys, backends):
            label = f"{name} [{backend}]"
            if backends.count(backend) > 1:
                label = f"{name} [{backend} {hashlib.sha256(key.encode()).hexdigest()[:6]}]"
            labels[key] = label
    return labels


def results_frame(results: Iterable[StoredResult], models: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per scored request with what the metrics need (built column by column: a report
    reads 10^5 results, and a list of row dicts costs pandas several times more). ``models``: each
    result's model label, when the caller already has them (else from :func:`model_labels`)."""
    results = list(results)
    if models is None:
        labels = model_labels(results)
        models = [labels[identity_key(r.model)] for r in results]
    qs = [r.request for r in results]
    return pd.DataFrame(
        {
            "model": list(models),
            "dataset": [q.dataset for q in qs],
            "panel": [q.panel for q in qs],
            "design": [q.design for q in qs],
            "text_id": [q.text_id for q in qs],
            "index": [q.index for q in qs],
            "cell": [q.assignment + q.definition for q in qs],
            "choice": [r.choice for r in results],
            "expected": [q.expected for q in qs],
            "fallback_index": [q.fallback_index for q in qs],
            "censored": [any(r.censored) for r in results],
        }
    )


def _empty(incomplete: int) -> pd.DataFrame:
    out = pd.DataFrame(columns=INDICATORS)
    out.attrs["incomplete"] = incomplete
    return out


def quad_indicators(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-text indicators (columns :data:`INDICATORS`), indexed by setting + text_id.

    Texts whose quad is incomplete are dropped (a run still in progress); they are counted in
    the ``incomplete`` attribute of the result.
    """
    if frame.empty:
        return _empty(0)
    keys = [*SETTING, "text_id"]
    wide = frame.pivot_table(
        index=[*keys, "index"], columns="cell", values=["choice", "expected", "fallback_index"], aggfunc="first"
    )
    choices = pd.DataFrame(wide["choice"]).reindex(columns=list(QUAD))
    complete = choices.notna().all(axis=1)
    incomplete = int((~complete).sum())
    if not complete.any():
        return _empty(incomplete)
    wide = wide[complete]
    ch = {c: wide["choice"][c].to_numpy(dtype=np.int64) for c in QUAD}
    ex = {c: wide["expected"][c].to_numpy(dtype=np.int64) for c in QUAD}
    fb = {c: wide["fallback_index"][c].to_numpy(dtype=np.int64) for c in QUAD}
    # docs/method.md §6.1: an invalid answer is never correct, never a fallback pick, never the same decision
    ok = {c: picks(ch[c], ex[c]) for c in QUAD}
    isfb = {c: picks(ch[c], fb[c]) for c in QUAD}
    inv = {c: is_invalid(ch[c]) for c in QUAD}
    data: dict[str, np.ndarray] = {
        **{f"{c}_ok": ok[c] for c in QUAD},
        **{f"{c}_fb": isfb[c] for c in QUAD},
        **{f"{c}_inv": inv[c] for c in QUAD},
        "INV": np.mean([inv[c] for c in QUAD], axis=0),
        "J_U": ok["RU"] & ok["FU"],
        "J_C": ok["RC"] & ok["FC"],
        "P4": ok["RU"] & ok["RC"] & ok["FU"] & ok["FC"],
    }
    for a in ("R", "F"):
        u, c = f"{a}U", f"{a}C"
        # U and C offer identical options, so equal indices mean equal decisions.
        changed = ~same(ch[u], ch[c])
        involved = inv[u] | inv[c]
        data[f"DR_{a}"] = changed
        data[f"{a}_c2w"] = changed & ~involved & ok[u] & ~ok[c]
        data[f"{a}_w2c"] = changed & ~involved & ~ok[u] & ok[c]
        data[f"{a}_w2w"] = changed & ~involved & ~ok[u] & ~ok[c]
        data[f"{a}_inv"] = changed & involved
    out = pd.DataFrame({k: data[k].astype(np.float64) for k in INDICATORS}, index=wide.index)
    out = out.sort_index(level="index").droplevel("index")
    out = out.sort_index(level=SETTING, sort_remaining=False)
    out.attrs["incomplete"] = incomplete
    return out


def metrics_from_means(means: dict[str, float] | pd.Series) -> dict[str, float]:
    """Reported metrics from indicator means (works on bootstrap columns too)."""
    m = {name: float(means[col]) for name, col in METRIC_COLUMNS.items()}
    m["B_U"] = (m["A+_U"] + m["A-_U"]) / 2
    m["B_C"] = (m["A+_C"] + m["A-_C"]) / 2
    return m


def deltas(m: dict[str, float]) -> dict[str, float]:
    """``Δ = C − U`` of each per-definition metric, as fractions (×100 for pp)."""
    return {k: m[f"{k}_C"] - m[f"{k}_U"] for k in DELTA_OF}


def setting_metrics(indicators: pd.DataFrame) -> list[dict[str, Any]]:
    """Point estimates per setting: metrics, Δs, decomposition counts and ``n``."""
    out: list[dict[str, Any]] = []
    if indicators.empty:
        return out
    for key, block in indicators.groupby(level=SETTING, sort=False):
        means = block.mean(axis=0)
        m = metrics_from_means(means)
        counts = block.sum(axis=0)
        out.append(
            {
                **dict(zip(SETTING, key)),
                "n": len(block),
                **m,
                "delta": deltas(m),
                "decomposition": {a: {k: int(counts[f"{a}_{k}"]) for k in DECOMPOSITION} for a in ("R", "F")},
            }
        )
    return out
