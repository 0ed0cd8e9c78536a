"""Letter scoring shared by the LM backends (hf, vllm, llamacpp, openai): where option scores become
``Scores`` (docs/method.md §5).

An option's score is the model's next-token log-probability of the option's *symbol* after the
prompt, in the form the model would write it there:

* ``" A"`` (leading space) after a prompt that ends in a visible character (the plain prompt ends
  with ``Answer:``);
* ``"A"`` after one that ends in whitespace (a chat template's ``…assistant\\n``).

Each symbol must be exactly one token in that position: ``tokens(tail + form) == tokens(tail) +
[one token]`` on the prompt's last :data:`SYMBOL_CONTEXT` characters (:class:`SymbolTokens`), and
the prompt plus the answer token must fit the context (:func:`check_context`).

Where only the top-K log-probabilities of the next token are available (an HTTP server, or an
engine without exact per-token log-probs), :func:`topk_text_scores` (token *texts*) and
:func:`topk_id_scores` (token *ids*) map them to options with **censoring**: an option missing
from the top-K gets the K-th (lowest returned) log-prob, an upper bound of its own, and is flagged.

Every LM backend builds its :class:`~pfr.models.base.Scores` here: :func:`exact_scores` (a full
log-prob vector, or an id → log-prob map holding every symbol) or the two top-K readers, so the
meta fields (``option_mass`` for exact scores; ``returned`` and ``censored`` for top-K) mean the same
in every store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pfr.errors import ModelError
from pfr.models.base import Scores

#: characters of prompt end that decide how a symbol tokenizes after it (checked once per distinct end).
SYMBOL_CONTEXT = 200
#: space, tab, SentencePiece '▁', byte-level BPE 'Ġ': stripped from a returned token's text before matching.
SPACE_MARKS = " \t\u2581\u0120"
MERGES = ("max", "sum")


def answer_form(prompt: str, symbol: str) -> str:
    """The text that writes ``symbol`` right after ``prompt``: ``" A"`` after a visible character, else ``"A"``."""
    return symbol if not prompt or prompt[-1].isspace() else " " + symbol


class SymbolTokens:
    """The one token that writes each option symbol after a prompt, checked and cached per prompt end.

    ``tokenize(text)`` returns the token ids of ``text`` with no special tokens added; ``pieces(ids)``
    (optional) names tokens for the error message.
    """

    def __init__(
        self,
        tokenize: Callable[[str], Sequence[int]],
        name: str,
        pieces: Callable[[list[int]], list[str]] | None = None,
        hint: str = "use fewer options or another answer cue",
    ) -> None:
        self._tokenize = tokenize
        self.name = name
        self._pieces = pieces
        self.hint = hint
        self._ids: dict[tuple[str, str], int] = {}
        self._base: dict[str, list[int]] = {}  # tail → its tokens (one tokenizer call per prompt end, not per symbol)

    def __call__(self, prompt: str, symbol: str, request_id: str = "?") -> int:
        form = answer_form(prompt, symbol)
        tail = prompt[-SYMBOL_CONTEXT:]
        key = (tail, form)
        found = self._ids.get(key)
        if found is not None:
            return found
        if len(self._ids) > 100_000:
            self._ids.clear()
        if len(self._base) > 1000:
            self._base.clear()
        base = self._base.get(tail)
        if base is None:
            base = self._base[tail] = list(self._tokenize(tail))
        full = list(self._tokenize(tail + form))
        if len(full) != len(base) + 1 or full[: len(base)] != base:
            same = next((i for i, (a, b) in enumerate(zip(base, full)) if a != b), min(len(base), len(full)))
            extra = full[same:]
            shown = self._pieces(extra) if self._pieces is not None else extra
            raise ModelError(
                f"request {request_id}: option symbol {symbol!r} is not one token after the prompt in "
                f"{self.name}'s vocabulary ({form!r} → {shown}); {self.hint}"
            )
        self._ids[key] = int(full[-1])
        return self._ids[key]

    def ids(self, prompt: str, symbols: Iterable[str], request_id: str = "?") -> list[int]:
        return [self(prompt, s, request_id) for s in symbols]


def check_context(
    n_tokens: int, limit: int | None, name: str, request_id: str, hint: str = "", label: str = ""
) -> None:
    """Raise the one-line error when a prompt of ``n_tokens`` plus one answer token does not fit ``limit``
    (``label`` names the limit in the message, e.g. ``n_ctx=4096``; default the number)."""
    if limit is not None and n_tokens + 1 > limit:
        raise ModelError(
            f"request {request_id}: prompt is {n_tokens} tokens, over {name}'s context length {label or limit} "
            f"(prompt + 1 answer token must fit{'; ' + hint if hint else ''})"
        )


def exact(logits: Iterable[float], meta: Mapping[str, Any] | None = None, *, mass: bool | float = True) -> Scores:
    """Scores read exactly: nothing censored; ``meta["option_mass"]`` says how much probability the
    model put on the option symbols at all (``mass``: ``True`` sums it here, a float is the backend's own
    sum, e.g. on its device, ``False`` leaves it out)."""
    values = tuple(float(x) for x in logits)
    if mass is True:
        mass = option_mass(values)
    extra = {} if mass is False else {"option_mass": float(mass)}
    return Scores(values, (False,) * len(values), {**(meta or {}), **extra})


def censored(
    logits: Iterable[float], flags: Iterable[bool], returned: int, meta: Mapping[str, Any] | None = None
) -> Scores:
    """Scores from a top-K list: ``flags`` marks upper bounds; meta counts the entries ``returned`` and
    the options ``censored``."""
    values = tuple(float(x) for x in logits)
    marks = tuple(bool(f) for f in flags)
    return Scores(values, marks, {**(meta or {}), "returned": returned, "censored": sum(marks)})


def exact_scores(
    logprobs: Mapping[int, float] | Any,
    ids: Sequence[int],
    meta: Mapping[str, Any] | None = None,
    *,
    mass: bool | float = True,
) -> Scores:
    """The symbols' log-probs read from a full-vocabulary vector (or an id → log-prob mapping holding all ``ids``)."""
    return exact((float(logprobs[t]) for t in ids), meta, mass=mass)


