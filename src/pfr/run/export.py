"""``pfr export``: one JSON line per scored request, with the exact prompt, scores and timing."""

from __future__ import annotations

import json
import os

from pfr.run.store import Store


def export_lines(store: str | os.PathLike[str]) -> list[str]:
    """Each stored result as one JSON object: request fields (without the inventory), prompt, scores,
    logits, censored flags, choice, model identity, seconds and backend metadata."""
    with Store(store, create=False) as st:
        rows = []
        for r in st.results():
            row = r.request.to_dict()
            row.pop("inventory")
            row.update(
                prompt=r.prompt,
                scores=list(r.logprobs),
                logits=list(r.logits),
                censored=list(r.censored),
                choice=r.choice,
                model=r.model,
                seconds=r.seconds,
                meta=r.meta,
            )
            rows.append(json.dumps(row, ensure_ascii=False))
    return rows
