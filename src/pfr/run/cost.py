"""The cost of a run before it starts: requests, prompt tokens, the tokens that must be computed, time.

A language-model backend's time is set by the tokens it must run through the model, not by the
requests: the prompts of a run share long prefixes (the instruction and inventory for all requests,
the input within a quad), and the hf backend runs each shared prefix once (a token trie), while
llama.cpp keeps the previous prompt's cache and runs only what differs from it. So a cost counts

* ``prompt_tokens``: every prompt token of every request still to score;
* ``distinct_tokens``: the nodes of the token trie of those prompts, the least any backend must
  compute (each distinct prefix once);
* ``sequential_tokens``: the tokens not shared with the previous prompt in scoring order, what a
  backend that reuses only its last prompt's cache computes;
* ``decode_steps``: for a backend that decides from text it writes (``decide=generate|choice``), the
  new tokens it may write, ``max_tokens`` per request (an upper bound: an answer ends at its first
  line). Each step is a forward pass for one token, weighed as :data:`DECODE_STEP_TOKENS` prompt
  tokens of work.

The expected time is an *estimate*: it scores a few requests (or one prompt of a language model),
measures tokens per second on this machine now, and scales by the distinct tokens (plus the weighed
decode steps). Nothing is
stored; an existing store is opened read-only to leave out what it already holds. A backend that
calls out (a service, a server, a user's function: ``calls_out``) is never scored: what only it
could tell (its time, its tokens) is *unknown*.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.models.base import Backend
from pfr.models.lm.core import common_prefix
from pfr.run.store import Store, request_key

#: requests timed for a backend that has no tokenizer (baselines, routers, ``python:`` functions)
SAMPLE_REQUESTS = 16
#: one decode step in prompt tokens of work: a forward pass for one token reads every weight once, as a
#: prefill pass does for many tokens; on CPUs a step takes about as long as a few prompt tokens do
#: (hf SmolLM2-135M float32, batched greedy decoding, 32 TREC requests: 4.0 s more than letter scoring
#: for at most 256 steps in benchmarks/results/generate_cost-smollm2-135m.json, against 2.2 ms per
#: computed prompt token in throughput-smollm2_135m-trec.json: at least 7). The dry run measures its
#: rate on a sample with the same weighting.
DECODE_STEP_TOKENS = 8


def decode_steps(backend: Any) -> int:
    """New tokens a backend may write per request: ``max_tokens`` when it decides from generated text
    (``decide=generate|choice``), else 0."""
    decoding = getattr(backend, "decoding", None)
    return int(getattr(decoding, "max_tokens", 0) or 0) if decoding is not None else 0


@dataclass(frozen=True)
class TokenCounts:
    """Requests and their tokens (``None`` where the backend has no tokenizer)."""

    requests: int
    prompt_tokens: int | None = None
    distinct_tokens: int | None = None
    sequential_tokens: int | None = None
    decode_steps: int = 0

    @property
    def work(self) -> int | None:
        """Prompt tokens to compute plus the weighed decode steps (``None`` without a tokenizer)."""
        if self.distinct_tokens is None:
            return None
        return self.distinct_tokens + DECODE_STEP_TOKENS * self.decode_steps


@dataclass(frozen=True)
class Rate:
    """What was measured: ``units`` (tokens, or requests without a tokenizer) in ``seconds``."""

    units: float
    seconds: float
    per: str  # "token" or "request"

    @property
    def per_second(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else math.inf


@dataclass(frozen=True)
class Cost:
    """The cost of one run (or the sum over a study's runs) for one model."""

    model: str
    counts: TokenCounts
    stored: int | None  # requests already in the store (not counted above); None: unknown
    rate: Rate | None
    load_seconds: float
    unknown: str = ""  # why the time is unknown (a backend a dry run must not call), else ""

    @property
    def expected_seconds(self) -> float | None:
        """Expected scoring time: distinct tokens (or requests) at the measured rate; an estimate."""
        if self.rate is None:
            return None
        work = self.counts.requests if self.rate.per == "request" else self.counts.work
        if work is None or work == 0:
            return 0.0
        return work / self.rate.per_second

    def to_dict(self) -> dict[str, Any]:
        rate = None
        if self.rate is not None:
            rate = {"units": self.rate.units, "seconds": self.rate.seconds, "per": self.rate.per}
        return {
            "model": self.model,
            "requests": self.counts.requests,
            "stored": self.stored,
            "prompt_tokens": self.counts.prompt_tokens,
            "distinct_tokens": self.counts.distinct_tokens,
            "sequential_tokens": self.counts.sequential_tokens,
            **({"decode_steps": self.counts.decode_steps} if self.counts.decode_steps else {}),
            "rate": rate,
            "load_seconds": self.load_seconds,
            "expected_seconds": self.expected_seconds,
            **({"unknown": self.unknown} if self.unknown else {}),
        }


def tokenizer_of(backend: Any) -> Callable[[str], list[int]] | None:
    """The backend's whole-prompt tokenizer (hf and vLLM ``encode``, llama.cpp ``tokenize``), else None."""
    for name in ("encode", "tokenize"):
        fn = getattr(backend, name, None)
        if callable(fn):
            return fn
    return None


def distinct_tokens(ids: Sequence[Sequence[int]]) -> int:
    """Nodes of the token trie of ``ids``: the number of distinct non-empty prefixes.

    In lexicographic order each sequence shares its longest prefix with another one with its
    predecessor, so the count is a sum over the sorted list (no trie is built)."""
    total, prev = 0, None
    for s in sorted(tuple(x) for x in ids):
        total += len(s) - (common_prefix(s, prev) if prev is not None else 0)
        prev = s
    return total


def new_tokens(ids: Sequence[Sequence[int]]) -> list[int]:
    """Per sequence, in the given order, the tokens not shared with the sequence before it (at least 1)."""
    out, prev = [], None
    for s in ids:
        shared = common_prefix(s, prev) if prev is not None else 0
        out.append(max(len(s) - shared, 1))
        prev = s
    return out


def pending(backend: Backend, requests: Sequence[Request], store: str | os.PathLike[str] | None) -> tuple[
    list[tuple[Request, str | None]], int | None
]:  # fmt: skip
    """The requests (with prompts) a run would score, deduplicated as the runner does, and how many
    the store already holds (None when the backend cannot know its identity without its server).
    The store is only read: a missing one is not created."""
    from pfr.run.store import model_key

    keyed: dict[str, tuple[Request, str | None]] = {}
    for r in requests:
        prompt = backend.prompt(r)
        keyed.setdefault(request_key(r, prompt), (r, prompt))
    done: set[str] = set()
    if not getattr(backend, "identity_known", True):
        return list(keyed.values()), None
    if store is not None and (Path(store) / "results.sqlite").is_file():
        with Store(store, create=False) as st:
            done = st.done(model_key(backend.identity), keyed)
    return [v for k, v in keyed.items() if k not in done], len(done)


def count_tokens(backend: Any, todo: Sequence[tuple[Request, str | None]]) -> tuple[TokenCounts, list[list[int]]]:
    """Token counts of the pending prompts (and their ids) under the backend's own tokenizer."""
    encode = tokenizer_of(backend)
    steps = decode_steps(backend) * len(todo)
    if encode is None or any(p is None for _, p in todo):
        return TokenCounts(len(todo), decode_steps=steps), []
    ids = [list(encode(p)) for _, p in todo if p is not None]
    return TokenCounts(len(todo), sum(map(len, ids)), distinct_tokens(ids), sum(new_tokens(ids)), steps), ids


def measure_rate(backend: Any, todo: Sequence[tuple[Request, str | None]], ids: Sequence[Sequence[int]]) -> Rate:
    """Score a little of the pending work and time it (nothing is stored).

    A tokenizing backend scores the first pending request once untimed (lazy set-up, first-call
    kernels) and then a quad's worth of requests timed, from a cold prefix cache: tokens per
    second over their distinct tokens, plus their weighed decode steps when the backend generates
    (:data:`DECODE_STEP_TOKENS`). Other backends: requests per second over a few requests."""
    reqs = [r for r, _ in todo]
    if not ids:
        sample = reqs[:SAMPLE_REQUESTS]
        backend.score(sample[:1])
        t0 = time.perf_counter()
        backend.score(sample)
        return Rate(len(sample), time.perf_counter() - t0, "request")
    backend.score(reqs[:1])
    n = min(len(reqs), 4)
    clear = getattr(backend, "clear_prefixes", None) or getattr(getattr(backend, "lm", None), "clear_prefixes", None)
    if callable(clear):
        clear()
    t0 = time.perf_counter()
    backend.score(reqs[:n])
    seconds = time.perf_counter() - t0
    # llama.cpp keeps its last prompt's cache: the first timed prompt then shares a prefix with the
    # warm-up one, so the work timed is what each prompt adds to the one before it.
    work = distinct_tokens(ids[:n]) if callable(clear) else sum(new_tokens([ids[0], *ids[:n]])[1:])
    return Rate(work + DECODE_STEP_TOKENS * decode_steps(backend) * n, seconds, "token")


def estimate(
    backend: Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | None = None,
    *,
    model: str = "",
    load_seconds: float = 0.0,
    measure: bool = True,
) -> Cost:
    """The cost of scoring ``requests`` with ``backend`` into ``store`` (only what it lacks)."""
    todo, stored = pending(backend, requests, store)
    counts, ids = count_tokens(backend, todo)
    calls_out = bool(getattr(backend, "calls_out", False))  # a service, a server, a user's function
    rate = measure_rate(backend, todo, ids) if measure and todo and not calls_out else None
    name = model or str(backend.identity.get("name") or backend.identity.get("backend") or "model")
    unknown = "a dry run calls no service, server or user function, so their time is not measured" if calls_out else ""
    return Cost(name, counts, stored, rate, load_seconds, unknown)


def combine(costs: Sequence[Cost]) -> Cost:
    """One model's costs over several request sets (a study): counts add, the first rate stands."""

    def add(get: Callable[[TokenCounts], int | None]) -> int | None:
        vals = [get(c.counts) for c in costs]
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)

    counts = TokenCounts(
        sum(c.counts.requests for c in costs),
        add(lambda c: c.prompt_tokens),
        add(lambda c: c.distinct_tokens),
        add(lambda c: c.sequential_tokens),
        sum(c.counts.decode_steps for c in costs),
    )
    rate = next((c.rate for c in costs if c.rate is not None), None)
    stored = [c.stored for c in costs]
    total = None if any(s is None for s in stored) else sum(s for s in stored if s is not None)
    return Cost(costs[0].model, counts, total, rate, costs[0].load_seconds, costs[0].unknown)


