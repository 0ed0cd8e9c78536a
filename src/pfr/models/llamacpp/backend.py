"""llama.cpp in process: ``llamacpp:PATH.gguf`` or ``llamacpp:preset:NAME`` (every preset of pfr.models.lm.gguf_cache).

A request's score for an option is the model's next-token log-probability of the option's symbol
after the rendered prompt (full-vocabulary log-softmax of the last position's logits).

Symbol convention (the same rule as the Transformers path, :mod:`pfr.models.hf`): the symbol is
scored in the form the model would write it right after the prompt: ``" A"`` after a prompt that
ends in a visible character (the plain prompt ends with ``"Answer:"``), ``"A"`` after one that ends
in whitespace (a chat template's ``assistant\\n``). Each symbol must be exactly one token there
(``tokens(tail + form) == tokens(tail) + [one token]`` on the prompt's last 200 characters), and the
prompt plus the answer token must fit the context; both are checked before anything is evaluated.

Prefix reuse: ``llama_cpp.Llama`` keeps the KV cache of the last evaluated tokens. Before each
prompt we keep the longest common token prefix with what is cached and evaluate only the rest;
each batch is scored in token-lexicographic order, which maximises the shared prefix of
consecutive prompts (quads share the inventory, the input and most options). ``tokens_prompt`` and
``tokens_evaluated`` count what was asked and what was computed; ``prefix_reuse=off`` evaluates
every prompt from scratch (the reference for the prefix-reuse test). The kept prefix ends at a
multiple of :data:`ALIGN` tokens, and prefix reuse needs ``n_batch`` to be a multiple of it (else it is
off): on K-quant files (Q4_K, …) llama.cpp rounds a row differently when it is among the last
``rows % 4`` rows of a decode call, so a cached row must have been computed at the same place in its
call as in a full evaluation. ``benchmarks/llamacpp_prefix_alignment.py`` (llama-cpp-python 0.3.36,
the Qwen2.5-Coder-1.5B preset, 8 TREC requests): keeping the whole common prefix moved 6 of 8
requests' letter scores, by up to 0.31; aligned, all 8 are bit-equal to a full evaluation (the Q4_1
SmolLM2 file was bit-equal either way). Models with sliding-window
attention (Gemma 2/3, …) reuse prefixes too: the context is made with ``swa_full=True`` (llama.cpp's
default in 0.3.36, set here so that it stays), whose cache keeps every position of those layers and
applies the window as a mask, so a rolled-back prefix holds what a full evaluation computes; a
smaller sliding-window cache drops the cells behind the window and cannot be rolled back.
``benchmarks/llamacpp_sliding_window.py`` found reuse bit-equal to full evaluations on gemma3-270m's
demo and CLINC150 prompts, longer than the window plus one batch.

Options (``--model-opt``): those of :data:`BACKEND` (``chat_template`` defaults to on for the Instruct
preset ``smollm2-135m``, off for ``gemma3-270m`` and for files, as in the hf backend), and ``decide``
with ``max_tokens``, ``seed``, ``gen_temperature`` (:mod:`pfr.models.decide`).

Decisions from text (:mod:`pfr.models.generating`): ``decide=generate`` continues the same prompt with
``create_completion`` (greedy at ``gen_temperature=0``, else ``top_k``/``top_p``/``min_p`` off and
llama.cpp's sampler seeded with ``seed``); ``decide=choice`` adds a GBNF grammar whose only sentences
are the request's option symbols (:func:`pfr.models.decide.choice_grammar`), so the answer is exactly
one of them. A batch is completed in token-lexicographic order and each prompt keeps the KV cache of
the prefix it shares with the one before (a text's requests differ only in their options), so the
shared prefix is evaluated once. llama.cpp's logits depend on how a prompt is cut into ``eval`` calls
(measured with llama-cpp-python 0.3.36 on the SmolLM2 GGUF: a last call of one token moves the
next-token logits by up to 0.96 against one pass), so for completions every prompt, alone or in a
batch, is evaluated in the same cuts: calls ending at multiples of :data:`CHUNK` tokens and one last
call of ``CHUNK`` to ``2 * CHUNK - 1`` tokens; only whole leading chunks are reused. A request's
answer is thus the same alone, in a batch and in any order (``prefix_reuse=off``: one call from an
empty cache, as letter scoring's reference).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.data.hashing import file_sha256
from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.decide import Decoding, choice_grammar
from pfr.models.declaration import Declaration, Option
from pfr.models.lm.core import LetterLM, common_prefix
from pfr.models.lm.gguf_cache import PRESET_CHAT, PRESETS
from pfr.models.lm.letters import exact_scores
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate
from pfr.options import POSITIVE, POSITIVE_INT, Switch

MAX_DEFAULT_CTX = 8192
#: completions evaluate their prompt in calls ending at multiples of this many tokens (module docstring).
CHUNK = 64
#: a reused prefix ends at a multiple of this many tokens, and prefix reuse needs ``n_batch`` to be one
#: (module docstring: llama.cpp's repacked K-quant products treat a batch's last rows differently).
ALIGN = 16
__all__ = ["BACKEND", "LlamaCppModel", "file_sha256", "from_spec", "preset_path", "render_chat"]


def preset_path(name: str) -> Path:
    """The GGUF file of a bundled offline model (the same files as the hf presets)."""
    if name not in PRESETS:
        raise ModelError(f"unknown llamacpp preset {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]().path


def render_chat(chat_template: str, text: str, bos: str, eos: str) -> str:
    """The user message ``text`` in a GGUF's Jinja chat template, ending with the assistant header."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(chat_template).render(
            messages=[{"role": "user", "content": text}],
            add_generation_prompt=True,
            bos_token=bos,
            eos_token=eos,
            raise_exception=raise_exception,
        )
    except TemplateError as exc:
        raise ModelError(f"the model's chat template failed: {exc}") from None


