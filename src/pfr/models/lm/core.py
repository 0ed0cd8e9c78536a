"""The letter-scoring core the in-process LM backends share (hf, vLLM, llama.cpp).

A request becomes a prompt (the template's text, wrapped in the model's chat template when
``chat_template`` is on), the prompt becomes token ids (:meth:`LetterLM.encode`), the prompt plus one
answer token must fit the context, and each option symbol must be one token after the prompt
(:class:`~pfr.models.lm.letters.SymbolTokens`). :meth:`LetterLM.prepare` does all of that before anything
runs, so a bad request fails in one line before the engine spends time; a backend then only has to
turn prepared prompts into next-token log-probs and hand them to :mod:`pfr.models.lm.letters`, which
builds the :class:`~pfr.models.base.Scores`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.decide import Decoding
from pfr.models.lm.letters import SymbolTokens, check_context
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate, chat_wrap, render


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share: what a prefix cache can keep between them."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Prepared(NamedTuple):
    """A request ready to run: its prompt's token ids and the token id of each option symbol (picklable,
    so it can go to another process)."""

    tokens: list[int]
    symbols: list[int]


class LetterLM:
    """Base of the LM backends that score option letters as next-token log-probabilities.

    A subclass sets the attributes below (``kind`` names it in the identity, ``source`` names its
    weights, ``settings()`` adds the settings that change its scores), gives ``tokenizer`` (a Hugging
    Face tokenizer) or overrides :meth:`encode` and :meth:`wrap_chat`, and calls :meth:`init_symbols`.
    """

    kind = "lm"
    #: the context length checked by :meth:`prepare` (``None``: unchecked), with the hint and label
    #: that the one-line error gives
    context_limit: int | None = None
    context_hint = ""
    context_label = ""
    tokenizer: Any = None

    def __init__(
        self,
        *,
        name: str,
        source: dict[str, Any],
        params: int | None,
        chat_template: bool,
        temperature: float,
        batch_size: int,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ) -> None:
        self.name = name
        self.source = dict(source)
        self.params = params
        self.chat_template = chat_template
        self._temperature = temperature
        #: requests per ``score`` call the runner sends; a multiple of 4 keeps each quad in one call.
        self.batch_size = batch_size
        self.template = template
        self._symbols: SymbolTokens | None = None

    def init_symbols(
        self,
        tokenize: Callable[[str], Sequence[int]] | None = None,
        pieces: Callable[[list[int]], list[str]] | None = None,
        hint: str = "use fewer options or another answer cue",
    ) -> None:
        """Set up the symbol-token check; by default with ``tokenizer`` (no special tokens added)."""
        tok = self.tokenizer
        if tokenize is None:
            tokenize = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
            pieces = pieces or tok.convert_ids_to_tokens
        self._symbols = SymbolTokens(tokenize, self.name, pieces=pieces, hint=hint)

    # ------------------------------------------------------------------ Backend protocol
    def settings(self) -> dict[str, Any]:
        """Backend settings that change the scores, placed after ``params`` in the identity."""
        return {}

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "name": self.name,
            **self.source,
            "params": self.params,
            **self.settings(),
            "chat_template": "on" if self.chat_template else "off",
            "temperature": self._temperature,
            "template": self.template.to_dict(),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str:
        """The exact string that is tokenized (see :meth:`encode`): the rendered prompt, chat-wrapped if on."""
        text = render(request, self.template)
        return self.wrap_chat(text) if self.chat_template else text

    def wrap_chat(self, text: str) -> str:
        """``text`` as the user turn of the model's chat template, ending where the assistant answers."""
        return chat_wrap(self.tokenizer, text)

    def encode(self, prompt: str) -> list[int]:
        """Token ids of a whole prompt: the tokenizer's special tokens (BOS) for plain text; none
        added to chat-templated text, whose template writes its own."""
        return list(self.tokenizer(prompt, add_special_tokens=not self.chat_template)["input_ids"])

    def symbol_id(self, prompt: str, symbol: str, request_id: str = "?") -> int:
        """The one token that writes ``symbol`` right after ``prompt`` (:mod:`pfr.models.lm.letters`)."""
        assert self._symbols is not None, "init_symbols() not called"
        return self._symbols(prompt, symbol, request_id)

    def prepare(self, requests: Sequence[Request]) -> list[Prepared]:
        """Prompt token ids and symbol token ids per request, every check done before anything runs."""
        assert self._symbols is not None, "init_symbols() not called"
        out = []
        for r in requests:
            text = self.prompt(r)
            ids = self.encode(text)
            check_context(len(ids), self.context_limit, self.name, r.request_id, self.context_hint, self.context_label)
            out.append(Prepared(ids, self._symbols.ids(text, (o.symbol for o in r.options), r.request_id)))
        return out

    def complete(self, tokens: list[int], request: Request, decoding: Decoding) -> str:
        """The text the model writes after the prompt ``tokens`` (``decide=generate|choice``,
        :mod:`pfr.models.generating`); an engine that generates overrides it."""
        raise ModelError(f"{self.kind}: decide={decoding.mode} is not available")

    def close(self) -> None:
        """Free the model; nothing to do by default (engines override it)."""