def topk_id_scores(top: Mapping[int, float], ids: Sequence[int], meta: Mapping[str, Any] | None = None) -> Scores:
    """Option scores from a top-K id → log-prob map, with censoring (module docstring).

    Raises ``ValueError`` when the map holds no finite log-prob (no K-th value to censor at).
    """
    finite = {int(t): float(lp) for t, lp in top.items() if math.isfinite(float(lp))}
    if not finite:
        raise ValueError("empty top-k list")
    lowest = min(finite.values())
    return censored((finite.get(t, lowest) for t in ids), (t not in finite for t in ids), len(top), meta)


def topk_text_scores(
    top: Sequence[tuple[str, float]], symbols: Sequence[str], merge: str = "max", meta: Mapping[str, Any] | None = None
) -> Scores:
    """Option scores from a top-K list of (token text, log-prob), with censoring (module docstring).

    A token counts for option ``X`` when it is ``X`` after stripping leading :data:`SPACE_MARKS`, so
    ``" A"`` and ``"A"`` both count; ``merge`` combines several forms (``max``, or ``sum`` of their
    probabilities). Raises ``ValueError`` when the list is empty.
    """
    found: dict[str, list[float]] = {}
    lowest = math.inf
    wanted = set(symbols)
    for token, logprob in top:
        lp = float(logprob)
        if not math.isfinite(lp):
            continue
        lowest = min(lowest, lp)
        key = token.lstrip(SPACE_MARKS)
        if key in wanted:
            found.setdefault(key, []).append(lp)
    if not math.isfinite(lowest):
        raise ValueError("empty top-k list")
    logits: list[float] = []
    flags: list[bool] = []
    for s in symbols:
        lps = found.get(s)
        if not lps:
            logits.append(lowest)
            flags.append(True)
        elif merge == "sum":
            top_lp = max(lps)
            logits.append(top_lp + math.log(sum(math.exp(x - top_lp) for x in lps)))
            flags.append(False)
        else:
            logits.append(max(lps))
            flags.append(False)
    return censored(logits, flags, len(top), meta)


def option_mass(logits: Sequence[float]) -> float:
    """The probability the model puts on the option symbols at all (exact scores only)."""
    return float(sum(math.exp(x) for x in logits))