class LlamaCppModel(LetterLM):
    """A GGUF model scored in process with ``llama_cpp.Llama`` (see the module docstring)."""

    kind = "llamacpp"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_batch: int = 512,
        chat_template: bool = False,
        prefix_reuse: bool = True,
        temperature: float = 1.0,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ModelError(
                "the llamacpp backend needs llama-cpp-python (make llamacpp, or pip install 'pfr[llamacpp]')"
            ) from None
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise ModelError(f"llamacpp: model file not found: {self.path}")
        self.sha256 = file_sha256(self.path)
        super().__init__(
            name=name or self.path.name,
            source={"sha256": self.sha256},
            params=None,
            chat_template=chat_template,
            temperature=temperature,
            batch_size=16,
            template=template,
        )
        # with n_batch a multiple of ALIGN every decode call starts at a multiple of ALIGN (module docstring)
        self.prefix_reuse = prefix_reuse and n_batch % ALIGN == 0
        threads = n_threads or os.cpu_count() or 1

        def load(ctx: int) -> Any:
            try:
                return Llama(
                    model_path=str(self.path),
                    n_ctx=ctx,
                    n_batch=n_batch,
                    n_threads=threads,
                    n_threads_batch=threads,
                    logits_all=False,
                    swa_full=True,  # prefix reuse rolls back the cache: every position kept (docstring)
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise ModelError(f"llamacpp: cannot load {self.path} as a GGUF model: {exc}") from None

        self.llm = load(n_ctx or 0)  # 0: the model's training context
        self.n_ctx_train = int(self.llm._model.n_ctx_train())
        if n_ctx is not None and n_ctx > self.n_ctx_train:
            raise ModelError(f"n_ctx={n_ctx} is over the training context {self.n_ctx_train} of {self.path}")
        if n_ctx is None and self.n_ctx_train > MAX_DEFAULT_CTX:
            self.llm = load(MAX_DEFAULT_CTX)
        self.n_ctx = int(self.llm.n_ctx())
        from llama_cpp import llama_model_n_swa

        #: the sliding window of the model's local layers (0: none); their cache is full-size (docstring)
        self.n_swa = int(llama_model_n_swa(self.llm._model.model))
        self.n_vocab = int(self.llm.n_vocab())
        self._chat_source: str | None = None
        if chat_template:
            self._chat_source = self.llm.metadata.get("tokenizer.chat_template")
            if not self._chat_source:
                raise ModelError(f"{self.path}: the GGUF has no chat template; use chat_template=off")
        special = self._chat_source is not None
        self.init_symbols(
            lambda text: self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special),
            pieces=lambda ids: [self._piece(t) for t in ids],
            hint="use fewer options or another prompt ending",
        )
        self.context_limit = self.n_ctx
        self.context_hint = f"--model-opt n_ctx, at most {self.n_ctx_train}"
        self.context_label = f"n_ctx={self.n_ctx}"
        from llama_cpp import llama_model_n_params

        #: parameters counted from the GGUF's tensors (part of the identity).
        self.params = int(llama_model_n_params(self.llm._model.model))
        self.tokens_prompt = 0
        self.tokens_evaluated = 0
        #: leading cached tokens whose KV came from :func:`prompt_cuts` (reusable by a completion).
        self._cut_cached = 0

    def settings(self) -> dict[str, Any]:
        return {"n_ctx": self.n_ctx}

    def wrap_chat(self, text: str) -> str:
        """``text`` in the GGUF's own Jinja chat template (its BOS and EOS pieces filled in)."""
        assert self._chat_source is not None
        bos = self._piece(self.llm.token_bos())
        eos = self._piece(self.llm.token_eos())
        return render_chat(self._chat_source, text, bos, eos)

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def encode(self, prompt: str) -> list[int]:
        """Prompt tokens as the model sees them (BOS as the GGUF says; special tokens parsed in chat mode)."""
        special = self._chat_source is not None
        bos = self._piece(self.llm.token_bos())
        add_bos = not (special and bos and prompt.startswith(bos))
        return list(self.llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=special))

    tokenize = encode  # the name earlier versions used
    symbol_token = LetterLM.symbol_id

    def close(self) -> None:
        """Free the model and its context now rather than at garbage collection; twice is fine."""
        llm, self.llm = getattr(self, "llm", None), None
        closer = getattr(llm, "close", None)
        if callable(closer):
            closer()

    def _next_token_logprobs(self, tokens: list[int]) -> Any:
        import numpy as np

        llm = self.llm
        keep = 0
        if self.prefix_reuse and llm.n_tokens:
            # re-evaluate at least one token to get fresh logits, from a multiple of ALIGN on
            keep = min(common_prefix(llm._input_ids, tokens), len(tokens) - 1)
            keep -= keep % ALIGN
        llm.n_tokens = keep
        self._cut_cached = min(self._cut_cached, keep)  # what follows is not evaluated in prompt_cuts
        llm.eval(tokens[keep:])  # removes KV entries from position `keep` on, then decodes the rest
        self.tokens_prompt += len(tokens)
        self.tokens_evaluated += len(tokens) - keep
        raw = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self.n_vocab,)).astype(np.float64)
        top = raw.max()
        return raw - (top + math.log(float(np.exp(raw - top).sum()))), len(tokens) - keep

    def _prefill(self, tokens: list[int]) -> int:
        """Evaluate ``tokens`` in :func:`prompt_cuts`, reusing the cached whole chunks; the tokens evaluated."""
        llm = self.llm
        cuts = prompt_cuts(len(tokens))
        keep = 0
        if self.prefix_reuse and llm.n_tokens:
            common = common_prefix(llm._input_ids[: self._cut_cached], tokens)
            keep = max([c for c in cuts[:-1] if c <= common], default=0)
        if not self.prefix_reuse:
            cuts = [len(tokens)]  # the reference: one call from an empty cache
        llm.n_tokens = keep  # eval drops the KV entries from `keep` on
        start = keep
        for end in cuts:
            if end > keep:
                llm.eval(tokens[start:end])
                start = end
        self._cut_cached = cuts[-2] if len(cuts) > 1 else 0
        return len(tokens) - keep

    def complete(self, tokens: list[int], request: Request, decoding: Decoding) -> str:
        """The completion of ``tokens`` (the module docstring: greedy or seeded, grammar for ``choice``)."""
        from llama_cpp import LlamaGrammar

        llm = self.llm
        grammar = None
        if decoding.mode == "choice":
            grammar = LlamaGrammar.from_string(choice_grammar(request), verbose=False)
        evaluated = self._prefill(tokens)
        # The prompt is now the whole cache with fresh logits: create_completion samples right away.
        out = llm.create_completion(
            tokens,
            max_tokens=decoding.max_tokens,
            temperature=decoding.temperature,
            seed=decoding.seed,
            top_k=0,
            top_p=1.0,
            min_p=0.0,
            repeat_penalty=1.0,
            grammar=grammar,
        )
        self.tokens_prompt += len(tokens)
        self.tokens_evaluated += evaluated
        return str(out["choices"][0]["text"])

    def complete_many(self, encoded: Sequence[list[int]], requests: Sequence[Request], decoding: Decoding) -> list[str]:
        """One completion per prompt, in token order so that consecutive prompts share their prefix."""
        out = [""] * len(encoded)
        for i in sorted(range(len(encoded)), key=lambda i: encoded[i]):
            out[i] = self.complete(encoded[i], requests[i], decoding)
        return out

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        prepared = self.prepare(requests)
        order = sorted(range(len(prepared)), key=lambda i: prepared[i].tokens)
        out: list[Scores | None] = [None] * len(prepared)
        for i in order:
            tokens, ids = prepared[i]
            logprobs, evaluated = self._next_token_logprobs(tokens)
            meta = {"prompt_tokens": len(tokens), "evaluated_tokens": evaluated}
            out[i] = exact_scores(logprobs, ids, meta, mass=False)
        return [s for s in out if s is not None]


