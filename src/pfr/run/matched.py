"""The matched-length control (docs/method.md §4.2, paper §4.2 and Figure 8): checking the pairs.

It measures prompts as a model sees them (its rendering and tokenizer), so it sits in the run layer,
above the models, not with the design that builds the requests.

``--task matched-length`` shows a shared T1/T2 membership table (regular categories T1, fallback
categories T2) and states the rule with *positive* wording (definition ``U``: "Choose Other if the
input's category is marked T2 …") or *negative* wording (``C``: "Choose Other unless the input's
category is marked T1 …"); ``--task matched-length-swapped`` swaps the group names, the second
comparison. A *pair* is the positive and the negative request of one text under one assignment:
they must have the same token count under the model's own tokenizer and the same category
mentions. :func:`check_pairs` measures every pair; the builder reports the unmatched ones and
scoring refuses them unless asked to keep them (:func:`enforce`).

Tokenizer: a backend's own — ``encode(prompt)`` (Transformers, vLLM) or ``tokenize(prompt)``
(llama.cpp) on the exact prompt it sends. A backend without one (a router, a ``python:`` model,
an HTTP endpoint) and ``pfr build`` count word and punctuation tokens (``\\w+|[^\\w\\s]``) of the
default prompt instead, and say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pfr.design.types import Request
from pfr.design.wording import MATCHED_GROUPS
from pfr.errors import DesignError
from pfr.models.lm.prompt import render

_WORDS = re.compile(r"\w+|[^\w\s]")
WORD_TOKENS = "word tokens"


@dataclass(frozen=True)
class PairCheck:
    """One positive/negative pair: token counts (positive, negative) and whether the category
    mentions agree."""

    dataset: str
    panel: str
    design: str
    text_id: str
    assignment: str
    tokens: tuple[int, int]
    same_mentions: bool
    tokenizer: str

    @property
    def matched(self) -> bool:
        return self.tokens[0] == self.tokens[1] and self.same_mentions

    def describe(self) -> str:
        why = []
        if self.tokens[0] != self.tokens[1]:
            why.append(f"{self.tokens[0]} vs {self.tokens[1]} {self.tokenizer}")
        if not self.same_mentions:
            why.append("different category mentions")
        return f"{self.dataset}/{self.panel} {self.design} text {self.text_id} ({self.assignment}): {'; '.join(why)}"


def is_matched(request: Request) -> bool:
    return request.factors.get("task") in MATCHED_GROUPS


def _text(request: Request, backend: Any | None) -> str:
    prompt = backend.prompt(request) if backend is not None else None
    if prompt is None:
        prompt = render(request)
    return str(prompt)


def counter(backend: Any | None) -> tuple[str, Callable[[str], int]]:
    """The tokenizer a pair is measured with: the backend's own where it has one."""
    if backend is not None and callable(getattr(backend, "encode", None)):
        return "tokens", lambda text: len(backend.encode(text))
    if backend is not None and callable(getattr(backend, "tokenize", None)):
        return "tokens", lambda text: len(backend.tokenize(text))
    return WORD_TOKENS, lambda text: len(_WORDS.findall(text))


def mentions(text: str, ids: Sequence[str]) -> tuple[int, ...]:
    """How often each category id occurs in ``text`` (as a whole token, not inside another id)."""
    return tuple(len(re.findall(rf"(?<![\w:]){re.escape(cid)}(?![\w:])", text)) for cid in ids)


def check_pairs(requests: Sequence[Request], backend: Any | None = None) -> list[PairCheck]:
    """Every positive/negative pair of the matched-length requests among ``requests``."""
    name, count = counter(backend)
    cells: dict[tuple[str, str, str, str, str], dict[str, Request]] = {}
    for r in requests:
        if is_matched(r):
            cells.setdefault((r.dataset, r.panel, r.design, r.text_id, r.assignment), {})[r.definition] = r
    out = []
    for (dataset, panel, design, text_id, assignment), pair in cells.items():
        if set(pair) != {"U", "C"}:
            continue  # half a pair cannot be checked (e.g. a request file cut short)
        pos, neg = _text(pair["U"], backend), _text(pair["C"], backend)
        ids = [c.id for c in pair["U"].inventory]
        same = mentions(pos, ids) == mentions(neg, ids)
        out.append(PairCheck(dataset, panel, design, text_id, assignment, (count(pos), count(neg)), same, name))
    return out


def enforce(requests: Sequence[Request], backend: Any | None, keep_unmatched: bool = False) -> list[PairCheck]:
    """Refuse to score matched-length requests whose pairs do not match (unless ``keep_unmatched``).

    Returns the unmatched pairs (empty when every pair matches or there are none)."""
    if not any(is_matched(r) for r in requests):
        return []
    bad = [c for c in check_pairs(requests, backend) if not c.matched]
    if bad and not keep_unmatched:
        shown = "; ".join(c.describe() for c in bad[:3])
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise DesignError(
            f"{len(bad)} matched-length pair(s) do not match under the model's tokenizer: {shown}{more}; "
            "score them anyway with --keep-unmatched"
        )
    return bad


def build_notes(requests: Sequence[Request]) -> list[str]:
    """What ``pfr build`` says about matched-length pairs: each unmatched pair, then a summary."""
    pairs = check_pairs(requests)
    bad = [c for c in pairs if not c.matched]
    how = pairs[0].tokenizer if pairs else "none"
    return [f"unmatched pair: {c.describe()}" for c in bad] + [
        f"matched-length: {len(pairs)} pairs checked ({how}), {len(bad)} unmatched; "
        "`pfr run` checks them again under the model's tokenizer"
    ]