def duration(seconds: float, *, short: bool = False) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 05 min``; ``short`` (a progress line's ETA): ``42s``, ``3m 20s``, ``2h 05m``;
    ``unknown`` when not finite."""
    if not math.isfinite(seconds):
        return "unknown"
    s = max(0, round(seconds))
    hours, minutes, secs = ("h", "m", "s") if short else (" h", " min", " s")
    if s < 60:
        return f"{s}{secs}"
    if s < 3600:
        return f"{s // 60}{minutes} {s % 60:02d}{secs}"
    return f"{s // 3600}{hours} {s % 3600 // 60:02d}{minutes}"


def describe(cost: Cost, label: str = "", *, explain: bool = True) -> list[str]:
    """The lines ``--dry-run`` prints for one cost (``explain``: say how the time was estimated)."""
    c = cost.counts
    head = f"{label}: " if label else ""
    held = (" (how many the store already holds is unknown: the identity needs the server)" if cost.stored is None
            else f" ({cost.stored:,} already in the store)" if cost.stored else "")  # fmt: skip
    lines = [f"{head}{c.requests:,} requests to score with {cost.model}{held}"]
    if c.prompt_tokens is not None and c.distinct_tokens is not None and c.sequential_tokens is not None:
        share = c.distinct_tokens / c.prompt_tokens if c.prompt_tokens else 0.0
        lines.append(f"  prompt tokens {c.prompt_tokens:,}; distinct (must be computed, each shared prefix once) "
                     f"{c.distinct_tokens:,} ({share:.1%}); not shared with the previous prompt "
                     f"{c.sequential_tokens:,}")  # fmt: skip
    if c.decode_steps:
        lines.append(
            f"  new tokens to generate at most {c.decode_steps:,} ({c.decode_steps // max(c.requests, 1)} "
            f"per request, max_tokens), each decode step weighed as {DECODE_STEP_TOKENS} prompt tokens"
        )
    if cost.rate is not None and cost.expected_seconds is not None and not explain:
        lines.append(f"  expected time about {duration(cost.expected_seconds)}")
    elif cost.rate is not None and cost.expected_seconds is not None:
        r = cost.rate
        unit = "tokens" if r.per == "token" else "requests"
        lines.append(f"  expected time about {duration(cost.expected_seconds)} (an estimate: {r.units:,.0f} {unit} "
                     f"scored in {r.seconds:.2f} s here just now, {r.per_second:,.1f} {unit}/s, scaled by the "
                     f"{_scaled_by(r.per, c.decode_steps)}; model load {cost.load_seconds:.1f} s "
                     "not included)")  # fmt: skip
    elif c.requests == 0:
        lines.append("  nothing to score")
    elif cost.unknown:
        lines.append(f"  expected time unknown ({cost.unknown}; nothing was sent)")
    return lines


def describe_study(costs: Sequence[tuple[str, Cost]]) -> list[str]:
    """The lines ``pfr study --dry-run`` prints: each request set briefly, each model's total in full."""
    lines: list[str] = []
    for label, cost in costs:
        lines += describe(cost, label, explain=label.endswith(" total"))
    return lines


def _scaled_by(per: str, steps: int) -> str:
    if per != "token":
        return "requests"
    return "distinct tokens and weighed decode steps" if steps else "distinct tokens"