def prompt_cuts(n: int) -> list[int]:
    """Where a completion's prompt of ``n`` tokens is cut into ``eval`` calls: the ends of the calls.

    Multiples of :data:`CHUNK`, then ``n``; the last call has ``CHUNK`` to ``2 * CHUNK - 1`` tokens (or all
    of a shorter prompt), never the one token whose logits differ from a longer call's."""
    return [*range(CHUNK, n - CHUNK + 1, CHUNK), n]


def from_spec(rest: str, opts: Mapping[str, Any]) -> LlamaCppModel:
    """``llamacpp:PATH.gguf`` or ``llamacpp:preset:NAME`` with the options of :data:`BACKEND`, parsed."""
    chat_default = False
    if rest.startswith("preset:"):
        name = rest.removeprefix("preset:")
        path, label = preset_path(name), name
        chat_default = PRESET_CHAT[name]
    elif rest:
        path, label = Path(rest), None
    else:
        raise ModelError("llamacpp model spec must be llamacpp:PATH.gguf or llamacpp:preset:NAME")
    return LlamaCppModel(
        path,
        name=label,
        n_ctx=opts["n_ctx"],
        n_threads=opts["n_threads"],
        n_batch=opts["n_batch"],
        chat_template=chat_default if opts["chat_template"] is None else opts["chat_template"],
        prefix_reuse=opts["prefix_reuse"],
        temperature=float(opts["temperature"]),
    )


