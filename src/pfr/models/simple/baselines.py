"""Reference models that need no weights: they anchor the metrics at known values.

``oracle`` always picks the expected option; ``always-fallback`` always picks the fallback;
``never-fallback`` is an oracle that never uses the fallback (gold under R, the first regular
option under F); ``random`` draws seeded uniform scores keyed on the request.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.declaration import Declaration, Option
from pfr.options import SEED, TEMPERATURE

_HIGH, _LOW = 0.0, -20.0


class Baseline:
    """One of the weight-free reference models."""

    KINDS = ("oracle", "always-fallback", "never-fallback", "random")
    #: requests per ``score`` call the runner sends
    batch_size = 16

    def __init__(self, kind: str, seed: int = 0, temperature: float = 1.0) -> None:
        if kind not in self.KINDS:
            raise ModelError(f"unknown baseline {kind!r} (use {', '.join('baseline:' + k for k in self.KINDS)})")
        self.kind = kind
        self.seed = seed
        self.temperature = temperature

    @property
    def identity(self) -> dict[str, Any]:
        # temperature changes the stored normalised scores, so it is part of the identity
        ident: dict[str, Any] = {"backend": "baseline", "kind": self.kind, "temperature": self.temperature}
        if self.kind == "random":
            ident["seed"] = self.seed
        return ident

    def prompt(self, request: Request) -> str | None:
        return None

    def close(self) -> None:
        """Nothing to free."""

    def _pick(self, r: Request) -> int:
        if self.kind == "oracle":
            return r.expected
        if self.kind == "always-fallback":
            return r.fallback_index
        if r.assignment == "R":
            return r.expected
        return next(i for i, o in enumerate(r.options) if not o.is_fallback)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        out = []
        for r in requests:
            if self.kind == "random":
                digest = hashlib.sha256(f"{self.seed}|{r.request_id}".encode()).digest()
                rng = random.Random(int.from_bytes(digest[:8], "big"))
                out.append(Scores(tuple(rng.gauss(0.0, 1.0) for _ in r.options)))
                continue
            pick = self._pick(r)
            out.append(Scores(tuple(_HIGH if i == pick else _LOW for i in range(len(r.options)))))
        return out


def _from_spec(rest: str, opts: Mapping[str, Any]) -> Baseline:
    return Baseline(rest, seed=opts["seed"], temperature=opts["temperature"])


#: ``baseline:KIND`` (the spec forms and options in docs/backends.md)
BACKEND = Declaration(
    "baseline",
    _from_spec,
    options=(
        Option("seed", 0, "seed of `baseline:random`'s scores", SEED),
        Option("temperature", 1.0, "score temperature T", TEMPERATURE),
    ),
)