#: the ``llamacpp:`` backend: options, decide modes and factory (docs/backends-serving.md's table is written from it)
BACKEND = Declaration("llamacpp", from_spec, options=(
    Option("n_ctx", None, "context length; a prompt over it is an error naming the request", POSITIVE_INT,
           shown=f"the model's training context, at most {MAX_DEFAULT_CTX}"),
    Option("n_threads", None, "CPU threads for prompt evaluation", POSITIVE_INT, shown="all cores"),
    Option("n_batch", 512, "tokens per llama.cpp decode call (a multiple of 16, or prefix reuse is off)", POSITIVE_INT),
    Option("chat_template", None, "wrap the prompt in the GGUF's Jinja chat template (`tokenizer.chat_template`), "
           "rendered with a sandboxed Jinja environment, as one user message with the generation prompt", Switch(),
           shown="`on` for the Instruct preset `smollm2-135m`, else `off`"),
    Option("prefix_reuse", True, "keep the KV cache of the longest common token prefix with the previous prompt",
           Switch()),
    Option("temperature", 1.0, "score temperature T", POSITIVE),
), decides=("scores", "generate", "choice"), decide_help={
    "decide": "`generate`: `create_completion` on the same prompt, read by the one parse rule; `choice`: the same "
    "under a GBNF grammar of the option symbols (always one option)",
    "max_tokens": "new tokens generated per request (with `decide`)",
    "seed": "sampling seed of each request's generation, recorded in the identity",
    "gen_temperature": "0: greedy (argmax of the full-vocabulary distribution); above 0: sampled from "
    "softmax(logits / T)",
})  # fmt: skip
